#include "runtime/ps/ps_codec.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cast/cast.h"
#include "kernels/quantize/quantize.h"
#include "runtime/base/status.h"

namespace hptrain::ps {
namespace {

using comm::EncodedBuffer;
using comm::EncodedHeaderFields;
using comm::Encoding;

kernels::QuantizeParams ParamsFor(int bits, int64_t n, kernels::QuantizeParams::Rounding rounding) {
  kernels::QuantizeParams p;
  p.bits = bits;
  p.bucket_size = std::max<int64_t>(n, 1);
  p.scale = kernels::QuantizeParams::kMinMax;
  p.rounding = rounding;
  return p;
}

EncodedHeaderFields FieldsFor(int bits, int64_t n) {
  EncodedHeaderFields f;
  f.num_elements = n;
  if (bits == 32) {
    f.encoding = Encoding::kDenseF32;
  } else if (bits == 16) {
    f.encoding = Encoding::kF16;
  } else {
    f.encoding = Encoding::kQuantized;
    f.bits = bits;
    f.scale_mode = comm::ScaleMode::kMinMax;
    f.bucket_size = std::max<int64_t>(n, 1);
  }
  return f;
}

using kernels::kHalfMax;

}  // namespace

bool ValidPsBits(int bits) {
  return bits == 2 || bits == 4 || bits == 8 || bits == 16 || bits == 32;
}

int64_t PsPayloadBytes(int64_t n, int bits) {
  const int b = EffectiveBits(bits, n);
  if (b == 32) return 4 * n;
  if (b == 16) return 2 * n;
  return 8 + (n * b + 7) / 8;
}

absl::StatusOr<std::vector<uint8_t>> EncodeGradient(const float* gradient, float* residual,
                                                    int64_t n, int bits, uint64_t seed,
                                                    uint64_t step) {
  const int b = EffectiveBits(bits, n);
  HPTRAIN_ASSIGN_OR_RETURN(EncodedBuffer buffer, EncodedBuffer::Create(FieldsFor(b, n)));
  if (b == 32) {
    std::memcpy(buffer.dense(), gradient, n * sizeof(float));
    if (residual != nullptr) {
      for (int64_t i = 0; i < n; ++i) buffer.dense()[i] += residual[i];
      std::fill(residual, residual + n, 0.0f);
    }
  } else if (b == 16) {
    std::vector<float> x(gradient, gradient + n);
    if (residual != nullptr) {
      for (int64_t i = 0; i < n; ++i) x[i] += residual[i];
    }
    for (float& v : x) v = std::clamp(v, -kHalfMax, kHalfMax);
    kernels::FloatToHalf(x.data(), n, buffer.half());
    if (residual != nullptr) {
      std::vector<float> decoded(n);
      kernels::HalfToFloat(buffer.half(), n, decoded.data());
      kernels::UpdateResidual(x.data(), decoded.data(), residual, n);
    }
  } else {
    kernels::QuantizeParams p = ParamsFor(b, n, kernels::QuantizeParams::kStochastic);
    p.seed = seed;
    p.step = step;
    if (residual != nullptr) {
      HPTRAIN_RETURN_IF_ERROR(kernels::QuantizeWithErrorFeedback(gradient, residual, n, p,
                                                                 buffer.meta(), buffer.codes()));
    } else {
      HPTRAIN_RETURN_IF_ERROR(kernels::Quantize(gradient, n, p, buffer.meta(), buffer.codes()));
    }
  }
  return std::move(buffer).Release();
}

absl::StatusOr<std::vector<uint8_t>> EncodeValues(const float* values, int64_t n) {
  HPTRAIN_ASSIGN_OR_RETURN(EncodedBuffer buffer, EncodedBuffer::Create(FieldsFor(32, n)));
  std::memcpy(buffer.dense(), values, n * sizeof(float));
  return std::move(buffer).Release();
}

absl::StatusOr<std::vector<uint8_t>> EncodeForPull(const float* w, float* mirror, int64_t n,
                                                   int bits) {
  const int b = EffectiveBits(bits, n);
  HPTRAIN_ASSIGN_OR_RETURN(EncodedBuffer buffer, EncodedBuffer::Create(FieldsFor(b, n)));
  if (b == 32) {
    std::memcpy(buffer.dense(), w, n * sizeof(float));
    std::memcpy(mirror, w, n * sizeof(float));
    return std::move(buffer).Release();
  }
  std::vector<float> delta(n);
  for (int64_t i = 0; i < n; ++i) delta[i] = w[i] - mirror[i];
  if (b == 16) {
    for (float& v : delta) v = std::clamp(v, -kHalfMax, kHalfMax);
    kernels::FloatToHalf(delta.data(), n, buffer.half());
  } else {
    HPTRAIN_RETURN_IF_ERROR(
        kernels::Quantize(delta.data(), n, ParamsFor(b, n, kernels::QuantizeParams::kNearest),
                          buffer.meta(), buffer.codes()),
        "quantizing a parameter delta");
  }
  HPTRAIN_ASSIGN_OR_RETURN(comm::EncodedView view, buffer.Finish());
  ApplyPulled(view, mirror);
  return std::move(buffer).Release();
}

void DecodeInto(const comm::EncodedView& view, float* out) {
  const int64_t n = view.num_elements;
  switch (view.encoding) {
    case Encoding::kDenseF32:
      std::memcpy(out, view.payload, n * sizeof(float));
      break;
    case Encoding::kF16:
      kernels::HalfToFloat(view.half(), n, out);
      break;
    case Encoding::kQuantized:
      kernels::Dequantize(view.meta(), view.codes(), n, ParamsFor(view.bits, view.bucket_size,
                                                                  kernels::QuantizeParams::kNearest),
                          out);
      break;
    default:
      break;
  }
}

bool ApplyPulled(const comm::EncodedView& view, float* copy) {
  const int64_t n = view.num_elements;
  switch (view.encoding) {
    case Encoding::kDenseF32:
      std::memcpy(copy, view.payload, n * sizeof(float));
      return true;
    case Encoding::kF16:
      kernels::HalfAccumulate(view.half(), n, copy);
      return true;
    case Encoding::kQuantized:
      kernels::DequantizeAccumulate(
          view.meta(), view.codes(), n,
          ParamsFor(view.bits, view.bucket_size, kernels::QuantizeParams::kNearest), copy);
      return true;
    default:
      return false;
  }
}

absl::StatusOr<comm::EncodedView> DecodePsTensor(const std::vector<uint8_t>& bytes, int64_t n,
                                                 const char* what) {
  absl::StatusOr<comm::EncodedView> view =
      comm::DecodeEncoded(bytes.data(), bytes.size(), n, n);
  if (!view.ok()) return absl::DataLossError(absl::StrCat(what, ": ", view.status().message()));
  const bool quantized_one_bucket =
      view->encoding == Encoding::kQuantized && view->bucket_size >= std::max<int64_t>(n, 1);
  if (view->encoding != Encoding::kDenseF32 && view->encoding != Encoding::kF16 &&
      !quantized_one_bucket) {
    return absl::DataLossError(absl::StrCat(what, ": encoding ", EncodingName(view->encoding),
                                            " is not one the parameter server takes"));
  }
  if (!view->aligned()) return absl::DataLossError(absl::StrCat(what, ": unaligned payload"));
  return view;
}

}  // namespace hptrain::ps
