// Compressed ring all-reduce: the ring of ring_allreduce.cc with every chunk encoded on the wire.
//   1. Reduce-scatter, N-1 steps: rank r encodes its partial sum of chunk (r - s) mod N (the codec
//      adds its error-feedback residual for that range first and keeps the new error), sends it
//      right, and decode-accumulates the chunk (r - s - 1) mod N arriving from the left.
//      Afterwards rank r holds the sum of chunk (r + 1) mod N.
//   2. The owner encodes its reduced chunk once and replaces its own copy with the decoded
//      encoding, so that it holds exactly what every other rank will decode.
//   3. All-gather, N-1 steps: the encoded chunks are forwarded unchanged around the ring and
//      decoded by each receiver. Every rank ends bit-identical.
// Bytes per rank: 2(N-1) chunks of EncodedBytes(count / N) each way, i.e. 2(N-1)/N of the
// encoded buffer (chunk rounding and per-chunk metadata aside).
#include <vector>

#include "runtime/base/status.h"
#include "runtime/comm/collectives.h"

namespace hptrain::comm {

absl::Status CompressedRingAllReduceSum(Transport& transport, float* data, size_t count,
                                        ChunkCodec& codec, uint64_t tag) {
  const int n = transport.size();
  const int r = transport.rank();
  if (count == 0) return absl::OkStatus();
  auto mod = [n](int x) { return RingIndex(x, n); };
  auto range = [&](int chunk, size_t* b, size_t* e) { ChunkRange(count, n, chunk, b, e); };
  if (n == 1) {
    // One worker: the codec still applies, so a single-worker run sees the same rounding.
    std::vector<uint8_t> encoded(codec.EncodedBytes(count));
    HPTRAIN_RETURN_IF_ERROR(codec.Encode(data, count, 0, 0, encoded.data()));
    return codec.Decode(encoded.data(), encoded.size(), count, data);
  }
  const int right = RingIndex(r + 1, n);
  const int left = RingIndex(r - 1, n);
  const size_t max_chunk = (count + n - 1) / n;
  std::vector<uint8_t> out(codec.EncodedBytes(max_chunk));
  std::vector<uint8_t> in(codec.EncodedBytes(max_chunk));

  for (int s = 0; s < n - 1; ++s) {
    size_t sb, se, rb, re;
    range(mod(r - s), &sb, &se);
    range(mod(r - s - 1), &rb, &re);
    const size_t out_bytes = codec.EncodedBytes(se - sb);
    const size_t in_bytes = codec.EncodedBytes(re - rb);
    HPTRAIN_RETURN_IF_ERROR(codec.Encode(data + sb, se - sb, sb, static_cast<uint64_t>(s),
                                         out.data()),
                            "encoding chunk ", mod(r - s), " in reduce-scatter step ", s + 1);
    HPTRAIN_RETURN_IF_ERROR(
        transport.SendRecv(right, out.data(), out_bytes, left, in.data(), in_bytes, tag),
        "compressed all-reduce reduce-scatter step ", s + 1, " of ", n - 1, " (rank ", r, ")");
    HPTRAIN_RETURN_IF_ERROR(codec.DecodeAccumulate(in.data(), in_bytes, re - rb, data + rb),
                            "decoding chunk ", mod(r - s - 1), " from rank ", left);
  }

  size_t ob, oe;
  const int owned = mod(r + 1);
  range(owned, &ob, &oe);
  HPTRAIN_RETURN_IF_ERROR(codec.Encode(data + ob, oe - ob, ob, static_cast<uint64_t>(n),
                                       out.data()),
                          "encoding reduced chunk ", owned);
  const size_t owned_bytes = codec.EncodedBytes(oe - ob);
  HPTRAIN_RETURN_IF_ERROR(codec.Decode(out.data(), owned_bytes, oe - ob, data + ob));

  // Forward what arrived last step; start with our own encoded chunk.
  for (int s = 0; s < n - 1; ++s) {
    size_t sb, se, rb, re;
    range(mod(r + 1 - s), &sb, &se);
    range(mod(r - s), &rb, &re);
    const size_t out_bytes = codec.EncodedBytes(se - sb);
    const size_t in_bytes = codec.EncodedBytes(re - rb);
    HPTRAIN_RETURN_IF_ERROR(
        transport.SendRecv(right, out.data(), out_bytes, left, in.data(), in_bytes, tag),
        "compressed all-reduce all-gather step ", s + 1, " of ", n - 1, " (rank ", r, ")");
    HPTRAIN_RETURN_IF_ERROR(codec.Decode(in.data(), in_bytes, re - rb, data + rb),
                            "decoding reduced chunk ", mod(r - s), " from rank ", left);
    std::swap(out, in);
  }
  return absl::OkStatus();
}

}  // namespace hptrain::comm
