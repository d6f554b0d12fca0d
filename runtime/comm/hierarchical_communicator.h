// HierarchicalCommunicator: a CPU Communicator that knows the job's nodes (topology.h).
//
// It counts the bytes it exchanges with ranks on its own node and on other nodes apart
// (intra_node_bytes_*, inter_node_bytes_*: docs/algorithms.md §0 and §2c), and offers the
// communicator of this rank's node (node_communicator) to strategies that act inside a node
// (`hierarchical`, docs/algorithms.md §2b).
//
// With Options::hierarchical, all-reduces run as the hierarchical all-reduce of §2b (iv)
// (spec.communicator.hierarchical):
//   1. intra-node ring all-reduce among the ranks of each node;
//   2. inter-node ring all-reduce among the node leaders (lowest rank of each node) only;
//   3. intra-node chain broadcast of the result from each leader.
// Only the leaders put bytes on the network: about 2(M−1)/M · S per node per all-reduce, against
// about 2(N−1)/N · S for the flat ring over N ranks on M nodes. Nodes may differ in size. With one
// node, stages 2 and 3 are skipped and the result is the flat ring's, bit for bit. Every rank
// ends bit-identical (the leaders' result is copied). The compressed all-reduce encodes the
// inter-node stage with the codec, and the intra-node stage too unless
// Options::compress_inter_node_only (spec.communicator.compressInterNodeOnly).
// Without Options::hierarchical, all-reduces are the flat ring over every rank (only the
// counters differ from TransportCommunicator). All-gathers, broadcasts and barriers are flat.
//
// Thread-safety: as Communicator.
#ifndef HPTRAIN_RUNTIME_COMM_HIERARCHICAL_COMMUNICATOR_H_
#define HPTRAIN_RUNTIME_COMM_HIERARCHICAL_COMMUNICATOR_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/comm/topology.h"

namespace hptrain::comm {

class HierarchicalCommunicator : public Communicator {
 public:
  struct Options {
    bool hierarchical = true;               // all-reduce in three stages (see above)
    bool compress_inter_node_only = false;  // compressed all-reduce: only stage 2 encoded
  };

  // `transport` connects every rank of the job; `topology` covers exactly its ranks.
  HierarchicalCommunicator(std::unique_ptr<Transport> transport, Topology topology,
                           Options options);
  ~HierarchicalCommunicator() override;

  int rank() const override;
  int size() const override;
  absl::Status AllReduceSum(float* data, size_t count) override;
  absl::Status AllReduceSumCompressed(float* data, size_t count, ChunkCodec& codec) override;
  absl::Status AllGather(const void* send, void* recv, size_t block_bytes) override;
  absl::Status AllGatherV(const void* send, size_t send_bytes,
                          std::vector<std::string>* blocks) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Barrier() override;
  int64_t bytes_sent() const override;
  int64_t bytes_received() const override;
  int64_t inter_node_bytes_sent() const override;
  int64_t inter_node_bytes_received() const override;
  // The ranks of this rank's node, numbered 0.. in rank order (its leader is 0). Its bytes are
  // also counted by this communicator.
  Communicator* node_communicator() override;
  // The job-wide transport (counted like the collectives).
  Transport* transport() override;

  const Topology& topology() const { return topology_; }
  // All-reduces that crossed the network (stage 2 ran, or the flat ring spanned several nodes),
  // counted on every rank alike.
  int64_t inter_node_collectives() const { return inter_node_collectives_.load(); }

 private:
  class CountingTransport;
  class GroupTransport;

  absl::Status Hierarchical(float* data, size_t count, ChunkCodec* codec);

  Topology topology_;
  Options options_;
  std::unique_ptr<CountingTransport> transport_;         // every rank; splits the counters by node
  std::unique_ptr<GroupTransport> node_transport_;       // this rank's node: stage 1
  std::unique_ptr<GroupTransport> broadcast_transport_;  // the same ranks: stage 3
  std::unique_ptr<GroupTransport> leader_transport_;     // the leaders; null on other ranks
  std::unique_ptr<TransportCommunicator> node_comm_;     // over node_transport_ (tags of its own)
  uint64_t next_tag_ = 1;
  std::atomic<int64_t> inter_node_collectives_{0};
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_HIERARCHICAL_COMMUNICATOR_H_
