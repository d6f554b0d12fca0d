// Compressed ring all-reduce: the ring of ring_allreduce.cc with every chunk encoded on the wire.
//   1. Reduce-scatter, N-1 steps: rank r encodes its partial sum of chunk (r - s) mod N (the codec
//      adds its error-feedback residual for that range first and keeps the new error), sends it
//      right, and decode-accumulates the chunk (r - s - 1) mod N arriving from the left.
//      Afterwards rank r holds the sum of chunk (r + 1) mod N.
//   2. The owner encodes its reduced chunk once and replaces its own copy with the decoded
//      encoding, so that it holds exactly what every other rank will decode.
//   3. All-gather, N-1 steps: the encoded chunks are forwarded unchanged around the ring and
//      decoded by each receiver. Every rank ends bit-identical.
// Each of the two passes runs as one Transport::RingPass: the decode of step s and the encode of
// step s + 1 happen in its on_received, so a back end may post every receive up front.
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
  auto encoded_size = [&](int chunk) {
    size_t b, e;
    range(chunk, &b, &e);
    return codec.EncodedBytes(e - b);
  };
  // Every step has a send slot and a receive slot of its own, so every receive can be posted up
  // front and no step writes what an earlier send may still be reading.
  const size_t slot = codec.EncodedBytes((count + n - 1) / n);
  std::vector<uint8_t> out(slot * (n - 1));
  std::vector<uint8_t> in(slot * (n - 1));
  std::vector<Transport::PassStep> steps(n - 1);
  auto encode = [&](int s) -> absl::Status {
    size_t b, e;
    range(mod(r - s), &b, &e);
    return Annotate(
        codec.Encode(data + b, e - b, b, static_cast<uint64_t>(s), &out[s * slot]),
        StatusContext("encoding chunk ", mod(r - s), " in reduce-scatter step ", s + 1));
  };

  // Reduce-scatter: step s sends chunk (r - s), encoded once the step before has added into it.
  // A codec error ends the pass on this rank (Transport::RingPass), and the peers fail on the
  // steps it no longer sends, as with a rank that died.
  for (int s = 0; s < n - 1; ++s) {
    steps[s] = {&out[s * slot], encoded_size(mod(r - s)), &in[s * slot],
                encoded_size(mod(r - s - 1))};
  }
  HPTRAIN_RETURN_IF_ERROR(encode(0));
  auto add_received = [&](int s) -> absl::Status {
    size_t b, e;
    range(mod(r - s - 1), &b, &e);
    HPTRAIN_RETURN_IF_ERROR(
        codec.DecodeAccumulate(&in[s * slot], steps[s].recv_bytes, e - b, data + b),
        "decoding chunk ", mod(r - s - 1), " from rank ", left);
    return s + 1 < n - 1 ? encode(s + 1) : absl::OkStatus();
  };
  HPTRAIN_RETURN_IF_ERROR(transport.RingPass(right, left, steps, tag, add_received),
                          "compressed all-reduce reduce-scatter (rank ", r, " of ", n, ")");

  // The owner encodes its reduced chunk once and keeps what the others will decode.
  size_t ob, oe;
  const int owned = mod(r + 1);
  range(owned, &ob, &oe);
  HPTRAIN_RETURN_IF_ERROR(codec.Encode(data + ob, oe - ob, ob, static_cast<uint64_t>(n), &out[0]),
                          "encoding reduced chunk ", owned);
  HPTRAIN_RETURN_IF_ERROR(codec.Decode(&out[0], encoded_size(owned), oe - ob, data + ob));

  // All-gather: step 0 sends the owned chunk, step s forwards what step s - 1 received.
  for (int s = 0; s < n - 1; ++s) {
    const uint8_t* send = s == 0 ? &out[0] : &in[(s - 1) * slot];
    steps[s] = {send, encoded_size(mod(r + 1 - s)), &in[s * slot], encoded_size(mod(r - s))};
  }
  auto store_received = [&](int s) -> absl::Status {
    size_t b, e;
    range(mod(r - s), &b, &e);
    return Annotate(codec.Decode(&in[s * slot], steps[s].recv_bytes, e - b, data + b),
                    StatusContext("decoding reduced chunk ", mod(r - s), " from rank ", left));
  };
  HPTRAIN_RETURN_IF_ERROR(transport.RingPass(right, left, steps, tag, store_received),
                          "compressed all-reduce all-gather (rank ", r, " of ", n, ")");
  return absl::OkStatus();
}

}  // namespace hptrain::comm
