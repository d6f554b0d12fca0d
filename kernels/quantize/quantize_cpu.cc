// CPU reference of quantize.h, and the oracle the CUDA twin is tested against.
//
// Two passes, each split over threads by ParallelFor: pass 1 reduces every bucket to (lo, delta)
// and finds non-finite inputs before anything is written to codes; pass 2 writes codes (and the
// residual) in tiles of kTile elements: per bucket segment of a tile a flat loop computes one
// code per byte of a stack buffer, then a second loop packs the buffer into bits-bit codes.
// Splits fall on bucket boundaries in pass 1 and on whole bytes (8 elements) in pass 2, and every
// element's code depends only on its value, its bucket's (lo, delta) and its index, so the result
// is the same for any thread count.
//
// Vectorization. Every hot loop is compiled three times, portable (SSE2, the x86-64 baseline),
// with target("avx2") and with target("avx512f,avx512bw,avx512vl,avx512dq"), and ActiveIsa()
// picks the widest the CPU has at run time (__builtin_cpu_supports). Checked with GCC 12 -O3
// -fopt-info-vec-optimized: GCC vectorizes EncodeSegment's loop (hash with vpmulld, divide,
// clamps, truncating convert, narrowing store; with error feedback also the residual), Pack's and
// Unpack's byte loops, DecodeSegment's loop and ResidualRange's loop, with 32-byte vectors in the
// AVX2 build and 64-byte ones in the AVX-512 build, where the 32-bit hash multiplies, the divide
// and the narrowing stores cover 16 elements an instruction. BucketRange is written with GCC
// vector extensions instead (GCC will not vectorize a float min/max reduction without
// -ffinite-math-only); its loop compiles to vminps/vmaxps/vpmaxsd. The library is built with
// -ffp-contract=off, so no build contracts into FMAs (the object file has none, although
// AVX-512F has them) and all round exactly as quantize_common.h says
// (QuantizeParallel.EveryBuildEqualsThePortableOne checks it).
#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/parallel.h"
#include "kernels/common/rng.h"
#include "kernels/quantize/quantize.h"
#include "kernels/quantize/quantize_common.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define HPTRAIN_QUANTIZE_X86 1
#define HPTRAIN_TARGET_AVX2 __attribute__((target("avx2")))
#define HPTRAIN_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,prefer-vector-width=512")))
#else
#define HPTRAIN_TARGET_AVX2
#define HPTRAIN_TARGET_AVX512
#endif
#define HPTRAIN_ALWAYS_INLINE inline __attribute__((always_inline))

namespace hptrain::kernels {
namespace {

constexpr int64_t kTile = 4096;                       // elements per pass-2 tile (4 KiB of codes)
constexpr int64_t kParallelGrain = int64_t{1} << 17;  // elements per thread at least

std::atomic<QuantizeIsa> g_isa_limit{QuantizeIsa::kAvx512};

QuantizeIsa ActiveIsa() {
  return std::min(QuantizeIsaSupported(), g_isa_limit.load(std::memory_order_relaxed));
}

float Levels(int bits) { return static_cast<float>((1 << bits) - 1); }

// ---- pass 1: bucket ranges ------------------------------------------------------------------

struct BucketRangeResult {
  float mn, mx;
  bool finite;
};

// GCC vector extensions (not intrinsics) so one source serves both builds: kLanes = 8 (one ymm
// register) in the AVX2 build, 4 (one xmm register) in the portable one.
template <int kLanes>
struct Vec {
  typedef float F __attribute__((vector_size(4 * kLanes)));
  typedef int32_t I __attribute__((vector_size(4 * kLanes)));
};

// Min, max and finiteness of x = g (+ r) over one bucket, in two kLanes-wide accumulators.
// Explicit lanes rather than a scalar reduction, which GCC will not vectorize because min/max
// with NaN or ±0 are not associative (NaN is rejected and ±0 canonicalized by BucketScale, so the
// lane order does not show in the result). Finiteness: the largest exponent field, all ones for
// NaN/Inf.
template <bool kFeedback, int kLanes>
HPTRAIN_ALWAYS_INLINE BucketRangeResult BucketRange(const float* __restrict g,
                                                    const float* __restrict r, int64_t len) {
  using F = typename Vec<kLanes>::F;
  using I = typename Vec<kLanes>::I;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr int32_t kExp = static_cast<int32_t>(kFloatExponentMask);
  const F zero = {};
  F mn0 = zero + kInf, mn1 = mn0, mx0 = zero - kInf, mx1 = mx0;
  I ex0 = {}, ex1 = {};
  const I exp_mask = I{} + kExp;
  int64_t i = 0;
  for (; i + 2 * kLanes <= len; i += 2 * kLanes) {
    F a, b;
    std::memcpy(&a, g + i, sizeof(a));
    std::memcpy(&b, g + i + kLanes, sizeof(b));
    if (kFeedback) {
      F ra, rb;
      std::memcpy(&ra, r + i, sizeof(ra));
      std::memcpy(&rb, r + i + kLanes, sizeof(rb));
      a = a + ra;  // AddRn, lane-wise
      b = b + rb;
    }
    mn0 = a < mn0 ? a : mn0;
    mn1 = b < mn1 ? b : mn1;
    mx0 = a > mx0 ? a : mx0;
    mx1 = b > mx1 ? b : mx1;
    const I ea = reinterpret_cast<I>(a) & exp_mask;
    const I eb = reinterpret_cast<I>(b) & exp_mask;
    ex0 = ea > ex0 ? ea : ex0;
    ex1 = eb > ex1 ? eb : ex1;
  }
  mn0 = mn1 < mn0 ? mn1 : mn0;
  mx0 = mx1 > mx0 ? mx1 : mx0;
  ex0 = ex1 > ex0 ? ex1 : ex0;
  float mn[kLanes], mx[kLanes];
  int32_t ex[kLanes];
  std::memcpy(mn, &mn0, sizeof(mn));
  std::memcpy(mx, &mx0, sizeof(mx));
  std::memcpy(ex, &ex0, sizeof(ex));
  for (int k = 0; i < len; ++i, k = (k + 1) % kLanes) {  // the last < 2·kLanes elements
    const float v = kFeedback ? AddRn(g[i], r[i]) : g[i];
    const int32_t e = static_cast<int32_t>(ExponentField(v));
    mn[k] = v < mn[k] ? v : mn[k];
    mx[k] = v > mx[k] ? v : mx[k];
    ex[k] = e > ex[k] ? e : ex[k];
  }
  BucketRangeResult out{mn[0], mx[0], true};
  int32_t e = ex[0];
  for (int k = 1; k < kLanes; ++k) {
    out.mn = mn[k] < out.mn ? mn[k] : out.mn;
    out.mx = mx[k] > out.mx ? mx[k] : out.mx;
    e = ex[k] > e ? ex[k] : e;
  }
  out.finite = e != kExp;
  return out;
}

struct RangeArgs {
  const float* g;
  const float* r;  // residual (error feedback) or nullptr
  int64_t n;
  int64_t bucket_size;
  float levels;
  bool abs_max;
  float* meta;
  std::atomic<int64_t>* first_bad_bucket;  // lowest bucket with an error, or INT64_MAX
};

// Buckets [b0, b1): writes meta; stops at the first bad bucket and records it.
template <bool kFeedback, int kLanes>
HPTRAIN_ALWAYS_INLINE void RangeBuckets(const RangeArgs& a, int64_t b0, int64_t b1) {
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t begin = b * a.bucket_size;
    const int64_t len = std::min(a.n - begin, a.bucket_size);
    const BucketRangeResult r =
        BucketRange<kFeedback, kLanes>(a.g + begin, kFeedback ? a.r + begin : nullptr, len);
    if (!r.finite ||
        BucketScale(r.mn, r.mx, a.levels, a.abs_max, &a.meta[2 * b], &a.meta[2 * b + 1]) != 0) {
      int64_t seen = a.first_bad_bucket->load();
      while (b < seen && !a.first_bad_bucket->compare_exchange_weak(seen, b)) {
      }
      return;
    }
  }
}

// ---- pass 2: codes --------------------------------------------------------------------------

struct EncodeArgs {
  const float* g;
  float* r;  // residual (error feedback) or nullptr
  int64_t n;
  int64_t bucket_size;
  float levels;
  uint64_t key;  // RngKey(seed, step)
  const float* meta;
  uint8_t* codes;
};

// One bucket's part of a tile: q[j] = code of element `first + j`; with error feedback also
// r[j] = x − decoded. The hash, division, clamps and truncation all vectorize.
template <bool kStochastic, bool kFeedback>
HPTRAIN_ALWAYS_INLINE void EncodeSegment(const float* __restrict g, float* __restrict r,
                                         int64_t len, float lo, float delta, float levels,
                                         uint64_t block_key, uint32_t first,
                                         uint8_t* __restrict q) {
  // len <= kTile: a 32-bit counter keeps the index arithmetic in 32-bit lanes.
  const uint32_t len32 = static_cast<uint32_t>(len);
  for (uint32_t j = 0; j < len32; ++j) {
    const float x = kFeedback ? AddRn(g[j], r[j]) : g[j];
    const float u = kStochastic ? RngUniform24(RngBits(block_key, first + j)) : 0.5f;
    const uint32_t c = QuantizeElement(x, lo, delta, u, levels);
    q[j] = static_cast<uint8_t>(c);
    if (kFeedback) r[j] = SubRn(x, DequantizeElement(c, lo, delta));
  }
}

// Packs q[0, 8·nbytes/bits) (one code per byte) into nbytes bytes of kBits-bit codes.
template <int kBits>
HPTRAIN_ALWAYS_INLINE void Pack(const uint8_t* __restrict q, int64_t nbytes,
                                uint8_t* __restrict out) {
  constexpr int kPer = 8 / kBits;
  if (kBits == 8) {
    std::memcpy(out, q, static_cast<size_t>(nbytes));
    return;
  }
  for (int64_t b = 0; b < nbytes; ++b) {
    uint32_t v = 0;
    for (int k = 0; k < kPer; ++k) v |= static_cast<uint32_t>(q[b * kPer + k]) << (k * kBits);
    out[b] = static_cast<uint8_t>(v);
  }
}

// Elements [begin, end), begin a multiple of 8 and end a multiple of 8 or n. Tiles are aligned
// to multiples of kTile, so a tile never crosses a 2^32 boundary (one RNG block key per tile).
template <int kBits, bool kStochastic, bool kFeedback>
HPTRAIN_ALWAYS_INLINE void EncodeRange(const EncodeArgs& a, int64_t begin, int64_t end) {
  alignas(64) uint8_t q[kTile];
  for (int64_t t0 = begin; t0 < end;) {
    const int64_t t1 = std::min(end, (t0 / kTile + 1) * kTile);
    const uint64_t block_key = RngBlockKey(a.key, static_cast<uint32_t>(t0 >> 32));
    for (int64_t s = t0; s < t1;) {
      const int64_t b = s / a.bucket_size;
      const int64_t e = std::min(t1, (b + 1) * a.bucket_size);
      EncodeSegment<kStochastic, kFeedback>(a.g + s, kFeedback ? a.r + s : nullptr, e - s,
                                            a.meta[2 * b], a.meta[2 * b + 1], a.levels, block_key,
                                            static_cast<uint32_t>(s), q + (s - t0));
      s = e;
    }
    const int64_t count = t1 - t0;
    for (int64_t j = count; j % 8 != 0; ++j) q[j] = 0;  // padding bits of the last byte
    Pack<kBits>(q, static_cast<int64_t>(QuantizedCodeBytes(count, kBits)),
                a.codes + t0 / 8 * kBits);
    t0 = t1;
  }
}

// ---- dequantize -----------------------------------------------------------------------------

struct DecodeArgs {
  const float* meta;
  const uint8_t* codes;
  int64_t n;
  int64_t bucket_size;
  float* out;
};

// q[0, 8·nbytes/kBits) = the codes in in[0, nbytes), one per byte (byte-outer, so it vectorizes).
template <int kBits>
HPTRAIN_ALWAYS_INLINE void Unpack(const uint8_t* __restrict in, int64_t nbytes,
                                  uint8_t* __restrict q) {
  constexpr int kPer = 8 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  if (kBits == 8) {
    std::memcpy(q, in, static_cast<size_t>(nbytes));
    return;
  }
  for (int64_t b = 0; b < nbytes; ++b) {
    const uint32_t v = in[b];
    for (int k = 0; k < kPer; ++k)
      q[b * kPer + k] = static_cast<uint8_t>((v >> (k * kBits)) & kMask);
  }
}

template <bool kAccumulate>
HPTRAIN_ALWAYS_INLINE void DecodeSegment(const uint8_t* __restrict q, int64_t len, float lo,
                                         float delta, float* __restrict out) {
  for (int64_t j = 0; j < len; ++j) {
    const float v = DequantizeElement(q[j], lo, delta);
    out[j] = kAccumulate ? AddRn(out[j], v) : v;
  }
}

template <int kBits, bool kAccumulate>
HPTRAIN_ALWAYS_INLINE void DecodeRange(const DecodeArgs& a, int64_t begin, int64_t end) {
  alignas(64) uint8_t q[kTile];
  for (int64_t t0 = begin; t0 < end;) {
    const int64_t t1 = std::min(end, (t0 / kTile + 1) * kTile);
    Unpack<kBits>(a.codes + t0 / 8 * kBits,
                  static_cast<int64_t>(QuantizedCodeBytes(t1 - t0, kBits)), q);
    for (int64_t s = t0; s < t1;) {
      const int64_t b = s / a.bucket_size;
      const int64_t e = std::min(t1, (b + 1) * a.bucket_size);
      DecodeSegment<kAccumulate>(q + (s - t0), e - s, a.meta[2 * b], a.meta[2 * b + 1], a.out + s);
      s = e;
    }
    t0 = t1;
  }
}

HPTRAIN_ALWAYS_INLINE void ResidualRange(const float* x, const float* decoded, float* residual,
                                         int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) residual[i] = SubRn(x[i], decoded[i]);
}

// ---- the three builds and their dispatch ----------------------------------------------------
// One struct of kernel entry points per instruction set; the structs differ only in the target
// attribute of their functions and in BucketRange's vector width.

#define HPTRAIN_DEFINE_ISA(Name, TARGET, kLanes)                                       \
  struct Name {                                                                        \
    template <bool kFeedback>                                                          \
    TARGET static void Range(const RangeArgs& a, int64_t b0, int64_t b1) {             \
      RangeBuckets<kFeedback, kLanes>(a, b0, b1);                                      \
    }                                                                                  \
    template <int kBits, bool kStochastic, bool kFeedback>                             \
    TARGET static void Encode(const EncodeArgs& a, int64_t begin, int64_t end) {       \
      EncodeRange<kBits, kStochastic, kFeedback>(a, begin, end);                       \
    }                                                                                  \
    template <int kBits, bool kAccumulate>                                             \
    TARGET static void Decode(const DecodeArgs& a, int64_t begin, int64_t end) {       \
      DecodeRange<kBits, kAccumulate>(a, begin, end);                                  \
    }                                                                                  \
    TARGET static void Residual(const float* x, const float* decoded, float* residual, \
                                int64_t begin, int64_t end) {                          \
      ResidualRange(x, decoded, residual, begin, end);                                 \
    }                                                                                  \
  };
HPTRAIN_DEFINE_ISA(Portable, , 4)
HPTRAIN_DEFINE_ISA(Avx2, HPTRAIN_TARGET_AVX2, 8)
HPTRAIN_DEFINE_ISA(Avx512, HPTRAIN_TARGET_AVX512, 16)
#undef HPTRAIN_DEFINE_ISA

using RangeFn = void (*)(const RangeArgs&, int64_t, int64_t);
using EncodeFn = void (*)(const EncodeArgs&, int64_t, int64_t);
using DecodeFn = void (*)(const DecodeArgs&, int64_t, int64_t);
using ResidualFn = void (*)(const float*, const float*, float*, int64_t, int64_t);

// Calls fn(Isa{}) with the struct of the instruction set in use.
template <typename Fn>
auto WithIsa(const Fn& fn) {
  switch (ActiveIsa()) {
    case QuantizeIsa::kAvx512:
      return fn(Avx512{});
    case QuantizeIsa::kAvx2:
      return fn(Avx2{});
    default:
      return fn(Portable{});
  }
}

RangeFn SelectRange(bool feedback) {
  return WithIsa([&](auto isa) -> RangeFn {
    using Isa = decltype(isa);
    return feedback ? &Isa::template Range<true> : &Isa::template Range<false>;
  });
}

template <typename Isa, int kBits>
EncodeFn SelectEncodeForBits(bool stochastic, bool feedback) {
  if (stochastic) {
    return feedback ? &Isa::template Encode<kBits, true, true>
                    : &Isa::template Encode<kBits, true, false>;
  }
  return feedback ? &Isa::template Encode<kBits, false, true>
                  : &Isa::template Encode<kBits, false, false>;
}

EncodeFn SelectEncode(int bits, bool stochastic, bool feedback) {
  return WithIsa([&](auto isa) -> EncodeFn {
    using Isa = decltype(isa);
    switch (bits) {
      case 1:
        return SelectEncodeForBits<Isa, 1>(stochastic, feedback);
      case 2:
        return SelectEncodeForBits<Isa, 2>(stochastic, feedback);
      case 4:
        return SelectEncodeForBits<Isa, 4>(stochastic, feedback);
      default:
        return SelectEncodeForBits<Isa, 8>(stochastic, feedback);
    }
  });
}

template <typename Isa, int kBits>
DecodeFn SelectDecodeForBits(bool accumulate) {
  return accumulate ? &Isa::template Decode<kBits, true> : &Isa::template Decode<kBits, false>;
}

DecodeFn SelectDecode(int bits, bool accumulate) {
  return WithIsa([&](auto isa) -> DecodeFn {
    using Isa = decltype(isa);
    switch (bits) {
      case 1:
        return SelectDecodeForBits<Isa, 1>(accumulate);
      case 2:
        return SelectDecodeForBits<Isa, 2>(accumulate);
      case 4:
        return SelectDecodeForBits<Isa, 4>(accumulate);
      default:
        return SelectDecodeForBits<Isa, 8>(accumulate);
    }
  });
}

ResidualFn SelectResidual() {
  return WithIsa([](auto isa) -> ResidualFn { return &decltype(isa)::Residual; });
}

// ---- drivers --------------------------------------------------------------------------------

// Runs fn over elements [0, n) split on multiples of 8 elements (whole code bytes).
template <typename Fn>
void ForByteAlignedRanges(int64_t n, const Fn& fn) {
  const int64_t groups = (n + 7) / 8;
  ParallelFor(groups, kParallelGrain / 8,
              [&](int64_t g0, int64_t g1) { fn(g0 * 8, std::min(n, g1 * 8)); });
}

// The error for the lowest bad bucket `b`: the first non-finite element, else the overflow.
absl::Status BucketError(const float* g, const float* r, int64_t n, int64_t bucket_size, int64_t b,
                         const char* what) {
  const int64_t begin = b * bucket_size;
  const int64_t end = std::min(n, begin + bucket_size);
  float mn = std::numeric_limits<float>::infinity(), mx = -mn;
  for (int64_t i = begin; i < end; ++i) {
    const float v = r != nullptr ? AddRn(g[i], r[i]) : g[i];
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": element ", i, " is ", v,
                                                     r != nullptr ? " (grad + residual)" : "",
                                                     "; only finite values can be quantized"));
    }
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": bucket ", b, " spans [", mn, ", ", mx,
                                                 "], a range wider than the largest float"));
}

absl::Status QuantizeImpl(const float* g, float* r, int64_t n, const QuantizeParams& params,
                          float* meta, uint8_t* codes, const char* what) {
  if (absl::Status s = ValidateQuantizeParams(params); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", s.message()));
  }
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": n = ", n, " < 0"));
  if (n == 0) return absl::OkStatus();
  if (g == nullptr || meta == nullptr || codes == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": null buffer"));
  }
  const bool feedback = r != nullptr;
  const int64_t buckets = NumBuckets(n, params.bucket_size);

  std::atomic<int64_t> first_bad{std::numeric_limits<int64_t>::max()};
  const RangeArgs range_args{g,
                             r,
                             n,
                             params.bucket_size,
                             Levels(params.bits),
                             params.scale == QuantizeParams::kAbsMax,
                             meta,
                             &first_bad};
  const RangeFn range = SelectRange(feedback);
  ParallelFor(buckets, std::max<int64_t>(1, kParallelGrain / params.bucket_size),
              [&](int64_t b0, int64_t b1) { range(range_args, b0, b1); });
  if (const int64_t b = first_bad.load(); b != std::numeric_limits<int64_t>::max()) {
    return BucketError(g, r, n, params.bucket_size, b, what);
  }

  const EncodeArgs encode_args{
      g,    r,    n, params.bucket_size, Levels(params.bits), RngKey(params.seed, params.step),
      meta, codes};
  const EncodeFn encode =
      SelectEncode(params.bits, params.rounding == QuantizeParams::kStochastic, feedback);
  ForByteAlignedRanges(n, [&](int64_t begin, int64_t end) { encode(encode_args, begin, end); });
  return absl::OkStatus();
}

void DequantizeImpl(const float* meta, const uint8_t* codes, int64_t n,
                    const QuantizeParams& params, float* out, bool accumulate) {
  const bool valid = ValidateQuantizeParams(params).ok();
  assert(valid && "Dequantize: invalid QuantizeParams");
  if (!valid || n <= 0) return;
  const DecodeArgs args{meta, codes, n, params.bucket_size, out};
  const DecodeFn decode = SelectDecode(params.bits, accumulate);
  ForByteAlignedRanges(n, [&](int64_t begin, int64_t end) { decode(args, begin, end); });
}

}  // namespace

size_t QuantizedCodeBytes(int64_t n, int bits) {
  return (static_cast<size_t>(n) * static_cast<size_t>(bits) + 7) / 8;
}

int64_t NumBuckets(int64_t n, int64_t bucket_size) {
  return n / bucket_size + (n % bucket_size != 0 ? 1 : 0);  // no overflow for huge bucket_size
}

absl::Status ValidateQuantizeParams(const QuantizeParams& params) {
  if (params.bits != 1 && params.bits != 2 && params.bits != 4 && params.bits != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantize bits = ", params.bits, ", expected 1, 2, 4 or 8"));
  }
  if (params.bucket_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantize bucket_size = ", params.bucket_size, ", expected > 0"));
  }
  if (params.scale != QuantizeParams::kMinMax && params.scale != QuantizeParams::kAbsMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantize scale = ", static_cast<int>(params.scale), " is unknown"));
  }
  if (params.rounding != QuantizeParams::kStochastic &&
      params.rounding != QuantizeParams::kNearest) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantize rounding = ", static_cast<int>(params.rounding), " is unknown"));
  }
  return absl::OkStatus();
}

absl::Status Quantize(const float* x, int64_t n, const QuantizeParams& params, float* meta,
                      uint8_t* codes) {
  return QuantizeImpl(x, nullptr, n, params, meta, codes, "Quantize");
}

absl::Status QuantizeWithErrorFeedback(const float* grad, float* residual, int64_t n,
                                       const QuantizeParams& params, float* meta, uint8_t* codes) {
  if (n > 0 && residual == nullptr) {
    return absl::InvalidArgumentError("QuantizeWithErrorFeedback: null residual");
  }
  return QuantizeImpl(grad, residual, n, params, meta, codes, "QuantizeWithErrorFeedback");
}

void Dequantize(const float* meta, const uint8_t* codes, int64_t n, const QuantizeParams& params,
                float* out) {
  DequantizeImpl(meta, codes, n, params, out, /*accumulate=*/false);
}

void DequantizeAccumulate(const float* meta, const uint8_t* codes, int64_t n,
                          const QuantizeParams& params, float* accumulator) {
  DequantizeImpl(meta, codes, n, params, accumulator, /*accumulate=*/true);
}

void UpdateResidual(const float* x, const float* decoded, float* residual, int64_t n) {
  const ResidualFn fn = SelectResidual();
  ParallelFor(n, kParallelGrain,
              [&](int64_t begin, int64_t end) { fn(x, decoded, residual, begin, end); });
}

QuantizeIsa QuantizeIsaSupported() {
#ifdef HPTRAIN_QUANTIZE_X86
  static const QuantizeIsa supported = [] {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
      return QuantizeIsa::kAvx512;
    }
    return __builtin_cpu_supports("avx2") ? QuantizeIsa::kAvx2 : QuantizeIsa::kPortable;
  }();
  return supported;
#else
  return QuantizeIsa::kPortable;
#endif
}

const char* QuantizeIsaName(QuantizeIsa isa) {
  switch (isa) {
    case QuantizeIsa::kAvx512:
      return "avx512";
    case QuantizeIsa::kAvx2:
      return "avx2";
    default:
      return "portable";
  }
}

void SetQuantizeIsaLimitForTesting(QuantizeIsa limit) { g_isa_limit.store(limit); }

}  // namespace hptrain::kernels
