// Per-bucket and per-element quantization math shared by quantize_cpu.cc and quantize_cuda.cu.
//
// Both sides must produce the same bytes, so every floating-point operation here is a single
// IEEE-754 binary32 operation rounded to nearest, in a fixed order:
//   * on the device through __fadd_rn/__fsub_rn/__fmul_rn/__fdiv_rn, which nvcc never contracts
//     into FMAs and never replaces by approximate division, whatever -fmad/-prec-div/fast-math
//     say (the CUDA library is also built with -fmad=false as a second guard);
//   * on the host as plain operators, in a library built with -ffp-contract=off, which keeps
//     GCC from contracting them into FMAs even in the AVX-512 build, where AVX-512F has them.
// Conversions are exact or defined identically on both: a 24-bit integer to float, and a float in
// [0, 2^31) to int by truncation (floor, since it is never negative).
#ifndef HPTRAIN_KERNELS_QUANTIZE_QUANTIZE_COMMON_H_
#define HPTRAIN_KERNELS_QUANTIZE_QUANTIZE_COMMON_H_

#include <cstdint>
#include <cstring>

#include "kernels/common/rng.h"
#include "kernels/common/host_device.h"

namespace hptrain::kernels {

// Error bits of a bucket (and of QuantizeCudaAsync's device flag).
inline constexpr int kQuantizeNonFinite = 1;      // a NaN or ±Inf among the inputs
inline constexpr int kQuantizeRangeOverflow = 2;  // max − min (or 2·absmax) overflows float

inline constexpr uint32_t kFloatExponentMask = 0x7F800000u;
inline constexpr float kFloatMax = 3.40282346638528859812e+38f;
inline constexpr float kFloatDenormMin = 1.40129846432481707092e-45f;  // 2^-149

HPTRAIN_HOST_DEVICE float AddRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

HPTRAIN_HOST_DEVICE float SubRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

HPTRAIN_HOST_DEVICE float MulRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

HPTRAIN_HOST_DEVICE float DivRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}


// The exponent field of v; kFloatExponentMask means NaN or ±Inf. Kernels take the maximum of
// it over a bucket, so one compare at the end tells whether the bucket was finite.
HPTRAIN_HOST_DEVICE uint32_t ExponentField(float v) { return FloatBits(v) & kFloatExponentMask; }

// (lo, delta) of a finite bucket with minimum `mn` and maximum `mx`, as quantize.h describes;
// `levels` is L = 2^bits − 1 and `abs_max` selects the kAbsMax scale. Returns 0, or
// kQuantizeRangeOverflow (lo and delta are then unspecified). Adding +0 turns a −0 min/max into
// +0, so the result does not depend on which zero a reduction happened to keep.
HPTRAIN_HOST_DEVICE int BucketScale(float mn, float mx, float levels, bool abs_max, float* lo,
                                    float* delta) {
  float range;
  if (abs_max) {
    const float neg_mn = SubRn(0.0f, mn);
    const float a = AddRn(mx > neg_mn ? mx : neg_mn, 0.0f);
    *lo = SubRn(0.0f, a);
    range = AddRn(a, a);
  } else {
    *lo = AddRn(mn, 0.0f);
    range = SubRn(AddRn(mx, 0.0f), *lo);
  }
  if (!(range <= kFloatMax)) return kQuantizeRangeOverflow;
  float d = DivRn(range, levels);
  if (d == 0.0f && range > 0.0f) d = kFloatDenormMin;  // keep delta == 0 for constant buckets only
  *delta = d;
  return 0;
}

// The code of finite x in a bucket (lo, delta): floor((x − lo) / delta + u) clamped to [0, L];
// u = 0.5 rounds to nearest, u uniform in [0, 1) rounds stochastically. 0 when delta == 0.
// For x in the bucket, x − lo >= 0 and (x − lo) / delta < 2^31, so truncation is floor; the clamps
// (compare-and-select, min/max instructions) also map any NaN to a valid code.
// QuantizeScaledElement is the delta > 0 case, for callers that test delta once per bucket.
HPTRAIN_HOST_DEVICE uint32_t QuantizeScaledElement(float x, float lo, float delta, float u,
                                                   float levels) {
  float t = AddRn(DivRn(SubRn(x, lo), delta), u);
  t = t < levels ? t : levels;
  t = t > 0.0f ? t : 0.0f;
  return static_cast<uint32_t>(static_cast<int32_t>(t));
}

// The scaled code is computed whatever delta is and then selected: a conditional division would
// keep GCC (which must assume it can trap) from vectorizing the CPU loops.
HPTRAIN_HOST_DEVICE uint32_t QuantizeElement(float x, float lo, float delta, float u,
                                             float levels) {
  const uint32_t q = QuantizeScaledElement(x, lo, delta, u, levels);
  return delta > 0.0f ? q : 0u;
}

// The decoded value lo + q·delta of code q (a multiply, then an add: never an FMA).
HPTRAIN_HOST_DEVICE float DequantizeElement(uint32_t q, float lo, float delta) {
  return AddRn(lo, MulRn(static_cast<float>(static_cast<int32_t>(q)), delta));
}

}  // namespace hptrain::kernels

#endif  // HPTRAIN_KERNELS_QUANTIZE_QUANTIZE_COMMON_H_
