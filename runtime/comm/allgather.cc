// Ring all-gather: in step s rank r forwards block (r - s) mod N to the right and receives block
// (r - s - 1) mod N from the left, N-1 steps in all.
#include <cstring>

#include "runtime/base/status.h"
#include "runtime/comm/collectives.h"

namespace hptrain::comm {

absl::Status RingAllGather(Transport& transport, const void* send, void* recv, size_t block_bytes,
                           uint64_t tag) {
  const int n = transport.size();
  const int r = transport.rank();
  char* out = static_cast<char*>(recv);
  std::memcpy(out + r * block_bytes, send, block_bytes);
  if (n == 1 || block_bytes == 0) return absl::OkStatus();
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  for (int s = 0; s < n - 1; ++s) {
    int send_block = ((r - s) % n + n) % n;
    int recv_block = ((r - s - 1) % n + n) % n;
    HPTRAIN_RETURN_IF_ERROR(
        transport.SendRecv(right, out + send_block * block_bytes, block_bytes, left,
                           out + recv_block * block_bytes, block_bytes, tag),
        "all-gather step ", s + 1, " of ", n - 1, " (rank ", r, ")");
  }
  return absl::OkStatus();
}

absl::Status RingAllGatherV(Transport& transport, const void* send, size_t send_bytes,
                            std::vector<std::string>* blocks, uint64_t tag) {
  const int n = transport.size();
  const int r = transport.rank();
  std::vector<uint64_t> sizes(n);
  uint64_t mine = send_bytes;
  HPTRAIN_RETURN_IF_ERROR(RingAllGather(transport, &mine, sizes.data(), sizeof(mine), tag),
                          "all-gather-v sizes");
  blocks->assign(n, std::string());
  for (int j = 0; j < n; ++j) (*blocks)[j].resize(sizes[j]);
  if (send_bytes > 0) std::memcpy((*blocks)[r].data(), send, send_bytes);
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  for (int s = 0; s < n - 1; ++s) {
    int send_block = ((r - s) % n + n) % n;
    int recv_block = ((r - s - 1) % n + n) % n;
    std::string& out = (*blocks)[send_block];
    std::string& in = (*blocks)[recv_block];
    HPTRAIN_RETURN_IF_ERROR(
        transport.SendRecv(right, out.data(), out.size(), left, in.data(), in.size(), tag),
        "all-gather-v step ", s + 1, " of ", n - 1, " (rank ", r, ")");
  }
  return absl::OkStatus();
}

}  // namespace hptrain::comm
