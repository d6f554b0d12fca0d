#include "runtime/comm/transport.h"

namespace hptrain::comm {

absl::Status Transport::SendRecv(int to, const void* send, size_t send_bytes, int from, void* recv,
                                 size_t recv_bytes, uint64_t tag) {
  absl::Status status = DoSendRecv(to, send, send_bytes, from, recv, recv_bytes, tag);
  if (status.ok()) {
    if (send != nullptr) counters_.sent.fetch_add(static_cast<int64_t>(send_bytes));
    if (recv != nullptr) counters_.received.fetch_add(static_cast<int64_t>(recv_bytes));
  }
  return status;
}

}  // namespace hptrain::comm
