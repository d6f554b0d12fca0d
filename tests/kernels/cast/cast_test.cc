#include "kernels/cast/cast.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cast/cast_common.h"

namespace hptrain::kernels {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

uint16_t ToHalf(float f, CastImpl impl = CastImpl::kAuto) {
  uint16_t h;
  FloatToHalf(&f, 1, &h, impl);
  return h;
}

uint16_t ToBf16(float f) {
  uint16_t b;
  FloatToBfloat16(&f, 1, &b);
  return b;
}

// Independent oracle for fp32 -> fp16 of a finite value: exact double arithmetic and nearbyint
// (round-half-even in the default rounding mode).
uint16_t ReferenceHalf(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a < 0x1p-14) {  // subnormal range: multiples of 2^-24; 1024 · 2^-24 is the smallest normal
    return sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p24));
  }
  int e;
  std::frexp(a, &e);                                 // a = m · 2^e, m in [0.5, 1)
  e -= 1;                                            // a in [2^e, 2^(e+1))
  double m = std::nearbyint(std::ldexp(a, 10 - e));  // 11 significant bits, in [1024, 2048]
  if (m == 2048.0) {
    m = 1024.0;
    e += 1;
  }
  if (e > 15) return sign | 0x7c00;
  return sign | static_cast<uint16_t>(((e + 15) << 10) | (static_cast<int>(m) - 1024));
}

// Every implementation that can run here (the portable one always, F16C when present).
std::vector<CastImpl> Impls() {
  std::vector<CastImpl> impls = {CastImpl::kPortable};
  if (CastImplSupported(CastImpl::kF16c)) impls.push_back(CastImpl::kF16c);
  return impls;
}

// fp32 inputs that stress fp16 rounding: every half value, the midpoints between neighbouring
// halves and one fp32 ulp either side of them, fp32 edge values, a strided sweep over all 2^32
// patterns and random patterns.
std::vector<float> StressFloats() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = HalfBitsToFloat(static_cast<uint16_t>(h));
    const float hi = h + 1 < 0x7c00 ? HalfBitsToFloat(static_cast<uint16_t>(h + 1)) : 65536.0f;
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);  // exact in fp32
    for (float x : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  for (uint64_t u = 0; u <= 0xffffffffull; u += 4093)
    v.push_back(FromBits(static_cast<uint32_t>(u)));
  std::mt19937 rng(12345);
  for (int i = 0; i < 200000; ++i) v.push_back(FromBits(static_cast<uint32_t>(rng())));
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, -0.0f, inf, -inf, 65504.0f, 65519.996f, 65520.0f, 1e30f,
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::max(), 0x1p-24f, 0x1p-25f, 0x1.8p-25f}) {
    v.push_back(x);
    v.push_back(-x);
  }
  for (uint32_t nan : {0x7f800001u, 0x7fc00000u, 0xff800001u, 0x7fbfffffu, 0x7f802000u, 0xffffffffu,
                       0x7f801fffu}) {
    v.push_back(FromBits(nan));
  }
  return v;
}

TEST(CastImpl, AutoResolvesToASupportedImpl) {
  EXPECT_TRUE(CastImplSupported(CastImpl::kAuto));
  EXPECT_TRUE(CastImplSupported(CastImpl::kPortable));
  EXPECT_TRUE(CastImplSupported(ResolvedCastImpl()));
  if (!CastImplSupported(CastImpl::kF16c)) {
    std::printf("note: this CPU has no F16C; only the portable path is tested\n");
  }
}

TEST(HalfToFloat, AllHalvesMatchTheDefinition) {
  std::vector<uint16_t> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = static_cast<uint16_t>(i);
  for (CastImpl impl : Impls()) {
    std::vector<float> f(65536);
    HalfToFloat(h.data(), 65536, f.data(), impl);
    for (uint32_t i = 0; i < 65536; ++i) {
      const int exp = (i >> 10) & 0x1f;
      const int mant = i & 0x3ff;
      const double sign = (i & 0x8000) ? -1.0 : 1.0;
      if (exp == 31) {
        if (mant == 0) {
          ASSERT_EQ(f[i], sign * HUGE_VAL) << std::hex << i;
        } else {
          ASSERT_TRUE(std::isnan(f[i])) << std::hex << i;
          ASSERT_EQ(Bits(f[i]), FloatNanFromHalfBits(static_cast<uint16_t>(i))) << std::hex << i;
        }
        continue;
      }
      const double expect =
          exp == 0 ? sign * std::ldexp(mant, -24) : sign * std::ldexp(1024 + mant, exp - 25);
      ASSERT_EQ(static_cast<double>(f[i]), expect) << std::hex << i;
      ASSERT_EQ(std::signbit(f[i]), (i & 0x8000) != 0) << std::hex << i;
    }
  }
}

TEST(FloatToHalf, AllHalvesRoundTripOnEveryImpl) {
  std::vector<uint16_t> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = static_cast<uint16_t>(i);
  for (CastImpl impl : Impls()) {
    std::vector<float> f(65536);
    std::vector<uint16_t> back(65536);
    HalfToFloat(h.data(), 65536, f.data(), impl);
    FloatToHalf(f.data(), 65536, back.data(), impl);
    for (uint32_t i = 0; i < 65536; ++i) {
      // A signalling NaN comes back quieted; everything else comes back unchanged.
      const uint16_t expect = HalfBitsIsNan(h[i]) ? (h[i] | 0x200) : h[i];
      ASSERT_EQ(back[i], expect) << std::hex << i << " impl " << static_cast<int>(impl);
    }
  }
}

TEST(FloatToHalf, RoundsTiesToEven) {
  for (CastImpl impl : Impls()) {
    EXPECT_EQ(ToHalf(1.0f + 0x1p-11f, impl), 0x3c00);             // tie, 1.0 is even
    EXPECT_EQ(ToHalf(1.0f + 3 * 0x1p-11f, impl), 0x3c02);         // tie, rounds up to even
    EXPECT_EQ(ToHalf(1.0f + 0x1p-11f + 0x1p-23f, impl), 0x3c01);  // just above the tie
    EXPECT_EQ(ToHalf(-(1.0f + 3 * 0x1p-11f), impl), 0xbc02);
    EXPECT_EQ(ToHalf(2048.0f + 1.0f, impl), 0x6800);  // 2049 is a tie between 2048 and 2050
    EXPECT_EQ(ToHalf(2048.0f + 3.0f, impl), 0x6802);
  }
}

TEST(FloatToHalf, OverflowsToInfinity) {
  for (CastImpl impl : Impls()) {
    EXPECT_EQ(ToHalf(65504.0f, impl), 0x7bff);    // largest finite half
    EXPECT_EQ(ToHalf(65519.996f, impl), 0x7bff);  // below the tie with 65536
    EXPECT_EQ(ToHalf(65520.0f, impl), 0x7c00);    // the tie rounds to even = Inf
    EXPECT_EQ(ToHalf(1e10f, impl), 0x7c00);
    EXPECT_EQ(ToHalf(-1e10f, impl), 0xfc00);
    EXPECT_EQ(ToHalf(std::numeric_limits<float>::infinity(), impl), 0x7c00);
    EXPECT_EQ(ToHalf(-std::numeric_limits<float>::infinity(), impl), 0xfc00);
  }
}

TEST(FloatToHalf, RoundsSubnormalsCorrectly) {
  for (CastImpl impl : Impls()) {
    EXPECT_EQ(ToHalf(0x1p-24f, impl), 0x0001);             // smallest subnormal
    EXPECT_EQ(ToHalf(0x1p-25f, impl), 0x0000);             // tie with 0 rounds to even (0)
    EXPECT_EQ(ToHalf(0x1.8p-25f, impl), 0x0001);           // above the tie
    EXPECT_EQ(ToHalf(3 * 0x1p-25f, impl), 0x0002);         // tie between 1 and 2 ulps
    EXPECT_EQ(ToHalf(0x1p-14f, impl), 0x0400);             // smallest normal
    EXPECT_EQ(ToHalf(0x1p-14f - 0x1p-25f, impl), 0x0400);  // rounds up into the normals
    EXPECT_EQ(ToHalf(-0x1p-24f, impl), 0x8001);
    EXPECT_EQ(ToHalf(std::numeric_limits<float>::denorm_min(), impl), 0x0000);
    EXPECT_EQ(ToHalf(-0.0f, impl), 0x8000);
  }
}

TEST(FloatToHalf, KeepsNanAsNan) {
  for (CastImpl impl : Impls()) {
    EXPECT_EQ(ToHalf(FromBits(0x7fc00000u), impl), 0x7e00);
    EXPECT_EQ(ToHalf(FromBits(0x7f800001u), impl), 0x7e00);  // payload below fp16 precision
    EXPECT_EQ(ToHalf(FromBits(0xff800001u), impl), 0xfe00);
    EXPECT_EQ(ToHalf(FromBits(0x7f802000u), impl), 0x7e01);
    EXPECT_EQ(ToHalf(FromBits(0x7fbfffffu), impl), 0x7fff);
  }
}

TEST(FloatToHalf, AllImplsMatchTheOracleBitForBit) {
  const std::vector<float> in = StressFloats();
  std::vector<std::vector<uint16_t>> outs;
  for (CastImpl impl : Impls()) {
    outs.emplace_back(in.size());
    FloatToHalf(in.data(), static_cast<int64_t>(in.size()), outs.back().data(), impl);
  }
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t expect = std::isnan(in[i])   ? HalfNanFromFloatBits(Bits(in[i]))
                            : std::isinf(in[i]) ? (std::signbit(in[i]) ? 0xfc00 : 0x7c00)
                                                : ReferenceHalf(in[i]);
    for (const auto& out : outs) {
      ASSERT_EQ(out[i], expect) << "input bits " << std::hex << Bits(in[i]);
    }
  }
}

TEST(FloatToHalf, ExhaustiveOverAllFloats) {
  if (std::getenv("HPTRAIN_EXHAUSTIVE") == nullptr) {
    GTEST_SKIP() << "set HPTRAIN_EXHAUSTIVE=1 to compare the implementations on all 2^32 floats";
  }
  if (!CastImplSupported(CastImpl::kF16c)) GTEST_SKIP() << "no F16C on this CPU";
  constexpr int64_t kChunk = 1 << 20;
  std::vector<float> in(kChunk);
  std::vector<uint16_t> a(kChunk), b(kChunk);
  for (uint64_t base = 0; base < (1ull << 32); base += kChunk) {
    for (int64_t i = 0; i < kChunk; ++i) in[i] = FromBits(static_cast<uint32_t>(base + i));
    FloatToHalf(in.data(), kChunk, a.data(), CastImpl::kPortable);
    FloatToHalf(in.data(), kChunk, b.data(), CastImpl::kF16c);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), kChunk * sizeof(uint16_t)), 0) << base;
  }
}

TEST(FloatToHalf, OddLengthsUseTheSameBitsAsTheBody) {
  // Lengths 0..19 exercise the F16C tail handling.
  std::mt19937 rng(7);
  for (int64_t n = 0; n < 20; ++n) {
    std::vector<float> in(n);
    for (auto& x : in) x = std::ldexp(static_cast<float>(rng() % 2000) - 1000.0f, -12);
    for (CastImpl impl : Impls()) {
      std::vector<uint16_t> out(n + 1, 0xabcd);
      FloatToHalf(in.data(), n, out.data(), impl);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], FloatToHalfBits(in[i]));
      ASSERT_EQ(out[n], 0xabcd) << "wrote past the end, n = " << n;
      std::vector<float> back(n + 1, 42.0f);
      HalfToFloat(out.data(), n, back.data(), impl);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(back[i], HalfBitsToFloat(out[i]));
      ASSERT_EQ(back[n], 42.0f);
    }
  }
}

TEST(HalfAccumulate, AddsTheDecodedValue) {
  std::mt19937 rng(3);
  const int64_t n = 1003;
  std::vector<uint16_t> h(n);
  std::vector<float> base(n);
  for (int64_t i = 0; i < n; ++i) {
    h[i] = static_cast<uint16_t>(rng() & 0xffff);
    if (HalfBitsIsNan(h[i]) || (h[i] & 0x7c00) == 0x7c00) h[i] = 0x3c00;  // keep sums finite
    base[i] = static_cast<float>(static_cast<int>(rng() % 1000) - 500) * 0.125f;
  }
  for (CastImpl impl : Impls()) {
    std::vector<float> acc = base;
    HalfAccumulate(h.data(), n, acc.data(), impl);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(Bits(acc[i]), Bits(base[i] + HalfBitsToFloat(h[i]))) << i;
    }
  }
}

TEST(FloatToBfloat16, RoundsTiesToEven) {
  EXPECT_EQ(ToBf16(1.0f + 0x1p-8f), 0x3f80);         // tie, 1.0 is even
  EXPECT_EQ(ToBf16(1.0f + 3 * 0x1p-8f), 0x3f82);     // tie, rounds up to even
  EXPECT_EQ(ToBf16(FromBits(0x3f808001u)), 0x3f81);  // just above the tie
  EXPECT_EQ(ToBf16(FromBits(0x3f807fffu)), 0x3f80);  // just below the tie
  EXPECT_EQ(ToBf16(FromBits(0xbf818000u)), 0xbf82);
  EXPECT_EQ(ToBf16(FromBits(0x00008000u)), 0x0000);  // subnormal tie to even
  EXPECT_EQ(ToBf16(FromBits(0x00018000u)), 0x0002);
  EXPECT_EQ(ToBf16(-0.0f), 0x8000);
}

TEST(FloatToBfloat16, OverflowsToInfinityAndQuietsNan) {
  EXPECT_EQ(ToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(ToBf16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(ToBf16(FromBits(0x7f7f7fffu)), 0x7f7f);  // largest finite bf16 stays finite
  EXPECT_EQ(ToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(ToBf16(FromBits(0x7f800001u)), 0x7fc0);  // payload only in the low bits: still NaN
  EXPECT_EQ(ToBf16(FromBits(0xff800001u)), 0xffc0);
  EXPECT_EQ(ToBf16(FromBits(0x7fc00000u)), 0x7fc0);
  EXPECT_EQ(ToBf16(FromBits(0x7fffffffu)), 0x7fff);  // no carry into the sign
}

TEST(FloatToBfloat16, AllBfloat16ValuesRoundTrip) {
  std::vector<uint16_t> b(65536), back(65536);
  std::vector<float> f(65536);
  for (uint32_t i = 0; i < 65536; ++i) b[i] = static_cast<uint16_t>(i);
  Bfloat16ToFloat(b.data(), 65536, f.data());
  FloatToBfloat16(f.data(), 65536, back.data());
  for (uint32_t i = 0; i < 65536; ++i) {
    ASSERT_EQ(Bits(f[i]), i << 16);
    const bool nan = (i & 0x7fff) > 0x7f80;
    ASSERT_EQ(back[i], nan ? (i | 0x40) : i) << std::hex << i;
  }
}

TEST(FloatToBfloat16, MatchesDoubleRoundingOnRandomFloats) {
  std::mt19937 rng(99);
  std::vector<float> in(100000);
  for (auto& x : in) {
    do {
      x = FromBits(static_cast<uint32_t>(rng()));
    } while (!std::isfinite(x));
  }
  std::vector<uint16_t> out(in.size());
  FloatToBfloat16(in.data(), static_cast<int64_t>(in.size()), out.data());
  for (size_t i = 0; i < in.size(); ++i) {
    // The two bf16 neighbours of x, and the exact midpoint, compared in double.
    const uint32_t x = Bits(in[i]);
    // Above the largest finite bf16 the next value is 2^128 (IEEE overflow rule).
    const double down = FromBits(x & 0xffff0000u);
    const double up = (x & 0x7fff0000u) == 0x7f7f0000u ? std::copysign(0x1p128, in[i])
                                                       : FromBits((x & 0xffff0000u) + 0x10000u);
    const double ax = std::fabs(static_cast<double>(in[i])), amid = std::fabs((down + up) / 2);
    uint16_t expect;
    if (ax < amid) {
      expect = static_cast<uint16_t>(x >> 16);
    } else if (ax > amid) {
      expect = static_cast<uint16_t>((x >> 16) + 1);
    } else {
      expect = static_cast<uint16_t>((x >> 16) + ((x >> 16) & 1));
    }
    ASSERT_EQ(out[i], expect) << std::hex << x;
  }
}

TEST(Bfloat16Accumulate, AddsTheDecodedValue) {
  const int64_t n = 37;
  std::vector<uint16_t> b(n);
  std::vector<float> acc(n), expect(n);
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(i) * 0.5f - 3.0f;
    b[i] = ToBf16(v);
    acc[i] = expect[i] = 1.25f * static_cast<float>(i);
    expect[i] += v;  // v is exactly representable in bf16
  }
  Bfloat16Accumulate(b.data(), n, acc.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(acc[i], expect[i]) << i;
}

// Error feedback: what is sent plus the new residual is exactly x = in + residual.
TEST(FloatToHalfWithErrorFeedback, SendsTheSumAndKeepsTheRoundingError) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  const int64_t n = 4099;
  std::vector<float> in(n), residual(n);
  for (int64_t i = 0; i < n; ++i) {
    in[i] = normal(rng) * (i % 7 == 0 ? 1e-4f : 1.0f);  // some below fp16's normal range
    residual[i] = normal(rng) * 1e-3f;
  }
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = in[i] + residual[i];
  std::vector<uint16_t> expect(n), out(n);
  FloatToHalf(x.data(), n, expect.data());
  std::vector<float> sent(n);
  HalfToFloat(expect.data(), n, sent.data());
  ASSERT_EQ(FloatToHalfWithErrorFeedback(in.data(), residual.data(), n, out.data()), -1);
  int64_t nonzero = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], expect[i]) << i;
    ASSERT_EQ(residual[i], x[i] - sent[i]) << i;
    nonzero += residual[i] != 0.0f;
  }
  EXPECT_GT(nonzero, n / 2);  // fp16 really rounded
  // Without a residual: the plain cast.
  ASSERT_EQ(FloatToHalfWithErrorFeedback(in.data(), nullptr, n, out.data()), -1);
  FloatToHalf(in.data(), n, expect.data());
  EXPECT_EQ(out, expect);
}

TEST(FloatToHalfWithErrorFeedback, ANonFiniteSumIsReportedAndNothingWritten) {
  std::vector<float> in = {1.0f, 2.0f, 3.0f, 4.0f};
  std::vector<float> residual = {0.0f, 0.0f, std::numeric_limits<float>::max(), 0.0f};
  in[2] = std::numeric_limits<float>::max();  // overflows to +Inf in the sum
  std::vector<uint16_t> out(4, 7);
  const std::vector<float> before = residual;
  EXPECT_EQ(FloatToHalfWithErrorFeedback(in.data(), residual.data(), 4, out.data()), 2);
  EXPECT_EQ(out, std::vector<uint16_t>(4, 7));
  EXPECT_EQ(residual, before);
  in[2] = std::nanf("");
  EXPECT_EQ(FloatToHalfWithErrorFeedback(in.data(), nullptr, 4, out.data()), 2);
}
}  // namespace
}  // namespace hptrain::kernels
