#include "kernels/topk/dgc.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/topk/topk.h"
#include "kernels/topk/topk_common.h"

namespace hptrain::kernels {
namespace {

constexpr int64_t kN = 1000000;

// Test data, generated from raw 64-bit draws so it is the same with every standard library.
class Draws {
 public:
  explicit Draws(uint64_t seed) : rng_(seed) {}
  double Uniform() { return (static_cast<double>(rng_() >> 11) + 0.5) * 0x1p-53; }  // (0, 1)
  double Normal() {
    return std::sqrt(-2.0 * std::log(Uniform())) * std::cos(6.283185307179586 * Uniform());
  }
  double Sign() { return (rng_() & 1) ? 1.0 : -1.0; }

 private:
  std::mt19937_64 rng_;
};

enum class Dist { kNormal, kCauchy, kPareto, kQuantized, kFewValues };

const char* Name(Dist d) {
  switch (d) {
    case Dist::kNormal:
      return "normal";
    case Dist::kCauchy:
      return "cauchy";
    case Dist::kPareto:
      return "pareto(1.2)";
    case Dist::kQuantized:
      return "normal rounded to 1/8";
    case Dist::kFewValues:
      return "90% zero + 5 values";
  }
  return "?";
}

std::vector<float> Make(Dist d, int64_t n, uint64_t seed) {
  Draws r(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) {
    switch (d) {
      case Dist::kNormal:
        v = static_cast<float>(r.Normal());
        break;
      case Dist::kCauchy:
        v = static_cast<float>(std::tan(3.141592653589793 * (r.Uniform() - 0.5)));
        break;
      case Dist::kPareto:  // heavy tail, alpha = 1.2, random sign
        v = static_cast<float>(r.Sign() * std::pow(r.Uniform(), -1.0 / 1.2));
        break;
      case Dist::kQuantized:  // many equal values, but many levels
        v = static_cast<float>(std::round(r.Normal() * 8.0) / 8.0);
        break;
      case Dist::kFewValues: {  // massive ties: no threshold alone can hit the band
        const double u = r.Uniform();
        v = u < 0.9 ? 0.0f : static_cast<float>(r.Sign() * (1 + static_cast<int>(u * 50) % 5));
        break;
      }
    }
  }
  return x;
}

const char* MethodName(ThresholdSelection::Method m) {
  switch (m) {
    case ThresholdSelection::Method::kAll:
      return "all";
    case ThresholdSelection::Method::kSampled:
      return "sampled";
    case ThresholdSelection::Method::kAdjusted:
      return "adjusted";
    case ThresholdSelection::Method::kExact:
      return "exact";
  }
  return "?";
}

// Checks that `sel` is a valid selection of x for density, within the band, and that
// PackSelection reproduces it.
void ExpectValidSelection(const std::vector<float>& x, double density,
                          const ThresholdSelection& sel) {
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t k = DgcTargetCount(n, density);
  EXPECT_GE(sel.count, static_cast<int64_t>(std::ceil(0.8 * k))) << "k " << k;
  EXPECT_LE(sel.count, static_cast<int64_t>(std::floor(1.3 * k))) << "k " << k;
  std::vector<int32_t> indices(sel.count + 1);
  std::vector<float> values(sel.count + 1);
  ASSERT_EQ(PackSelection(x.data(), n, sel, indices.data(), values.data(), sel.count), sel.count);
  const int64_t at_or_above = CountAboveThreshold(x.data(), n, sel.threshold);
  if (sel.equal_limit < 0) {
    EXPECT_EQ(sel.count, at_or_above);
  } else {
    EXPECT_EQ(sel.method, ThresholdSelection::Method::kExact);
    EXPECT_LT(sel.count, at_or_above);
  }
  for (int64_t i = 0; i < sel.count; ++i) {
    ASSERT_GE(std::fabs(values[i]), sel.threshold);
    if (i > 0) {
      ASSERT_LT(indices[i - 1], indices[i]);
    }
  }
}

class DgcSelectBand : public ::testing::TestWithParam<Dist> {};

TEST_P(DgcSelectBand, CountIsWithinBandForEveryDensity) {
  const std::vector<float> x = Make(GetParam(), kN, 42);
  for (double density : {0.001, 0.01, 0.1}) {
    for (uint64_t step : {0, 1, 2}) {
      DgcThresholdOptions options;
      options.density = density;
      const ThresholdSelection sel = DgcSelect(x.data(), kN, options, /*seed=*/7, step);
      std::printf(
          "%-22s density %-5g step %d: threshold %-12g count %-7lld (k %lld) %s, %d "
          "count passes%s\n",
          Name(GetParam()), density, static_cast<int>(step), sel.threshold,
          static_cast<long long>(sel.count), static_cast<long long>(DgcTargetCount(kN, density)),
          MethodName(sel.method), sel.count_passes, sel.equal_limit >= 0 ? ", ties capped" : "");
      ExpectValidSelection(x, density, sel);
      EXPECT_LE(sel.count_passes, 1 + options.max_adjustments);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Distributions, DgcSelectBand,
                         ::testing::Values(Dist::kNormal, Dist::kCauchy, Dist::kPareto,
                                           Dist::kQuantized, Dist::kFewValues),
                         [](const ::testing::TestParamInfo<Dist>& info) {
                           switch (info.param) {
                             case Dist::kNormal:
                               return std::string("Normal");
                             case Dist::kCauchy:
                               return std::string("Cauchy");
                             case Dist::kPareto:
                               return std::string("Pareto");
                             case Dist::kQuantized:
                               return std::string("Quantized");
                             case Dist::kFewValues:
                               return std::string("FewValues");
                           }
                           return std::string("Unknown");
                         });

TEST(DgcSelect, IsDeterministicForSeedAndStep) {
  const std::vector<float> x = Make(Dist::kNormal, 200000, 1);
  DgcThresholdOptions options;
  options.density = 0.01;
  const ThresholdSelection a = DgcSelect(x.data(), 200000, options, 3, 9);
  const ThresholdSelection b = DgcSelect(x.data(), 200000, options, 3, 9);
  EXPECT_EQ(a.threshold, b.threshold);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.equal_limit, b.equal_limit);
  EXPECT_EQ(DgcThreshold(x.data(), 200000, 0.01, 0.01, 3, 9), a.threshold);
}

TEST(DgcSelect, SamplePositionsAreStratifiedAndDependOnSeedAndStep) {
  const int64_t stride = 100;
  const uint64_t key = DgcSampleKey(1, 2);
  int differ_step = 0, differ_seed = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const int64_t pos = DgcSampleIndex(i, stride, key);
    ASSERT_GE(pos, i * stride);
    ASSERT_LT(pos, (i + 1) * stride);
    differ_step += pos != DgcSampleIndex(i, stride, DgcSampleKey(1, 3));
    differ_seed += pos != DgcSampleIndex(i, stride, DgcSampleKey(2, 2));
  }
  EXPECT_GT(differ_step, 900);
  EXPECT_GT(differ_seed, 900);
  EXPECT_EQ(DgcSampleIndex(5, 1, key), 5);
}

TEST(DgcSelect, SmallBuffersAreSampledWhole) {
  // n <= min_samples: the sample is the buffer, so the sampled threshold is the exact k-th.
  const std::vector<float> x = Make(Dist::kNormal, 1000, 5);
  DgcThresholdOptions options;
  options.density = 0.01;
  const ThresholdSelection sel = DgcSelect(x.data(), 1000, options, 0, 0);
  EXPECT_EQ(sel.method, ThresholdSelection::Method::kSampled);
  EXPECT_EQ(sel.count, 10);
  std::vector<int32_t> exact(10), packed(10);
  std::vector<float> values(10);
  TopKExact(x.data(), 1000, 10, exact.data(), values.data());
  PackSelection(x.data(), 1000, sel, packed.data(), values.data(), 10);
  EXPECT_EQ(exact, packed);
}

TEST(DgcSelect, EdgeCases) {
  DgcThresholdOptions options;
  options.density = 1.0;
  const std::vector<float> x = Make(Dist::kNormal, 100, 6);
  ThresholdSelection sel = DgcSelect(x.data(), 100, options, 0, 0);
  EXPECT_EQ(sel.method, ThresholdSelection::Method::kAll);
  EXPECT_EQ(sel.count, 100);
  EXPECT_EQ(CountAboveThreshold(x.data(), 100, sel.threshold), 100);

  sel = DgcSelect(nullptr, 0, options, 0, 0);
  EXPECT_EQ(sel.count, 0);
  EXPECT_TRUE(std::isinf(sel.threshold));

  // All zeros: every threshold selects all or nothing, so the ties are capped at k.
  const std::vector<float> zeros(100000, 0.0f);
  options.density = 0.001;
  sel = DgcSelect(zeros.data(), 100000, options, 0, 0);
  EXPECT_EQ(sel.count, 100);
  EXPECT_EQ(sel.equal_limit, 100);
}

TEST(DgcSelect, SelectsNans) {
  std::vector<float> x = Make(Dist::kNormal, 100000, 8);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  x[99999] = -std::numeric_limits<float>::quiet_NaN();
  DgcThresholdOptions options;
  options.density = 0.001;
  const ThresholdSelection sel = DgcSelect(x.data(), 100000, options, 0, 0);
  std::vector<int32_t> indices(sel.count);
  std::vector<float> values(sel.count);
  ASSERT_EQ(PackSelection(x.data(), 100000, sel, indices.data(), values.data(), sel.count),
            sel.count);
  EXPECT_NE(std::find(indices.begin(), indices.end(), 17), indices.end());
  EXPECT_EQ(indices.back(), 99999);
}

TEST(DgcMomentumCorrection, AccumulatesVelocityIntoResidual) {
  std::vector<float> g = {1.0f, -2.0f, 0.5f}, u = {0.5f, 0.0f, -1.0f}, v = {0.0f, 1.0f, 2.0f};
  DgcMomentumCorrection(g.data(), 3, 0.9f, u.data(), v.data());
  EXPECT_EQ(u, (std::vector<float>{0.9f * 0.5f + 1.0f, -2.0f, 0.9f * -1.0f + 0.5f}));
  EXPECT_EQ(v, (std::vector<float>{0.0f + u[0], 1.0f + u[1], 2.0f + u[2]}));
}

TEST(DgcMaskSelected, ZeroesExactlyTheSelectedPositions) {
  const int64_t n = 100000;
  const std::vector<float> g = Make(Dist::kNormal, n, 9);
  std::vector<float> u(n, 0.0f), v(n, 0.0f);
  DgcMomentumCorrection(g.data(), n, 0.9f, u.data(), v.data());
  DgcMomentumCorrection(g.data(), n, 0.9f, u.data(), v.data());
  const std::vector<float> u_before = u, v_before = v;
  DgcThresholdOptions options;
  options.density = 0.01;
  const ThresholdSelection sel = DgcSelect(v.data(), n, options, 1, 1);
  std::vector<int32_t> indices(sel.count);
  std::vector<float> values(sel.count);
  ASSERT_EQ(PackSelection(v.data(), n, sel, indices.data(), values.data(), sel.count), sel.count);
  DgcMaskSelected(indices.data(), sel.count, u.data(), v.data());
  std::vector<bool> selected(n, false);
  for (int32_t i : indices) selected[i] = true;
  for (int64_t i = 0; i < n; ++i) {
    if (selected[i]) {
      ASSERT_EQ(u[i], 0.0f) << i;
      ASSERT_EQ(v[i], 0.0f) << i;
    } else {
      ASSERT_EQ(std::memcmp(&u[i], &u_before[i], sizeof(float)), 0) << i;
      ASSERT_EQ(std::memcmp(&v[i], &v_before[i], sizeof(float)), 0) << i;
    }
  }
  // What was sent plus what stays is what had accumulated.
  std::vector<float> rebuilt = v;
  ScatterAdd(indices.data(), values.data(), sel.count, rebuilt.data(), n);
  ASSERT_EQ(std::memcmp(rebuilt.data(), v_before.data(), n * sizeof(float)), 0);
  // Without a momentum buffer only v is masked.
  std::vector<float> v2 = v_before;
  DgcMaskSelected(indices.data(), sel.count, nullptr, v2.data());
  EXPECT_EQ(v2, v);
}

TEST(ClipToNorm, ScalesOnlyWhenAboveTheThreshold) {
  std::vector<float> g = {3.0f, 4.0f};  // norm 5
  EXPECT_FLOAT_EQ(ClipToNorm(g.data(), 2, 10.0f), 5.0f);
  EXPECT_EQ(g, (std::vector<float>{3.0f, 4.0f}));
  EXPECT_FLOAT_EQ(ClipToNorm(g.data(), 2, 1.0f), 5.0f);
  EXPECT_NEAR(g[0], 0.6f, 1e-6f);
  EXPECT_NEAR(g[1], 0.8f, 1e-6f);
  EXPECT_NEAR(std::hypot(g[0], g[1]), 1.0f, 1e-6f);

  std::vector<float> big = Make(Dist::kNormal, 100001, 10);
  const float before = ClipToNorm(big.data(), 100001, 1.0f);
  EXPECT_NEAR(before, std::sqrt(100001.0f), 5.0f);
  double sum = 0;
  for (float x : big) sum += static_cast<double>(x) * x;
  EXPECT_NEAR(std::sqrt(sum), 1.0, 1e-5);

  std::vector<float> with_nan = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_TRUE(std::isnan(ClipToNorm(with_nan.data(), 2, 0.5f)));
  EXPECT_EQ(with_nan[0], 1.0f);  // a non-finite norm leaves g alone
}

TEST(DgcLocalClipNorm, ScalesByInverseSquareRootOfWorkers) {
  EXPECT_FLOAT_EQ(DgcLocalClipNorm(2.0f, 4), 1.0f);
  EXPECT_FLOAT_EQ(DgcLocalClipNorm(2.0f, 0), 2.0f);
}

}  // namespace
}  // namespace hptrain::kernels
