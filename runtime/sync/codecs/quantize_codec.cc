#include "runtime/sync/codecs/quantize_codec.h"

#include "absl/strings/str_cat.h"

namespace hptrain::sync {

QuantizeCodec::QuantizeCodec(int bits, int64_t bucket_size, size_t residual_size, uint64_t seed,
                             int rank)
    : seed_(seed), rank_(rank), residual_(residual_size, 0.0f) {
  params_.bits = bits;
  params_.bucket_size = bucket_size;
  params_.scale = kernels::QuantizeParams::kMinMax;
  params_.rounding = kernels::QuantizeParams::kStochastic;
}

size_t QuantizedChunkMetaBytes(size_t count, const kernels::QuantizeParams& params) {
  return static_cast<size_t>(kernels::NumBuckets(static_cast<int64_t>(count), params.bucket_size)) *
         2 * sizeof(float);
}

size_t QuantizedChunkBytes(size_t count, const kernels::QuantizeParams& params) {
  return QuantizedChunkMetaBytes(count, params) +
         kernels::QuantizedCodeBytes(static_cast<int64_t>(count), params.bits);
}

kernels::QuantizeParams QuantizedChunkParams(const kernels::QuantizeParams& base, uint64_t seed,
                                             int rank, uint64_t salt, int64_t step) {
  kernels::QuantizeParams p = base;
  p.seed = seed ^ (0x9E3779B97F4A7C15ULL * (static_cast<uint64_t>(rank) + 1)) ^
           (0xC2B2AE3D27D4EB4FULL * (salt + 1));
  p.step = static_cast<uint64_t>(step);
  return p;
}

size_t QuantizeCodec::EncodedBytes(size_t count) const {
  return QuantizedChunkBytes(count, params_);
}

absl::Status QuantizeCodec::CheckSize(size_t bytes, size_t count) const {
  if (bytes != EncodedBytes(count)) {
    return absl::DataLossError(absl::StrCat("quantized chunk of ", count, " elements at ",
                                            params_.bits, " bits must be ", EncodedBytes(count),
                                            " bytes, got ", bytes));
  }
  return absl::OkStatus();
}

absl::Status QuantizeCodec::Encode(const float* data, size_t count, size_t offset, uint64_t salt,
                                   uint8_t* out) {
  const kernels::QuantizeParams p = QuantizedChunkParams(params_, seed_, rank_, salt, step_);
  const int64_t n = static_cast<int64_t>(count);
  float* meta = reinterpret_cast<float*>(out);
  uint8_t* codes = out + QuantizedChunkMetaBytes(count, p);
  if (residual_.empty()) return kernels::Quantize(data, n, p, meta, codes);
  if (offset + count > residual_.size()) {
    return absl::InternalError("quantize codec: chunk outside the error-feedback buffer");
  }
  return kernels::QuantizeWithErrorFeedback(data, residual_.data() + offset, n, p, meta, codes);
}

absl::Status QuantizeCodec::Decode(const uint8_t* in, size_t bytes, size_t count, float* out) {
  if (absl::Status s = CheckSize(bytes, count); !s.ok()) return s;
  const int64_t n = static_cast<int64_t>(count);
  const float* meta = reinterpret_cast<const float*>(in);
  kernels::Dequantize(meta, in + QuantizedChunkMetaBytes(count, params_), n, params_, out);
  return absl::OkStatus();
}

absl::Status QuantizeCodec::DecodeAccumulate(const uint8_t* in, size_t bytes, size_t count,
                                             float* acc) {
  if (absl::Status s = CheckSize(bytes, count); !s.ok()) return s;
  const int64_t n = static_cast<int64_t>(count);
  const float* meta = reinterpret_cast<const float*>(in);
  kernels::DequantizeAccumulate(meta, in + QuantizedChunkMetaBytes(count, params_), n, params_,
                                acc);
  return absl::OkStatus();
}

}  // namespace hptrain::sync
