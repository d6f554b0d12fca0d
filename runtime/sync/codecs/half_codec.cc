#include "runtime/sync/codecs/half_codec.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cast/cast.h"

namespace hptrain::sync {

absl::Status HalfCodec::Encode(const float* data, size_t count, size_t offset, uint64_t,
                               uint8_t* out) {
  const float* x = data;
  if (!residual_.empty()) {
    if (offset + count > residual_.size()) {
      return absl::InternalError("half codec: chunk outside the error-feedback buffer");
    }
    scratch_.resize(count);
    for (size_t i = 0; i < count; ++i) scratch_[i] = data[i] + residual_[offset + i];
    x = scratch_.data();
  }
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(x[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("fp16 encoding: element ", offset + i, " is not finite"));
    }
  }
  halves_.resize(count);
  kernels::FloatToHalf(x, static_cast<int64_t>(count), halves_.data());
  std::memcpy(out, halves_.data(), 2 * count);
  if (!residual_.empty()) {
    // residual = x - decode(encode(x)), from the halves actually sent (x lives in scratch_).
    sent_.resize(count);
    kernels::HalfToFloat(halves_.data(), static_cast<int64_t>(count), sent_.data());
    for (size_t i = 0; i < count; ++i) residual_[offset + i] = scratch_[i] - sent_[i];
  }
  return absl::OkStatus();
}

absl::Status HalfCodec::Decode(const uint8_t* in, size_t bytes, size_t count, float* out) {
  if (bytes != 2 * count) {
    return absl::DataLossError(absl::StrCat("fp16 chunk of ", count, " elements must be ",
                                            2 * count, " bytes, got ", bytes));
  }
  halves_.resize(count);
  std::memcpy(halves_.data(), in, bytes);
  kernels::HalfToFloat(halves_.data(), static_cast<int64_t>(count), out);
  return absl::OkStatus();
}

absl::Status HalfCodec::DecodeAccumulate(const uint8_t* in, size_t bytes, size_t count,
                                         float* acc) {
  if (bytes != 2 * count) {
    return absl::DataLossError(absl::StrCat("fp16 chunk of ", count, " elements must be ",
                                            2 * count, " bytes, got ", bytes));
  }
  halves_.resize(count);
  std::memcpy(halves_.data(), in, bytes);
  kernels::HalfAccumulate(halves_.data(), static_cast<int64_t>(count), acc);
  return absl::OkStatus();
}

}  // namespace hptrain::sync
