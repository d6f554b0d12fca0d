// CPU casts: an F16C path (x86, chosen at run time) and the portable loops over cast_common.h.
//
// Vectorisation (checked with -fopt-info-vec-optimized, GCC 12, -O3, baseline x86-64 = SSE2):
// the portable loops in FloatToHalfPortable, HalfToFloatPortable, HalfAccumulatePortable,
// FloatToBfloat16, Bfloat16ToFloat and Bfloat16Accumulate are all vectorised ("loop vectorized
// using 16 byte vectors"). The F16C loops use intrinsics directly.
#include <cmath>
#include <cstdint>

#include "kernels/cast/cast.h"
#include "kernels/cast/cast_common.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HPTRAIN_CAST_X86 1
#endif

namespace hptrain::kernels {
namespace {

void FloatToHalfPortable(const float* in, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalfBits(in[i]);
}

void HalfToFloatPortable(const uint16_t* in, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = HalfBitsToFloat(in[i]);
}

void HalfAccumulatePortable(const uint16_t* in, int64_t n, float* acc) {
  for (int64_t i = 0; i < n; ++i) acc[i] += HalfBitsToFloat(in[i]);
}

#ifdef HPTRAIN_CAST_X86
// Immediate 0 = round to nearest even regardless of MXCSR.
constexpr int kRoundNearestEven = _MM_FROUND_TO_NEAREST_INT;

// The tails go through an 8-lane stack buffer so that they use the same instruction as the body.
__attribute__((target("avx,f16c"))) void FloatToHalfF16c(const float* in, int64_t n,
                                                         uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), kRoundNearestEven);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  if (i < n) {
    alignas(32) float f[8] = {};
    alignas(16) uint16_t h[8];
    for (int64_t j = i; j < n; ++j) f[j - i] = in[j];
    _mm_store_si128(reinterpret_cast<__m128i*>(h),
                    _mm256_cvtps_ph(_mm256_load_ps(f), kRoundNearestEven));
    for (int64_t j = i; j < n; ++j) out[j] = h[j - i];
  }
}

__attribute__((target("avx,f16c"))) __m256 LoadHalves(const uint16_t* in, int64_t count) {
  if (count >= 8) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
  }
  alignas(16) uint16_t h[8] = {};
  for (int64_t j = 0; j < count; ++j) h[j] = in[j];
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}

__attribute__((target("avx,f16c"))) void HalfToFloatF16c(const uint16_t* in, int64_t n,
                                                         float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, LoadHalves(in + i, 8));
  if (i < n) {
    alignas(32) float f[8];
    _mm256_store_ps(f, LoadHalves(in + i, n - i));
    for (int64_t j = i; j < n; ++j) out[j] = f[j - i];
  }
}

__attribute__((target("avx,f16c"))) void HalfAccumulateF16c(const uint16_t* in, int64_t n,
                                                            float* acc) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), LoadHalves(in + i, 8)));
  }
  if (i < n) {
    alignas(32) float f[8];
    _mm256_store_ps(f, LoadHalves(in + i, n - i));
    for (int64_t j = i; j < n; ++j) acc[j] += f[j - i];
  }
}

bool CpuHasF16c() {
  // Function-local static: initialised once, thread-safe.
  static const bool has = [] {
    __builtin_cpu_init();
    // F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c".
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
           (ecx & bit_F16C) != 0;
  }();
  return has;
}
#else
bool CpuHasF16c() { return false; }
#endif  // HPTRAIN_CAST_X86

bool UseF16c(CastImpl impl) {
  return (impl == CastImpl::kAuto || impl == CastImpl::kF16c) && CpuHasF16c();
}

}  // namespace

bool CastImplSupported(CastImpl impl) { return impl != CastImpl::kF16c || CpuHasF16c(); }

CastImpl ResolvedCastImpl() { return CpuHasF16c() ? CastImpl::kF16c : CastImpl::kPortable; }

void FloatToHalf(const float* in, int64_t n, uint16_t* out, CastImpl impl) {
#ifdef HPTRAIN_CAST_X86
  if (UseF16c(impl)) return FloatToHalfF16c(in, n, out);
#endif
  FloatToHalfPortable(in, n, out);
}

void HalfToFloat(const uint16_t* in, int64_t n, float* out, CastImpl impl) {
#ifdef HPTRAIN_CAST_X86
  if (UseF16c(impl)) return HalfToFloatF16c(in, n, out);
#endif
  HalfToFloatPortable(in, n, out);
}

void HalfAccumulate(const uint16_t* in, int64_t n, float* acc, CastImpl impl) {
#ifdef HPTRAIN_CAST_X86
  if (UseF16c(impl)) return HalfAccumulateF16c(in, n, acc);
#endif
  HalfAccumulatePortable(in, n, acc);
}

int64_t FloatToHalfWithErrorFeedback(const float* in, float* residual, int64_t n,
                                     uint16_t* out) {
  // Checked first, so that an error leaves both outputs as they were.
  for (int64_t i = 0; i < n; ++i) {
    const float x = residual != nullptr ? in[i] + residual[i] : in[i];
    if (!std::isfinite(x)) return i;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float x = residual != nullptr ? in[i] + residual[i] : in[i];
    out[i] = FloatToHalfBits(x);
    if (residual != nullptr) residual[i] = x - HalfBitsToFloat(out[i]);
  }
  return -1;
}

void FloatToHalf(const float* in, int64_t n, uint16_t* out) {
  FloatToHalf(in, n, out, CastImpl::kAuto);
}

void HalfToFloat(const uint16_t* in, int64_t n, float* out) {
  HalfToFloat(in, n, out, CastImpl::kAuto);
}

void HalfAccumulate(const uint16_t* in, int64_t n, float* acc) {
  HalfAccumulate(in, n, acc, CastImpl::kAuto);
}

void FloatToBfloat16(const float* in, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBfloat16Bits(in[i]);
}

void Bfloat16ToFloat(const uint16_t* in, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Bfloat16BitsToFloat(in[i]);
}

void Bfloat16Accumulate(const uint16_t* in, int64_t n, float* acc) {
  for (int64_t i = 0; i < n; ++i) acc[i] += Bfloat16BitsToFloat(in[i]);
}

}  // namespace hptrain::kernels
