#include "runtime/comm/transport.h"

namespace hptrain::comm {

void Transport::Count(const void* send, size_t send_bytes, const void* recv, size_t recv_bytes) {
  if (send != nullptr) counters_.sent.fetch_add(static_cast<int64_t>(send_bytes));
  if (recv != nullptr) counters_.received.fetch_add(static_cast<int64_t>(recv_bytes));
}

absl::Status Transport::SendRecv(int to, const void* send, size_t send_bytes, int from, void* recv,
                                 size_t recv_bytes, uint64_t tag) {
  absl::Status status = DoSendRecv(to, send, send_bytes, from, recv, recv_bytes, tag);
  if (status.ok()) Count(send, send_bytes, recv, recv_bytes);
  return status;
}

absl::Status Transport::UntimedRecv(int from, void* recv, size_t bytes, uint64_t tag) {
  absl::Status status = DoUntimedRecv(from, recv, bytes, tag);
  if (status.ok()) Count(nullptr, 0, recv, bytes);
  return status;
}

absl::Status Transport::DoUntimedRecv(int, void*, size_t, uint64_t) {
  return absl::UnimplementedError("this transport has no untimed receives");
}

absl::Status Transport::RingPass(int to, int from, absl::Span<const PassStep> steps, uint64_t tag,
                                 const OnReceived& on_received) {
  absl::Status status = DoRingPass(to, from, steps, tag, on_received);
  if (status.ok()) {
    for (const PassStep& step : steps)
      Count(step.send, step.send_bytes, step.recv, step.recv_bytes);
  }
  return status;
}

absl::Status Transport::DoRingPass(int to, int from, absl::Span<const PassStep> steps, uint64_t tag,
                                   const OnReceived& on_received) {
  for (size_t s = 0; s < steps.size(); ++s) {
    const PassStep& step = steps[s];
    absl::Status status =
        DoSendRecv(to, step.send, step.send_bytes, from, step.recv, step.recv_bytes, tag);
    if (!status.ok()) return status;
    status = on_received(static_cast<int>(s));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace hptrain::comm
