// QuantizeCodec: bucketed uniform quantization on the wire (kernels/quantize), with error
// feedback. A chunk of n elements is encoded as NumBuckets(n) × {lo, delta} floats followed by
// ceil(n·bits/8) bytes of codes (docs/wire_format.md, QUANTIZED payload).
#ifndef HPTRAIN_RUNTIME_SYNC_CODECS_QUANTIZE_CODEC_H_
#define HPTRAIN_RUNTIME_SYNC_CODECS_QUANTIZE_CODEC_H_

#include <cstdint>
#include <vector>

#include "kernels/quantize/quantize.h"
#include "runtime/comm/chunk_codec.h"

namespace hptrain::sync {

// What QuantizeCodec and its device twin (device_codecs.h) share, so that both write the same
// bytes. The bytes of an encoded chunk of `count` elements (meta, then codes):
size_t QuantizedChunkBytes(size_t count, const kernels::QuantizeParams& params);
// The byte offset of the codes within it:
size_t QuantizedChunkMetaBytes(size_t count, const kernels::QuantizeParams& params);
// The parameters one Encode uses: fresh random numbers for every (rank, ring step `salt`), the
// kernels keying them by (seed, step, index).
kernels::QuantizeParams QuantizedChunkParams(const kernels::QuantizeParams& base, uint64_t seed,
                                             int rank, uint64_t salt, int64_t step);

class QuantizeCodec : public comm::ChunkCodec {
 public:
  // `residual_size` elements of error-feedback state (0 disables error feedback). `rank` and
  // `seed` key the stochastic rounding so that no two encodings share random numbers.
  QuantizeCodec(int bits, int64_t bucket_size, size_t residual_size, uint64_t seed, int rank);

  void set_bits(int bits) { params_.bits = bits; }
  int bits() const { return params_.bits; }
  void set_step(int64_t step) { step_ = step; }
  std::vector<float>& residual() { return residual_; }

  size_t EncodedBytes(size_t count) const override;
  absl::Status Encode(const float* data, size_t count, size_t offset, uint64_t salt,
                      uint8_t* out) override;
  absl::Status Decode(const uint8_t* in, size_t bytes, size_t count, float* out) override;
  absl::Status DecodeAccumulate(const uint8_t* in, size_t bytes, size_t count,
                                float* acc) override;

 private:
  absl::Status CheckSize(size_t bytes, size_t count) const;

  kernels::QuantizeParams params_;
  uint64_t seed_;
  int rank_;
  int64_t step_ = 0;
  std::vector<float> residual_;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_CODECS_QUANTIZE_CODEC_H_
