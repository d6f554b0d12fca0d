// Chain broadcast: root -> root+1 -> ... -> root-1. Used for small buffers (initial parameters,
// metadata), where a pipelined tree would not pay for itself.
#include "runtime/base/status.h"
#include "runtime/comm/collectives.h"

namespace hptrain::comm {

absl::Status Broadcast(Transport& transport, void* data, size_t bytes, int root, uint64_t tag) {
  const int n = transport.size();
  const int r = transport.rank();
  if (n == 1 || bytes == 0) return absl::OkStatus();
  const int position = RingIndex(r - root, n);  // 0 at the root
  const int right = RingIndex(r + 1, n);
  const int left = RingIndex(r - 1, n);
  if (position > 0) {
    HPTRAIN_RETURN_IF_ERROR(transport.SendRecv(0, nullptr, 0, left, data, bytes, tag),
                            "broadcast receive from rank ", left);
  }
  if (position < n - 1) {
    HPTRAIN_RETURN_IF_ERROR(transport.SendRecv(right, data, bytes, 0, nullptr, 0, tag),
                            "broadcast send to rank ", right);
  }
  return absl::OkStatus();
}

}  // namespace hptrain::comm
