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

void RingAllReduceBytes(size_t count, int size, int rank, int64_t* sent, int64_t* received) {
  *sent = *received = 0;
  if (size == 1 || count == 0) return;
  auto bytes = [&](int index) {
    size_t begin, end;
    ChunkRange(count, size, RingIndex(index, size), &begin, &end);
    return static_cast<int64_t>((end - begin) * sizeof(float));
  };
  // Reduce-scatter step s: sends chunk r - s, receives r - s - 1; all-gather step s: sends
  // chunk r + 1 - s, receives r - s.
  for (int s = 0; s < size - 1; ++s) {
    *sent += bytes(rank - s) + bytes(rank + 1 - s);
    *received += bytes(rank - s - 1) + bytes(rank - s);
  }
}

absl::Status RingAllReduceSum(Transport& transport, float* data, size_t count, uint64_t tag) {
  const int n = transport.size();
  const int r = transport.rank();
  if (n == 1 || count == 0) return absl::OkStatus();
  const int right = RingIndex(r + 1, n);
  const int left = RingIndex(r - 1, n);
  auto mod = [n](int x) { return RingIndex(x, n); };
  auto chunk = [&](int index, size_t* begin, size_t* end) {
    ChunkRange(count, n, index, begin, end);
  };

  // Reduce-scatter. Step s sends chunk (r - s), which step s - 1 completed, and receives into a
  // slot of its own, so every receive can be posted up front; the chunk a step adds into is sent
  // only by the next step.
  const size_t max_chunk = (count + n - 1) / n;
  std::vector<float> incoming(max_chunk * (n - 1));
  std::vector<Transport::PassStep> steps(n - 1);
  for (int s = 0; s < n - 1; ++s) {
    size_t sb, se, rb, re;
    chunk(mod(r - s), &sb, &se);
    chunk(mod(r - s - 1), &rb, &re);
    steps[s] = {data + sb, (se - sb) * sizeof(float), incoming.data() + s * max_chunk,
                (re - rb) * sizeof(float)};
  }
  auto add_received = [&](int s) {
    size_t rb, re;
    chunk(mod(r - s - 1), &rb, &re);
    const float* src = incoming.data() + s * max_chunk;
    for (size_t i = 0; i < re - rb; ++i) data[rb + i] += src[i];
    return absl::OkStatus();
  };
  HPTRAIN_RETURN_IF_ERROR(transport.RingPass(right, left, steps, tag, add_received),
                          "all-reduce reduce-scatter (rank ", r, " of ", n, ")");

  // All-gather. Step s forwards chunk (r + 1 - s) and receives chunk (r - s) in place: no chunk
  // is received after it was sent.
  for (int s = 0; s < n - 1; ++s) {
    size_t sb, se, rb, re;
    chunk(mod(r + 1 - s), &sb, &se);
    chunk(mod(r - s), &rb, &re);
    steps[s] = {data + sb, (se - sb) * sizeof(float), data + rb, (re - rb) * sizeof(float)};
  }
  HPTRAIN_RETURN_IF_ERROR(
      transport.RingPass(right, left, steps, tag, [](int) { return absl::OkStatus(); }),
      "all-reduce all-gather (rank ", r, " of ", n, ")");
  return absl::OkStatus();
}

}  // namespace hptrain::comm
