#include "runtime/comm/hierarchical_communicator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/comm/collectives.h"

namespace hptrain::comm {
namespace {

// Tags: each collective's tag t is spread over spaces, (t << 3) | space, so the stages of one
// hierarchical all-reduce and the node communicator's own collectives never share a tag.
constexpr uint64_t kFlatSpace = 0;
constexpr uint64_t kNodeStageSpace = 1;
constexpr uint64_t kLeaderStageSpace = 2;
constexpr uint64_t kNodeCommSpace = 3;
constexpr uint64_t kBroadcastStageSpace = 4;
uint64_t SpacedTag(uint64_t tag, uint64_t space) { return (tag << 3) | space; }

}  // namespace

// The job-wide transport, with the bytes exchanged with ranks on other nodes counted apart.
class HierarchicalCommunicator::CountingTransport : public Transport {
 public:
  CountingTransport(std::unique_ptr<Transport> base, const Topology* topology)
      : base_(std::move(base)), topology_(topology) {}
  int rank() const override { return base_->rank(); }
  int size() const override { return base_->size(); }
  std::chrono::milliseconds timeout() const override { return base_->timeout(); }
  void AbortUntimedRecvs() override { base_->AbortUntimedRecvs(); }
  const ByteCounters& inter_node() const { return inter_node_; }

 protected:
  absl::Status DoSendRecv(int to, const void* send, size_t send_bytes, int from, void* recv,
                          size_t recv_bytes, uint64_t tag) override {
    HPTRAIN_RETURN_IF_ERROR(base_->SendRecv(to, send, send_bytes, from, recv, recv_bytes, tag));
    CountInterNode(to, send != nullptr ? send_bytes : 0, from, recv != nullptr ? recv_bytes : 0);
    return absl::OkStatus();
  }
  absl::Status DoRingPass(int to, int from, absl::Span<const PassStep> steps, uint64_t tag,
                          const OnReceived& on_received) override {
    HPTRAIN_RETURN_IF_ERROR(base_->RingPass(to, from, steps, tag, on_received));
    size_t sent = 0, received = 0;
    for (const PassStep& step : steps) {
      if (step.send != nullptr) sent += step.send_bytes;
      if (step.recv != nullptr) received += step.recv_bytes;
    }
    CountInterNode(to, sent, from, received);
    return absl::OkStatus();
  }
  absl::Status DoUntimedRecv(int from, void* recv, size_t bytes, uint64_t tag) override {
    HPTRAIN_RETURN_IF_ERROR(base_->UntimedRecv(from, recv, bytes, tag));
    CountInterNode(from, 0, from, bytes);
    return absl::OkStatus();
  }

 private:
  void CountInterNode(int to, size_t sent, int from, size_t received) {
    const int node = topology_->node_of(rank());
    if (sent > 0 && topology_->node_of(to) != node) {
      inter_node_.sent.fetch_add(static_cast<int64_t>(sent));
    }
    if (received > 0 && topology_->node_of(from) != node) {
      inter_node_.received.fetch_add(static_cast<int64_t>(received));
    }
  }

  std::unique_ptr<Transport> base_;
  const Topology* topology_;
  ByteCounters inter_node_;
};

// A subset of the job's ranks (`members`, ascending) as a transport of its own: group rank i is
// job rank members[i]. Transfers go through the job-wide transport (and are counted there) with
// the tag moved into the group's tag space.
class HierarchicalCommunicator::GroupTransport : public Transport {
 public:
  GroupTransport(Transport* parent, std::vector<int> members, int group_rank, uint64_t space)
      : parent_(parent), members_(std::move(members)), rank_(group_rank), space_(space) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }

 protected:
  absl::Status DoSendRecv(int to, const void* send, size_t send_bytes, int from, void* recv,
                          size_t recv_bytes, uint64_t tag) override {
    return parent_->SendRecv(members_[to], send, send_bytes, members_[from], recv, recv_bytes,
                             SpacedTag(tag, space_));
  }
  absl::Status DoRingPass(int to, int from, absl::Span<const PassStep> steps, uint64_t tag,
                          const OnReceived& on_received) override {
    return parent_->RingPass(members_[to], members_[from], steps, SpacedTag(tag, space_),
                             on_received);
  }

 private:
  Transport* parent_;
  std::vector<int> members_;
  int rank_;
  uint64_t space_;
};

HierarchicalCommunicator::HierarchicalCommunicator(std::unique_ptr<Transport> transport,
                                                   Topology topology, Options options)
    : topology_(std::move(topology)), options_(options) {
  const int me = transport->rank();
  transport_ = std::make_unique<CountingTransport>(std::move(transport), &topology_);
  const int node = topology_.node_of(me);
  const std::vector<int>& members = topology_.ranks_of(node);
  const int local = topology_.local_rank(me);
  node_transport_ =
      std::make_unique<GroupTransport>(transport_.get(), members, local, kNodeStageSpace);
  broadcast_transport_ =
      std::make_unique<GroupTransport>(transport_.get(), members, local, kBroadcastStageSpace);
  node_comm_ = std::make_unique<TransportCommunicator>(
      std::make_unique<GroupTransport>(transport_.get(), members, local, kNodeCommSpace));
  if (topology_.is_leader(me)) {
    leader_transport_ = std::make_unique<GroupTransport>(transport_.get(), topology_.leaders(),
                                                         node, kLeaderStageSpace);
  }
}

HierarchicalCommunicator::~HierarchicalCommunicator() = default;

int HierarchicalCommunicator::rank() const { return transport_->rank(); }
int HierarchicalCommunicator::size() const { return transport_->size(); }

absl::Status HierarchicalCommunicator::Hierarchical(float* data, size_t count, ChunkCodec* codec) {
  const uint64_t tag = next_tag_++;
  if (count == 0) return absl::OkStatus();
  if (topology_.num_nodes() == 1) {
    // One node: the flat ring over the same ranks in the same order, hence its result exactly.
    return codec != nullptr
               ? CompressedRingAllReduceSum(*transport_, data, count, *codec,
                                            SpacedTag(tag, kFlatSpace))
               : RingAllReduceSum(*transport_, data, count, SpacedTag(tag, kFlatSpace));
  }
  const bool in_node = node_transport_->size() > 1;
  if (in_node) {
    absl::Status status =
        codec != nullptr && !options_.compress_inter_node_only
            ? CompressedRingAllReduceSum(*node_transport_, data, count, *codec, tag)
            : RingAllReduceSum(*node_transport_, data, count, tag);
    HPTRAIN_RETURN_IF_ERROR(status, "hierarchical all-reduce, intra-node stage");
  }
  if (leader_transport_ != nullptr) {
    absl::Status status =
        codec != nullptr ? CompressedRingAllReduceSum(*leader_transport_, data, count, *codec, tag)
                         : RingAllReduceSum(*leader_transport_, data, count, tag);
    HPTRAIN_RETURN_IF_ERROR(status, "hierarchical all-reduce, inter-node stage (node leader ",
                            rank(), ")");
  }
  inter_node_collectives_.fetch_add(1);
  if (in_node) {
    HPTRAIN_RETURN_IF_ERROR(
        comm::Broadcast(*broadcast_transport_, data, count * sizeof(float), 0, tag),
        "hierarchical all-reduce, intra-node broadcast");
  }
  return absl::OkStatus();
}

absl::Status HierarchicalCommunicator::AllReduceSum(float* data, size_t count) {
  if (options_.hierarchical) return Hierarchical(data, count, nullptr);
  if (topology_.num_nodes() > 1 && count > 0) inter_node_collectives_.fetch_add(1);
  return RingAllReduceSum(*transport_, data, count, SpacedTag(next_tag_++, kFlatSpace));
}

absl::Status HierarchicalCommunicator::AllReduceSumCompressed(float* data, size_t count,
                                                              ChunkCodec& codec) {
  if (options_.hierarchical) return Hierarchical(data, count, &codec);
  if (topology_.num_nodes() > 1 && count > 0) inter_node_collectives_.fetch_add(1);
  return CompressedRingAllReduceSum(*transport_, data, count, codec,
                                    SpacedTag(next_tag_++, kFlatSpace));
}

absl::Status HierarchicalCommunicator::AllGather(const void* send, void* recv, size_t block_bytes) {
  return RingAllGather(*transport_, send, recv, block_bytes, SpacedTag(next_tag_++, kFlatSpace));
}

absl::Status HierarchicalCommunicator::AllGatherV(const void* send, size_t send_bytes,
                                                  std::vector<std::string>* blocks) {
  return RingAllGatherV(*transport_, send, send_bytes, blocks, SpacedTag(next_tag_++, kFlatSpace));
}

absl::Status HierarchicalCommunicator::Broadcast(void* data, size_t bytes, int root) {
  return comm::Broadcast(*transport_, data, bytes, root, SpacedTag(next_tag_++, kFlatSpace));
}

absl::Status HierarchicalCommunicator::Barrier() {
  char token = 1;
  std::string all(static_cast<size_t>(size()), '\0');
  return RingAllGather(*transport_, &token, all.data(), 1, SpacedTag(next_tag_++, kFlatSpace));
}

int64_t HierarchicalCommunicator::bytes_sent() const { return transport_->counters().sent.load(); }
int64_t HierarchicalCommunicator::bytes_received() const {
  return transport_->counters().received.load();
}
int64_t HierarchicalCommunicator::inter_node_bytes_sent() const {
  return transport_->inter_node().sent.load();
}
int64_t HierarchicalCommunicator::inter_node_bytes_received() const {
  return transport_->inter_node().received.load();
}

Communicator* HierarchicalCommunicator::node_communicator() { return node_comm_.get(); }
Transport* HierarchicalCommunicator::transport() { return transport_.get(); }

}  // namespace hptrain::comm
