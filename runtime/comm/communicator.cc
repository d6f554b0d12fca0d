#include "runtime/comm/communicator.h"

#include "runtime/comm/collectives.h"

namespace hptrain::comm {

TransportCommunicator::TransportCommunicator(std::unique_ptr<Transport> transport)
    : transport_(std::move(transport)) {}

absl::Status TransportCommunicator::AllReduceSum(float* data, size_t count) {
  return RingAllReduceSum(*transport_, data, count, next_tag_++);
}

absl::Status TransportCommunicator::AllReduceSumCompressed(float* data, size_t count,
                                                          ChunkCodec& codec) {
  return CompressedRingAllReduceSum(*transport_, data, count, codec, next_tag_++);
}

absl::Status TransportCommunicator::AllGather(const void* send, void* recv, size_t block_bytes) {
  return RingAllGather(*transport_, send, recv, block_bytes, next_tag_++);
}

absl::Status TransportCommunicator::AllGatherV(const void* send, size_t send_bytes,
                                              std::vector<std::string>* blocks) {
  return RingAllGatherV(*transport_, send, send_bytes, blocks, next_tag_++);
}

absl::Status TransportCommunicator::Broadcast(void* data, size_t bytes, int root) {
  return comm::Broadcast(*transport_, data, bytes, root, next_tag_++);
}

absl::Status TransportCommunicator::Barrier() {
  // A one-byte all-gather: nobody leaves before everyone's byte has gone round the ring. It is
  // control traffic, but counted like any other payload.
  char token = 1;
  std::string all(static_cast<size_t>(size()), '\0');
  return RingAllGather(*transport_, &token, all.data(), 1, next_tag_++);
}

}  // namespace hptrain::comm
