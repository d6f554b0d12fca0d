// Per-element fp32 <-> fp16 (IEEE binary16) and fp32 <-> bf16 conversions shared by the CPU
// kernels (their portable path) and the CUDA twins, so every back end produces the same bits.
//
// The NaN rules are those of x86 F16C (vcvtps2ph / vcvtph2ps), which is what the CPU fast path
// uses; the portable code and the CUDA kernels reproduce them instead of emitting a canonical
// NaN, so a NaN keeps its sign and the top bits of its payload through every path:
//   fp32 NaN -> fp16: sign | 0x7e00 | (fp32 mantissa >> 13)      (quiet bit set)
//   fp16 NaN -> fp32: sign | 0x7fc00000 | (fp16 mantissa << 13)  (quiet bit set)
//   fp32 NaN -> bf16: (bits >> 16) | 0x0040                      (quiet bit set)
//   bf16 -> fp32: bits << 16, always exact (a signalling bf16 NaN stays signalling)
//
// The portable fp32 -> fp16 conversion uses one fp32 addition to round subnormal results, so it
// needs the default rounding mode (round-to-nearest-even); it is correct with FTZ/DAZ on. All
// functions are branch-free selects so that loops over them vectorise.
#ifndef HPTRAIN_KERNELS_CAST_CAST_COMMON_H_
#define HPTRAIN_KERNELS_CAST_CAST_COMMON_H_

#include <cstdint>
#include <cstring>

#include "kernels/common/host_device.h"
// Same definition as kernels/update/update_common.h (an identical redefinition is allowed).

namespace hptrain::kernels {
namespace cast_internal {

// cond ? a : b written as mask arithmetic: GCC does not if-convert nested ?: chains in these loops
// ("control flow in loop") but vectorises this.
HPTRAIN_HOST_DEVICE uint32_t Select(bool cond, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return (a & mask) | (b & ~mask);
}

}  // namespace cast_internal

// True if the binary16 pattern `h` is a NaN.
HPTRAIN_HOST_DEVICE bool HalfBitsIsNan(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }

// F16C's fp32 NaN -> fp16 NaN rule (see the file comment); `bits` must be a NaN pattern.
HPTRAIN_HOST_DEVICE uint16_t HalfNanFromFloatBits(uint32_t bits) {
  return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7e00u | ((bits >> 13) & 0x3ffu));
}

// F16C's fp16 NaN -> fp32 NaN rule; `h` must be a NaN pattern.
HPTRAIN_HOST_DEVICE uint32_t FloatNanFromHalfBits(uint16_t h) {
  return (static_cast<uint32_t>(h & 0x8000u) << 16) | 0x7fc00000u |
         (static_cast<uint32_t>(h & 0x3ffu) << 13);
}

// fp32 -> binary16, round-to-nearest-even; |f| >= 65520 becomes ±Inf; subnormal results are
// rounded correctly; NaN as above. (F. Giesen's float_to_half_fast3_rtne, made branch-free.)
HPTRAIN_HOST_DEVICE uint16_t FloatToHalfBits(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  // Normal result: rebias the exponent (127 -> 15) and round the 13 dropped bits to even; a carry
  // out of the mantissa correctly bumps the exponent, up to 0x7c00 (Inf) for [65520, 65536).
  const uint32_t normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
  // Subnormal or zero result (|f| < 2^-14): adding 0.5f leaves the value's multiples of 2^-24 in
  // the low mantissa bits, rounded to nearest-even by the fp32 adder.
  const uint32_t subnormal =
      FloatBits(BitsToFloat(a) + 0.5f) - 0x3f000000u;
  const uint32_t inf_nan =
      0x7c00u | cast_internal::Select(a > 0x7f800000u, 0x200u | ((a >> 13) & 0x3ffu), 0u);
  const uint32_t magnitude = cast_internal::Select(
      a >= 0x47800000u, inf_nan, cast_internal::Select(a < 0x38800000u, subnormal, normal));
  return static_cast<uint16_t>(sign | magnitude);
}

// binary16 -> fp32, exact (every binary16 value is an fp32 value); NaN as above.
HPTRAIN_HOST_DEVICE float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t a = h & 0x7fffu;
  // Normal: shift into place and rebias the exponent (15 -> 127).
  const uint32_t normal = (a << 13) + (112u << 23);
  // Subnormal or zero: mantissa · 2^-24, exact (an integer < 2^10 times a power of two); computed
  // from an integer so that no fp32 subnormal is ever an operand (DAZ-safe).
  const uint32_t subnormal =
      FloatBits(static_cast<float>(static_cast<int32_t>(a)) * 0x1p-24f);
  const uint32_t inf_nan =
      0x7f800000u | ((a & 0x3ffu) << 13) | cast_internal::Select(a > 0x7c00u, 0x400000u, 0u);
  const uint32_t magnitude = cast_internal::Select(
      a >= 0x7c00u, inf_nan, cast_internal::Select(a < 0x400u, subnormal, normal));
  return BitsToFloat(sign | magnitude);
}

// fp32 -> bfloat16 (the upper 16 bits), round-to-nearest-even; values that round past the largest
// finite bf16 become ±Inf; NaN stays NaN with its quiet bit set.
HPTRAIN_HOST_DEVICE uint16_t FloatToBfloat16Bits(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x40u;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// bfloat16 -> fp32, exact.
HPTRAIN_HOST_DEVICE float Bfloat16BitsToFloat(uint16_t b) {
  return BitsToFloat(static_cast<uint32_t>(b) << 16);
}

}  // namespace hptrain::kernels

#endif  // HPTRAIN_KERNELS_CAST_CAST_COMMON_H_
