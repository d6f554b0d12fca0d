// Ring all-reduce (Patarasuk & Yuan; the algorithm of Horovod and NCCL's ring):
//   1. The buffer is cut into N chunks.
//   2. Reduce-scatter, N-1 steps: in step s, rank r sends chunk (r - s) mod N to its right
//      neighbour and adds the chunk (r - s - 1) mod N received from its left neighbour into its
//      own copy. Afterwards rank r owns the full sum of chunk (r + 1) mod N.
//   3. All-gather, N-1 steps: each rank forwards the last completed chunk to the right and stores
//      the one from the left, so every rank ends with every summed chunk, bit for bit.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/comm/collectives.h"

namespace hptrain::comm {

void ChunkRange(size_t count, int parts, int index, size_t* begin, size_t* end) {
  size_t base = count / parts;
  size_t extra = count % parts;
  size_t i = static_cast<size_t>(index);
  *begin = i * base + std::min(i, extra);
  *end = *begin + base + (i < extra ? 1 : 0);
}

absl::Status RingAllReduceSum(Transport& transport, float* data, size_t count, uint64_t tag) {
  const int n = transport.size();
  const int r = transport.rank();
  if (n == 1 || count == 0) return absl::OkStatus();
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  auto mod = [n](int x) { return ((x % n) + n) % n; };

  size_t max_chunk = (count + n - 1) / n;
  std::vector<float> incoming(max_chunk);

  for (int s = 0; s < n - 1; ++s) {
    size_t sb, se, rb, re;
    ChunkRange(count, n, mod(r - s), &sb, &se);
    ChunkRange(count, n, mod(r - s - 1), &rb, &re);
    HPTRAIN_RETURN_IF_ERROR(
        transport.SendRecv(right, data + sb, (se - sb) * sizeof(float), left, incoming.data(),
                           (re - rb) * sizeof(float), tag),
        "all-reduce reduce-scatter step ", s + 1, " of ", n - 1, " (rank ", r, ")");
    float* dst = data + rb;
    const float* src = incoming.data();
    const size_t len = re - rb;
    for (size_t i = 0; i < len; ++i) dst[i] += src[i];
  }
  for (int s = 0; s < n - 1; ++s) {
    size_t sb, se, rb, re;
    ChunkRange(count, n, mod(r + 1 - s), &sb, &se);
    ChunkRange(count, n, mod(r - s), &rb, &re);
    HPTRAIN_RETURN_IF_ERROR(
        transport.SendRecv(right, data + sb, (se - sb) * sizeof(float), left, data + rb,
                           (re - rb) * sizeof(float), tag),
        "all-reduce all-gather step ", s + 1, " of ", n - 1, " (rank ", r, ")");
  }
  return absl::OkStatus();
}

}  // namespace hptrain::comm
