// CPU quantization kernels against hand-computed bytes and statistical properties
// (docs/algorithms.md §5d: E[deQ(Q(x))] = x within 3σ, |deQ(Q(x)) − x| <= Δ, constants exact), plus
// ParallelFor and the counter-based RNG they rely on. Suites start with "Quantize" so that
// `ctest -R Quantiz` runs them all.
#include "kernels/quantize/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/common/parallel.h"
#include "kernels/common/rng.h"

namespace hptrain::kernels {
namespace {

constexpr uint8_t kCodeSentinel = 0xA5;
constexpr float kMetaSentinel = 12345.0f;
constexpr size_t kGuard = 16;  // sentinel bytes/floats past the end of each output

using Params = QuantizeParams;

Params MakeParams(int bits, int64_t bucket_size, Params::Scale scale, Params::Rounding rounding,
                  uint64_t step = 0) {
  Params p;
  p.bits = bits;
  p.bucket_size = bucket_size;
  p.scale = scale;
  p.rounding = rounding;
  p.seed = 42;
  p.step = step;
  return p;
}

// Outputs of one Quantize call, with guard regions that must stay untouched.
struct Encoded {
  Encoded(int64_t n, const Params& p)
      : meta(2 * NumBuckets(n, p.bucket_size) + kGuard, kMetaSentinel),
        codes(QuantizedCodeBytes(n, p.bits) + kGuard, kCodeSentinel),
        meta_size(2 * NumBuckets(n, p.bucket_size)),
        code_bytes(QuantizedCodeBytes(n, p.bits)) {}

  bool GuardsIntact() const {
    for (size_t i = meta_size; i < meta.size(); ++i) {
      if (meta[i] != kMetaSentinel) return false;
    }
    for (size_t i = code_bytes; i < codes.size(); ++i) {
      if (codes[i] != kCodeSentinel) return false;
    }
    return true;
  }
  std::vector<uint8_t> Codes() const {
    return std::vector<uint8_t>(codes.begin(), codes.begin() + code_bytes);
  }
  std::vector<float> Meta() const {
    return std::vector<float>(meta.begin(), meta.begin() + meta_size);
  }

  std::vector<float> meta;
  std::vector<uint8_t> codes;
  size_t meta_size, code_bytes;
};

Encoded QuantizeOrDie(const std::vector<float>& x, const Params& p) {
  Encoded e(static_cast<int64_t>(x.size()), p);
  const absl::Status s =
      Quantize(x.data(), static_cast<int64_t>(x.size()), p, e.meta.data(), e.codes.data());
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(e.GuardsIntact());
  return e;
}

std::vector<float> Decode(const Encoded& e, int64_t n, const Params& p) {
  std::vector<float> out(static_cast<size_t>(n));
  Dequantize(e.meta.data(), e.codes.data(), n, p, out.data());
  return out;
}

uint32_t CodeAt(const Encoded& e, int64_t i, int bits) {
  return (e.codes[static_cast<size_t>(i * bits / 8)] >> (i * bits % 8)) & ((1u << bits) - 1);
}

// Buckets with different scales and offsets, so that every bucket has its own grid.
std::vector<float> RandomBuckets(int64_t n, int64_t bucket_size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(n));
  float scale = 1.0f, offset = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (i % bucket_size == 0) {
      scale = std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
      offset = normal(rng) * scale * 3.0f;
    }
    x[static_cast<size_t>(i)] = offset + scale * normal(rng);
  }
  return x;
}

class ScopedKernelThreads {
 public:
  explicit ScopedKernelThreads(int threads) { SetKernelThreads(threads); }
  ~ScopedKernelThreads() { SetKernelThreads(0); }
};

// ---- layout ---------------------------------------------------------------------------------

TEST(QuantizeLayout, SizesRoundUp) {
  EXPECT_EQ(QuantizedCodeBytes(0, 1), 0u);
  EXPECT_EQ(QuantizedCodeBytes(1, 1), 1u);
  EXPECT_EQ(QuantizedCodeBytes(8, 1), 1u);
  EXPECT_EQ(QuantizedCodeBytes(9, 1), 2u);
  EXPECT_EQ(QuantizedCodeBytes(9, 2), 3u);
  EXPECT_EQ(QuantizedCodeBytes(3, 4), 2u);
  EXPECT_EQ(QuantizedCodeBytes(5, 8), 5u);
  EXPECT_EQ(NumBuckets(0, 512), 0);
  EXPECT_EQ(NumBuckets(1, 512), 1);
  EXPECT_EQ(NumBuckets(512, 512), 1);
  EXPECT_EQ(NumBuckets(513, 512), 2);
  EXPECT_EQ(NumBuckets(5, std::numeric_limits<int64_t>::max()), 1);
}

struct PackingCase {
  int bits;
  std::vector<float> x;
  std::vector<uint8_t> bytes;
};

TEST(QuantizeLayout, PacksCodesLittleEndianByHand) {
  // One bucket with min 0 and max L, so delta = 1 and each value is its own code.
  const std::vector<PackingCase> cases = {
      // codes 0,1,1,0,1,0,0,0 | 1,1 -> 0b00010110, 0b00000011
      {1, {0, 1, 1, 0, 1, 0, 0, 0, 1, 1}, {0x16, 0x03}},
      // codes 0,1,2,3 | 3,2,1,0 | 2 -> 0b11100100, 0b00011011, 0b00000010
      {2, {0, 1, 2, 3, 3, 2, 1, 0, 2}, {0xE4, 0x1B, 0x02}},
      // codes 0,15 | 3,12 | 9 -> 0xF0, 0xC3, 0x09
      {4, {0, 15, 3, 12, 9}, {0xF0, 0xC3, 0x09}},
      {8, {0, 255, 17, 128}, {0x00, 0xFF, 0x11, 0x80}},
  };
  for (const PackingCase& c : cases) {
    SCOPED_TRACE(c.bits);
    for (Params::Rounding rounding : {Params::kNearest, Params::kStochastic}) {
      const Params p = MakeParams(c.bits, 512, Params::kMinMax, rounding);
      const Encoded e = QuantizeOrDie(c.x, p);
      EXPECT_EQ(e.Meta(), (std::vector<float>{0.0f, 1.0f}));
      // Values on the grid: stochastic rounding adds u < 1 to an integer, so it agrees.
      EXPECT_EQ(e.Codes(), c.bytes);
      EXPECT_EQ(Decode(e, static_cast<int64_t>(c.x.size()), p), c.x);
    }
  }
}

TEST(QuantizeLayout, BucketsThatShareAByte) {
  // bits 2, buckets of 3: {10, 13, 11} -> lo 10, delta 1, codes 0,3,1; {-1,-1,-1} constant,
  // codes 0,0,0; tail {0, 6} -> lo 0, delta 2, codes 0,3.
  // Stream 0,3,1,0 | 0,0,0,3 -> 0b00011100, 0b11000000.
  const std::vector<float> x = {10, 13, 11, -1, -1, -1, 0, 6};
  const Params p = MakeParams(2, 3, Params::kMinMax, Params::kNearest);
  const Encoded e = QuantizeOrDie(x, p);
  EXPECT_EQ(e.Meta(), (std::vector<float>{10, 1, -1, 0, 0, 2}));
  EXPECT_EQ(e.Codes(), (std::vector<uint8_t>{0x1C, 0xC0}));
  EXPECT_EQ(Decode(e, 8, p), x);
}

TEST(QuantizeLayout, AbsMaxScaleAndNearestHalfUp) {
  // absmax 3 -> lo -3, delta 2: (x + 3) / 2 = 0, 3, 2, 1 -> 0b01101100.
  const Params p = MakeParams(2, 512, Params::kAbsMax, Params::kNearest);
  const Encoded e = QuantizeOrDie({-3, 3, 1, -1}, p);
  EXPECT_EQ(e.Meta(), (std::vector<float>{-3, 2}));
  EXPECT_EQ(e.Codes(), (std::vector<uint8_t>{0x6C}));

  // 1 bit on [0, 1]: 0.5 rounds up, 0.49 down -> codes 0,1,0,1 -> 0b1010.
  const Encoded half = QuantizeOrDie({0.0f, 0.5f, 0.49f, 1.0f},
                                     MakeParams(1, 512, Params::kMinMax, Params::kNearest));
  EXPECT_EQ(half.Codes(), (std::vector<uint8_t>{0x0A}));
}

// ---- error bounds ---------------------------------------------------------------------------

TEST(QuantizeRoundTrip, ErrorIsAtMostDeltaAndHalfDeltaForNearest) {
  constexpr int64_t kN = 5000, kBucket = 512;  // 10 buckets, the last one 392 long
  const std::vector<float> x = RandomBuckets(kN, kBucket, 1);
  for (int bits : {1, 2, 4, 8}) {
    for (Params::Scale scale : {Params::kMinMax, Params::kAbsMax}) {
      for (Params::Rounding rounding : {Params::kStochastic, Params::kNearest}) {
        SCOPED_TRACE(testing::Message()
                     << "bits " << bits << " scale " << scale << " rounding " << rounding);
        const Params p = MakeParams(bits, kBucket, scale, rounding, 7);
        const Encoded e = QuantizeOrDie(x, p);
        const std::vector<float> y = Decode(e, kN, p);
        const float levels = static_cast<float>((1 << bits) - 1);
        for (int64_t i = 0; i < kN; ++i) {
          const int64_t b = i / kBucket;
          const float lo = e.meta[2 * b], delta = e.meta[2 * b + 1];
          const float hi = lo + levels * delta;
          const float bound = rounding == Params::kNearest ? delta / 2 : delta;
          const float slack = 8 * FLT_EPSILON * (std::fabs(lo) + std::fabs(hi));
          ASSERT_LE(std::fabs(y[i] - x[i]), bound + slack) << "element " << i;
          ASSERT_GE(y[i], lo - slack);
          ASSERT_LE(y[i], hi + slack);
        }
        // The scale itself: lo = min (or −absmax) of the bucket, exactly.
        for (int64_t b = 0; b < NumBuckets(kN, kBucket); ++b) {
          const auto first = x.begin() + b * kBucket;
          const auto last = x.begin() + std::min(kN, (b + 1) * kBucket);
          const auto [mn, mx] = std::minmax_element(first, last);
          if (scale == Params::kMinMax) {
            EXPECT_EQ(e.meta[2 * b], *mn);
            EXPECT_EQ(e.meta[2 * b + 1], (*mx - *mn) / levels);
          } else {
            const float a = std::max(-*mn, *mx);
            EXPECT_EQ(e.meta[2 * b], -a);
            EXPECT_EQ(e.meta[2 * b + 1], (a + a) / levels);
          }
        }
      }
    }
  }
}

TEST(QuantizeRoundTrip, ConstantBucketsAndTailsRoundTripExactly) {
  // Buckets of 64: all 3.25; random; all -7e-20; a 10-element tail of mixed ±0.
  std::vector<float> x(64 * 3 + 10);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1, 1);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = i < 64 ? 3.25f : i < 128 ? uni(rng) : i < 192 ? -7e-20f : (i % 2 ? -0.0f : 0.0f);
  }
  for (int bits : {1, 2, 4, 8}) {
    for (Params::Rounding rounding : {Params::kStochastic, Params::kNearest}) {
      SCOPED_TRACE(testing::Message() << "bits " << bits << " rounding " << rounding);
      const Params p = MakeParams(bits, 64, Params::kMinMax, rounding);
      const Encoded e = QuantizeOrDie(x, p);
      const std::vector<float> y = Decode(e, static_cast<int64_t>(x.size()), p);
      for (int b : {0, 2, 3}) {
        EXPECT_EQ(e.meta[2 * b + 1], 0.0f) << "bucket " << b;
        for (int64_t i = 64 * b; i < std::min<int64_t>(64 * (b + 1), x.size()); ++i) {
          ASSERT_EQ(CodeAt(e, i, bits), 0u) << i;
          ASSERT_EQ(y[i], x[i]) << i;
        }
      }
      EXPECT_EQ(std::signbit(e.meta[6]), false) << "a zero lo is +0";
      // Padding bits of the last byte are zero.
      const int used_bits = static_cast<int>(x.size() * bits % 8);
      if (used_bits != 0) {
        EXPECT_EQ(e.codes[e.code_bytes - 1] >> used_bits, 0);
      }
    }
  }
  // kAbsMax: only an all-zero bucket is constant.
  const Params p = MakeParams(4, 64, Params::kAbsMax, Params::kStochastic);
  const Encoded e = QuantizeOrDie(x, p);
  EXPECT_EQ(e.meta[6], 0.0f);
  EXPECT_EQ(e.meta[7], 0.0f);
}

TEST(QuantizeRoundTrip, TinyRangeGetsANonZeroDelta) {
  // max − min = 2^-149 is not zero, but (max − min) / 255 underflows to 0.
  const std::vector<float> x = {0.0f, std::numeric_limits<float>::denorm_min()};
  const Params p = MakeParams(8, 512, Params::kMinMax, Params::kNearest);
  const Encoded e = QuantizeOrDie(x, p);
  EXPECT_GT(e.meta[1], 0.0f);
  EXPECT_EQ(Decode(e, 2, p), x);
}

// ---- stochastic rounding --------------------------------------------------------------------

TEST(QuantizeStochastic, UnbiasedOverSteps) {
  constexpr int kSteps = 10000;
  // Bucket [0, 1] at 2 bits (delta 1/3) and [-2, 2] at 1 bit with kAbsMax (delta 4).
  struct Case {
    int bits;
    Params::Scale scale;
    std::vector<float> x;
  };
  const std::vector<Case> cases = {
      {2, Params::kMinMax, {0.0f, 1.0f, 0.1f, 0.25f, 0.5f, 0.62f, 0.9f, 0.999f}},
      {1, Params::kAbsMax, {-2.0f, 2.0f, -1.5f, -0.3f, 0.0f, 0.7f, 1.9f}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.bits);
    const int64_t n = static_cast<int64_t>(c.x.size());
    std::vector<double> sum(c.x.size(), 0.0);
    float lo = 0, delta = 0;
    for (int step = 0; step < kSteps; ++step) {
      const Params p = MakeParams(c.bits, 512, c.scale, Params::kStochastic, step);
      const Encoded e = QuantizeOrDie(c.x, p);
      const std::vector<float> y = Decode(e, n, p);
      for (size_t i = 0; i < y.size(); ++i) sum[i] += y[i];
      lo = e.meta[0];
      delta = e.meta[1];
    }
    for (size_t i = 0; i < c.x.size(); ++i) {
      const double t = (c.x[i] - lo) / delta;
      const double frac = t - std::floor(t);  // P(round up)
      const double sigma = delta * std::sqrt(frac * (1 - frac) / kSteps);
      EXPECT_NEAR(sum[i] / kSteps, c.x[i], 3 * sigma + 1e-6) << "x = " << c.x[i];
    }
  }
}

TEST(QuantizeStochastic, CodesDependOnSeedAndStepOnly) {
  const std::vector<float> x = RandomBuckets(4096, 512, 5);
  const Params p = MakeParams(2, 512, Params::kMinMax, Params::kStochastic, 9);
  const std::vector<uint8_t> a = QuantizeOrDie(x, p).Codes();
  EXPECT_EQ(QuantizeOrDie(x, p).Codes(), a);

  auto differing = [&](const std::vector<uint8_t>& b) {
    int count = 0;
    for (size_t i = 0; i < a.size(); ++i) count += a[i] != b[i];
    return count;
  };
  Params other_step = p;
  other_step.step = 10;
  Params other_seed = p;
  other_seed.seed = 43;
  // About 2/3 of the 2-bit codes are rounded at random; nearly every byte should change.
  EXPECT_GT(differing(QuantizeOrDie(x, other_step).Codes()), 512);
  EXPECT_GT(differing(QuantizeOrDie(x, other_seed).Codes()), 512);

  // Nearest rounding ignores seed and step.
  Params nearest = p;
  nearest.rounding = Params::kNearest;
  Params nearest_other = nearest;
  nearest_other.step = 11;
  nearest_other.seed = 1;
  EXPECT_EQ(QuantizeOrDie(x, nearest).Codes(), QuantizeOrDie(x, nearest_other).Codes());
}

TEST(QuantizeStochastic, CodesFollowTheDocumentedFormula) {
  // q_i = floor((x_i − lo) / delta + u_i), u_i = RngUniform(seed, step, i): checks that tiles,
  // bucket segments and threads hand every element its own global index.
  constexpr int64_t kN = 20000, kBucket = 700;
  const std::vector<float> x = RandomBuckets(kN, kBucket, 12);
  const Params p = MakeParams(4, kBucket, Params::kMinMax, Params::kStochastic, 31);
  const Encoded e = QuantizeOrDie(x, p);
  for (int64_t i = 0; i < kN; ++i) {
    const int64_t b = i / kBucket;
    const float lo = e.meta[2 * b], delta = e.meta[2 * b + 1];
    const float t = (x[i] - lo) / delta + RngUniform(p.seed, p.step, static_cast<uint64_t>(i));
    ASSERT_EQ(CodeAt(e, i, 4), static_cast<uint32_t>(std::min(std::floor(t), 15.0f))) << i;
  }
}

TEST(QuantizeRng, UniformAndIndependentAcrossSteps) {
  constexpr int kN = 1 << 18, kBins = 16;
  std::vector<int> bins(kBins, 0);
  double sum = 0, cross = 0, sum_next = 0;
  for (uint64_t i = 0; i < kN; ++i) {
    const float u = RngUniform(42, 7, i);
    const float v = RngUniform(42, 8, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ++bins[static_cast<int>(u * kBins)];
    sum += u;
    sum_next += v;
    cross += (u - 0.5) * (v - 0.5);
  }
  // Mean 1/2 (σ = 1/sqrt(12·N)), step-to-step correlation 0 (σ = 1/sqrt(N)), χ² with 15 degrees
  // of freedom below its 99.9 % quantile 37.7.
  EXPECT_NEAR(sum / kN, 0.5, 5 / std::sqrt(12.0 * kN));
  EXPECT_NEAR(sum_next / kN, 0.5, 5 / std::sqrt(12.0 * kN));
  EXPECT_NEAR(cross / kN * 12, 0.0, 5 / std::sqrt(static_cast<double>(kN)));
  double chi2 = 0;
  for (int c : bins) chi2 += std::pow(c - kN / kBins, 2) / (kN / kBins);
  EXPECT_LT(chi2, 37.7);
  // Elements past 2^32 use another block key, not a repeat of the first block.
  EXPECT_NE(RngUniform(42, 7, 5), RngUniform(42, 7, (uint64_t{1} << 32) + 5));
}

// ---- invalid input --------------------------------------------------------------------------

TEST(QuantizeInvalid, RejectsNanAndInfAnywhereLeavingCodesUntouched) {
  constexpr int64_t kN = 1000;
  const Params p = MakeParams(4, 256, Params::kMinMax, Params::kStochastic);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (int64_t pos : {int64_t{0}, int64_t{700}, kN - 1}) {
      SCOPED_TRACE(testing::Message() << bad << " at " << pos);
      std::vector<float> x = RandomBuckets(kN, 256, 2);
      x[pos] = bad;
      Encoded e(kN, p);
      const absl::Status s = Quantize(x.data(), kN, p, e.meta.data(), e.codes.data());
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_NE(s.message().find(absl::StrCat("element ", pos)), absl::string_view::npos) << s;
      EXPECT_TRUE(std::all_of(e.codes.begin(), e.codes.end(),
                              [](uint8_t c) { return c == kCodeSentinel; }));

      // Error feedback: codes and residual untouched too.
      std::vector<float> residual(kN, 0.125f);
      Encoded f(kN, p);
      const absl::Status t = QuantizeWithErrorFeedback(x.data(), residual.data(), kN, p,
                                                       f.meta.data(), f.codes.data());
      EXPECT_EQ(t.code(), absl::StatusCode::kInvalidArgument) << t;
      EXPECT_TRUE(
          std::all_of(residual.begin(), residual.end(), [](float r) { return r == 0.125f; }));
      EXPECT_TRUE(std::all_of(f.codes.begin(), f.codes.end(),
                              [](uint8_t c) { return c == kCodeSentinel; }));
    }
  }
}

TEST(QuantizeInvalid, RejectsOverflowingRangesAndSums) {
  const Params minmax = MakeParams(8, 512, Params::kMinMax, Params::kNearest);
  const Params absmax = MakeParams(8, 512, Params::kAbsMax, Params::kNearest);
  Encoded e(2, minmax);
  const std::vector<float> wide = {-3e38f, 3e38f};
  EXPECT_EQ(Quantize(wide.data(), 2, minmax, e.meta.data(), e.codes.data()).code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<float> big = {2e38f, 1.0f};
  EXPECT_TRUE(Quantize(big.data(), 2, minmax, e.meta.data(), e.codes.data()).ok());
  EXPECT_EQ(Quantize(big.data(), 2, absmax, e.meta.data(), e.codes.data()).code(),
            absl::StatusCode::kInvalidArgument);
  // grad + residual overflows to Inf.
  std::vector<float> grad = {3e38f, 0.0f}, residual = {3e38f, 0.0f};
  EXPECT_EQ(QuantizeWithErrorFeedback(grad.data(), residual.data(), 2, minmax, e.meta.data(),
                                      e.codes.data())
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(residual[0], 3e38f);
}

TEST(QuantizeInvalid, RejectsBadParams) {
  const std::vector<float> x(16, 1.0f);
  Encoded e(16, MakeParams(8, 1, Params::kMinMax, Params::kNearest));
  for (int bits : {0, 3, 16, -1}) {
    Params p = MakeParams(bits, 4, Params::kMinMax, Params::kNearest);
    EXPECT_EQ(ValidateQuantizeParams(p).code(), absl::StatusCode::kInvalidArgument) << bits;
    EXPECT_EQ(Quantize(x.data(), 16, p, e.meta.data(), e.codes.data()).code(),
              absl::StatusCode::kInvalidArgument);
  }
  for (int64_t bucket_size : {int64_t{0}, int64_t{-5}}) {
    Params p = MakeParams(8, bucket_size, Params::kMinMax, Params::kNearest);
    EXPECT_EQ(Quantize(x.data(), 16, p, e.meta.data(), e.codes.data()).code(),
              absl::StatusCode::kInvalidArgument);
  }
  Params p = MakeParams(8, 4, Params::kMinMax, Params::kNearest);
  p.scale = static_cast<Params::Scale>(7);
  EXPECT_EQ(ValidateQuantizeParams(p).code(), absl::StatusCode::kInvalidArgument);
  p.scale = Params::kMinMax;
  EXPECT_EQ(Quantize(x.data(), -1, p, e.meta.data(), e.codes.data()).code(),
            absl::StatusCode::kInvalidArgument);
  // n == 0 is fine and writes nothing.
  Encoded empty(0, p);
  EXPECT_TRUE(Quantize(x.data(), 0, p, empty.meta.data(), empty.codes.data()).ok());
  EXPECT_TRUE(empty.GuardsIntact());
  EXPECT_TRUE(
      std::all_of(e.codes.begin(), e.codes.end(), [](uint8_t c) { return c == kCodeSentinel; }));
}

// ---- error feedback and accumulation --------------------------------------------------------

TEST(QuantizeErrorFeedback, SentPlusResidualEqualsSumOfGradients) {
  constexpr int64_t kN = 3000;
  constexpr int kSteps = 100;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.3f, 1.0f);
  std::vector<float> residual(kN, 0.0f), decoded(kN), grad(kN);
  std::vector<float> generic_residual(kN, 0.0f);
  std::vector<double> sum_grad(kN, 0.0), sum_abs(kN, 0.0), sum_sent(kN, 0.0);
  for (int step = 0; step < kSteps; ++step) {
    for (int64_t i = 0; i < kN; ++i) {
      grad[i] = normal(rng);
      sum_grad[i] += grad[i];
      sum_abs[i] += std::fabs(grad[i]);
    }
    const Params p = MakeParams(2, 512, Params::kMinMax, Params::kStochastic, step);
    Encoded e(kN, p);
    ASSERT_TRUE(QuantizeWithErrorFeedback(grad.data(), residual.data(), kN, p, e.meta.data(),
                                          e.codes.data())
                    .ok());
    Dequantize(e.meta.data(), e.codes.data(), kN, p, decoded.data());
    for (int64_t i = 0; i < kN; ++i) sum_sent[i] += decoded[i];

    // The fused kernel equals error feedback wrapped around plain Quantize, bit for bit.
    std::vector<float> x(kN);
    for (int64_t i = 0; i < kN; ++i) x[i] = grad[i] + generic_residual[i];
    const Encoded g = QuantizeOrDie(x, p);
    ASSERT_EQ(g.Codes(), e.Codes());
    ASSERT_EQ(g.Meta(), e.Meta());
    std::vector<float> generic_decoded = Decode(g, kN, p);
    UpdateResidual(x.data(), generic_decoded.data(), generic_residual.data(), kN);
    ASSERT_EQ(generic_residual, residual);
    for (int64_t i = 0; i < kN; ++i) {
      ASSERT_LE(std::fabs(residual[i]), e.meta[2 * (i / 512) + 1] * 1.0001f) << i;
    }
  }
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_NEAR(sum_sent[i] + residual[i], sum_grad[i], 1e-5 * sum_abs[i]) << i;
  }
}

TEST(QuantizeDequantizeAccumulate, EqualsAccumulatorPlusDequantize) {
  constexpr int64_t kN = 10007;
  const std::vector<float> x = RandomBuckets(kN, 300, 4);
  const std::vector<float> acc = RandomBuckets(kN, 1000, 5);
  for (int bits : {1, 2, 4, 8}) {
    SCOPED_TRACE(bits);
    const Params p = MakeParams(bits, 300, Params::kMinMax, Params::kStochastic);
    const Encoded e = QuantizeOrDie(x, p);
    const std::vector<float> y = Decode(e, kN, p);
    std::vector<float> fused = acc;
    DequantizeAccumulate(e.meta.data(), e.codes.data(), kN, p, fused.data());
    for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(fused[i], acc[i] + y[i]) << i;
  }
}

TEST(QuantizeUpdateResidual, WorksInPlace) {
  std::vector<float> x = {1.5f, -2.0f, 0.25f}, decoded = {1.0f, -1.0f, 0.25f};
  UpdateResidual(x.data(), decoded.data(), x.data(), 3);
  EXPECT_EQ(x, (std::vector<float>{0.5f, -1.0f, 0.0f}));
}

// ---- threads and instruction sets give the same bytes ---------------------------------------

struct AllOutputs {
  std::vector<float> meta, residual, decoded, accumulated;
  std::vector<uint8_t> codes;
  bool operator==(const AllOutputs& o) const {
    auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
    };
    return same(meta, o.meta) && same(residual, o.residual) && same(decoded, o.decoded) &&
           same(accumulated, o.accumulated) && codes == o.codes;
  }
};

AllOutputs RunAll(const std::vector<float>& x, const Params& p) {
  const int64_t n = static_cast<int64_t>(x.size());
  AllOutputs out;
  Encoded e = QuantizeOrDie(x, p);
  out.meta = e.Meta();
  out.codes = e.Codes();
  out.decoded = Decode(e, n, p);
  out.accumulated = x;
  DequantizeAccumulate(e.meta.data(), e.codes.data(), n, p, out.accumulated.data());
  out.residual.assign(x.size(), 0.01f);
  Encoded f(n, p);
  EXPECT_TRUE(
      QuantizeWithErrorFeedback(x.data(), out.residual.data(), n, p, f.meta.data(), f.codes.data())
          .ok());
  out.codes.insert(out.codes.end(), f.codes.begin(), f.codes.begin() + f.code_bytes);
  UpdateResidual(x.data(), out.decoded.data(), out.accumulated.data(), n);
  return out;
}

TEST(QuantizeParallel, ParallelEqualsSerialBitwiseOn4MElements) {
  constexpr int64_t kN = (int64_t{4} << 20) + 13;
  const std::vector<float> x = RandomBuckets(kN, 777, 6);
  // Bucket sizes that are and are not multiples of 8 (buckets sharing code bytes).
  for (const Params& p : {MakeParams(2, 512, Params::kMinMax, Params::kStochastic, 3),
                          MakeParams(1, 1000, Params::kAbsMax, Params::kStochastic, 4),
                          MakeParams(4, 333, Params::kMinMax, Params::kNearest, 5)}) {
    SCOPED_TRACE(p.bits);
    AllOutputs serial, two, seven;
    {
      ScopedKernelThreads threads(1);
      serial = RunAll(x, p);
    }
    {
      ScopedKernelThreads threads(2);
      two = RunAll(x, p);
    }
    {
      ScopedKernelThreads threads(7);
      seven = RunAll(x, p);
    }
    EXPECT_TRUE(serial == two);
    EXPECT_TRUE(serial == seven);
  }
}

// Every build this CPU can run (AVX2, AVX-512) against the portable one, bit for bit.
TEST(QuantizeParallel, EveryBuildEqualsThePortableOne) {
  constexpr int64_t kN = 100003;
  const std::vector<float> x = RandomBuckets(kN, 500, 8);
  const QuantizeIsa supported = QuantizeIsaSupported();
  std::cout << "widest build this CPU runs: " << QuantizeIsaName(supported) << "\n";
  for (QuantizeIsa isa : {QuantizeIsa::kAvx2, QuantizeIsa::kAvx512}) {
    if (isa > supported) {
      std::cout << "not compared: this CPU cannot run the " << QuantizeIsaName(isa) << " build\n";
      continue;
    }
    for (int bits : {1, 2, 4, 8}) {
      for (Params::Rounding rounding : {Params::kStochastic, Params::kNearest}) {
        SCOPED_TRACE(testing::Message()
                     << QuantizeIsaName(isa) << " bits " << bits << " rounding " << rounding);
        const Params p = MakeParams(bits, 500, Params::kMinMax, rounding, 1);
        SetQuantizeIsaLimitForTesting(QuantizeIsa::kPortable);
        const AllOutputs portable = RunAll(x, p);
        SetQuantizeIsaLimitForTesting(isa);
        const AllOutputs wide = RunAll(x, p);
        SetQuantizeIsaLimitForTesting(QuantizeIsa::kAvx512);
        EXPECT_TRUE(portable == wide);
      }
    }
  }
  if (supported == QuantizeIsa::kPortable) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
}

// ---- ParallelFor ----------------------------------------------------------------------------

TEST(QuantizeParallelFor, ChunksPartitionTheRange) {
  ScopedKernelThreads threads(5);
  EXPECT_EQ(KernelThreads(), 5);
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  ParallelFor(1000003, 1000, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());
  ASSERT_EQ(chunks.size(), 5u);
  int64_t next = 0;
  for (const auto& [begin, end] : chunks) {
    EXPECT_EQ(begin, next);
    EXPECT_GE(end - begin, 1000);
    next = end;
  }
  EXPECT_EQ(next, 1000003);
}

TEST(QuantizeParallelFor, SmallRangesRunInlineAndEmptyOnesNotAtAll) {
  ScopedKernelThreads threads(4);
  int calls = 0;
  std::thread::id where;
  ParallelFor(1999, 1000, [&](int64_t begin, int64_t end) {
    ++calls;
    where = std::this_thread::get_id();
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 1999);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(where, std::this_thread::get_id());
  ParallelFor(0, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace hptrain::kernels
