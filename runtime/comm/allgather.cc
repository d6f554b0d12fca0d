// Ring all-gather: in step s rank r forwards block (r - s) mod N to the right and receives block
// (r - s - 1) mod N from the left, N-1 steps in all, as one Transport::RingPass. Every block is
// received once, into its own place, and the block a step sends is the one the step before
// received (or the rank's own), so no receive can overwrite what a send still in flight reads.
#include <cstring>
#include <vector>

#include "runtime/base/status.h"
#include "runtime/comm/collectives.h"

namespace hptrain::comm {
namespace {

absl::Status Pass(Transport& transport, const std::vector<Transport::PassStep>& steps, uint64_t tag,
                  const char* what) {
  const int n = transport.size();
  const int r = transport.rank();
  HPTRAIN_RETURN_IF_ERROR(transport.RingPass(RingIndex(r + 1, n), RingIndex(r - 1, n), steps, tag,
                                             [](int) { return absl::OkStatus(); }),
                          what, " (rank ", r, " of ", n, ")");
  return absl::OkStatus();
}

}  // namespace

absl::Status RingAllGather(Transport& transport, const void* send, void* recv, size_t block_bytes,
                           uint64_t tag) {
  const int n = transport.size();
  const int r = transport.rank();
  char* out = static_cast<char*>(recv);
  std::memcpy(out + r * block_bytes, send, block_bytes);
  if (n == 1 || block_bytes == 0) return absl::OkStatus();
  std::vector<Transport::PassStep> steps(n - 1);
  for (int s = 0; s < n - 1; ++s) {
    const int send_block = RingIndex(r - s, n);
    const int recv_block = RingIndex(r - s - 1, n);
    steps[s] = {out + send_block * block_bytes, block_bytes, out + recv_block * block_bytes,
                block_bytes};
  }
  return Pass(transport, steps, tag, "all-gather");
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
  std::vector<Transport::PassStep> steps(n - 1);
  for (int s = 0; s < n - 1; ++s) {
    const std::string& out = (*blocks)[RingIndex(r - s, n)];
    std::string& in = (*blocks)[RingIndex(r - s - 1, n)];
    steps[s] = {out.data(), out.size(), in.data(), in.size()};
  }
  return Pass(transport, steps, tag, "all-gather-v");
}

}  // namespace hptrain::comm
