#include "runtime/comm/communicator.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/comm/collectives.h"

namespace hptrain::comm {

std::shared_ptr<Work> Communicator::AllReduceSumAsync(const BufferRef& buffer) {
  const bool device = device_stream() != nullptr;
  if ((buffer.location == Location::kDevice) != device) {
    return Work::Done(absl::InvalidArgumentError(
        absl::StrCat("all-reduce of a ", device ? "host" : "device", " buffer on a ",
                     device ? "device" : "host", " communicator")));
  }
  const int64_t sent = bytes_sent();
  const int64_t received = bytes_received();
  absl::Status status = AllReduceSum(buffer.floats(), buffer.count);
  return Work::Done(std::move(status), bytes_sent() - sent, bytes_received() - received);
}

TransportCommunicator::TransportCommunicator(std::unique_ptr<Transport> transport)
    : transport_(std::move(transport)) {}

TransportCommunicator::~TransportCommunicator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::Status TransportCommunicator::RunInOrder(
    const std::function<absl::Status(uint64_t tag)>& collective) {
  uint64_t tag;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t ticket = next_ticket_++;
    tag = next_tag_++;
    cv_.wait(lock, [&] { return finished_tickets_ == ticket; });
  }
  absl::Status status = collective(tag);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++finished_tickets_;
  }
  cv_.notify_all();
  return status;
}

std::shared_ptr<Work> TransportCommunicator::AllReduceSumAsync(const BufferRef& buffer) {
  if (buffer.location != Location::kHost) {
    return Work::Done(
        absl::InvalidArgumentError("all-reduce of a device buffer on a host communicator"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  // Long enough for every collective queued before this one to fail on its own timeout first.
  const std::chrono::milliseconds timeout =
      2 * transport_->timeout() * static_cast<int64_t>(queue_.size() + 1);
  auto work = std::make_shared<HostWork>(timeout);
  queue_.push_back(Queued{next_ticket_++, next_tag_++, buffer, work});
  if (!thread_.joinable()) thread_ = std::thread([this] { CommLoop(); });
  cv_.notify_all();
  return work;
}

void TransportCommunicator::CommLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] {
      return (stop_ && queue_.empty()) ||
             (!queue_.empty() && finished_tickets_ == queue_.front().ticket);
    });
    if (queue_.empty()) return;  // stopping, with nothing left to run
    Queued op = std::move(queue_.front());
    queue_.pop_front();
    const absl::Status failed = queue_failed_;
    lock.unlock();
    absl::Status status;
    int64_t sent = 0, received = 0;
    const auto start = std::chrono::steady_clock::now();
    if (failed.ok()) {
      status = RingAllReduceSum(*transport_, op.buffer.floats(), op.buffer.count, op.tag);
      RingAllReduceBytes(op.buffer.count, size(), rank(), &sent, &received);
    } else {
      status = absl::AbortedError(
          absl::StrCat("all-reduce not run: an earlier one failed: ", failed.message()));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    op.work->Complete(status, sent, received, seconds);
    lock.lock();
    if (failed.ok() && !status.ok()) queue_failed_ = status;
    if (queue_.empty()) queue_failed_ = absl::OkStatus();  // later collectives run again
    ++finished_tickets_;
    cv_.notify_all();
  }
}

absl::Status TransportCommunicator::AllReduceSum(float* data, size_t count) {
  return RunInOrder(
      [&](uint64_t tag) { return RingAllReduceSum(*transport_, data, count, tag); });
}

absl::Status TransportCommunicator::AllReduceSumCompressed(float* data, size_t count,
                                                          ChunkCodec& codec) {
  return RunInOrder([&](uint64_t tag) {
    return CompressedRingAllReduceSum(*transport_, data, count, codec, tag);
  });
}

absl::Status TransportCommunicator::AllGather(const void* send, void* recv, size_t block_bytes) {
  return RunInOrder(
      [&](uint64_t tag) { return RingAllGather(*transport_, send, recv, block_bytes, tag); });
}

absl::Status TransportCommunicator::AllGatherV(const void* send, size_t send_bytes,
                                              std::vector<std::string>* blocks) {
  return RunInOrder(
      [&](uint64_t tag) { return RingAllGatherV(*transport_, send, send_bytes, blocks, tag); });
}

absl::Status TransportCommunicator::Broadcast(void* data, size_t bytes, int root) {
  return RunInOrder(
      [&](uint64_t tag) { return comm::Broadcast(*transport_, data, bytes, root, tag); });
}

absl::Status TransportCommunicator::Barrier() {
  // A one-byte all-gather: nobody leaves before everyone's byte has gone round the ring. It is
  // control traffic, but counted like any other payload.
  return RunInOrder([&](uint64_t tag) {
    char token = 1;
    std::string all(static_cast<size_t>(size()), '\0');
    return RingAllGather(*transport_, &token, all.data(), 1, tag);
  });
}

}  // namespace hptrain::comm
