#include <cmath>
#include <cstring>

#include "gtest/gtest.h"
#include "tests/runtime/sync/strategy_harness.h"

namespace hptrain::sync::testing {
namespace {

// Parameters are averaged where ssgd sums gradients, and gradients are scaled by B / b_i and back:
// equal up to float rounding, not bit for bit.
void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  EXPECT_LE(worst, tolerance);
}

job::JobSpec PlainSgd(const std::string& strategy) {
  job::JobSpec spec = HarnessJob(strategy);
  spec.optimizer.momentum = 0;
  spec.optimizer.weight_decay = 0;
  return spec;
}

TEST(LocalSgd, IntervalOneWithPlainSgdIsSsgd) {
  SimOptions options;
  job::JobSpec spec = PlainSgd("localsgd");
  spec.strategy.Set("interval", 1);
  SimResult local = Simulate(spec, options);
  SimResult ssgd = Simulate(PlainSgd("ssgd"), options);
  ASSERT_TRUE(local.ok) << local.error;
  ASSERT_TRUE(ssgd.ok) << ssgd.error;
  for (int rank = 0; rank < options.world; ++rank) {
    ExpectNear(local.params[rank], ssgd.params[0], 1e-5f);
    ASSERT_EQ(std::memcmp(local.params[0].data(), local.params[rank].data(),
                          4 * local.params[0].size()),
              0);
  }
}

TEST(LocalSgd, IntervalOneWithMomentumAndWeightDecayIsSsgd) {
  // Momentum and weight decay are linear: the weighted mean of the local momenta is ssgd's.
  SimOptions options;
  job::JobSpec spec = HarnessJob("localsgd");
  spec.strategy.Set("interval", 1);
  SimResult local = Simulate(spec, options);
  SimResult ssgd = Simulate(HarnessJob("ssgd"), options);
  ASSERT_TRUE(local.ok) << local.error;
  ASSERT_TRUE(ssgd.ok) << ssgd.error;
  ExpectNear(local.params[0], ssgd.params[0], 1e-5f);
}

TEST(LocalSgd, UnequalBatchesAreWeightedLikeSsgd) {
  SimOptions options;
  options.local_batches = {8, 16, 24, 16};
  job::JobSpec spec = PlainSgd("localsgd");
  spec.strategy.Set("interval", 1);
  SimResult local = Simulate(spec, options);
  SimResult ssgd = Simulate(PlainSgd("ssgd"), options);
  ASSERT_TRUE(local.ok) << local.error;
  ASSERT_TRUE(ssgd.ok) << ssgd.error;
  ExpectNear(local.params[0], ssgd.params[0], 1e-5f);
}

TEST(LocalSgd, LongerIntervalAveragesEveryIntervalSteps) {
  // The harness's gradients do not depend on the model, so with plain SGD H local steps then
  // the weighted average land where H ssgd steps do; the ranks agree after every average.
  SimOptions options;
  options.steps = 20;
  std::vector<std::vector<float>> at_average(options.world);
  options.after_step = [&](int rank, int step, const std::vector<float>& params) {
    if (step == 11) at_average[rank] = params;
  };
  job::JobSpec spec = PlainSgd("localsgd");
  spec.strategy.Set("interval", 4);
  SimResult local = Simulate(spec, options);
  ASSERT_TRUE(local.ok) << local.error;
  for (int rank = 1; rank < options.world; ++rank) {
    ASSERT_EQ(std::memcmp(at_average[0].data(), at_average[rank].data(),
                          4 * at_average[0].size()),
              0);
  }
  SimResult ssgd = Simulate(PlainSgd("ssgd"), options);
  ASSERT_TRUE(ssgd.ok) << ssgd.error;
  ExpectNear(local.params[0], ssgd.params[0], 1e-5f);
  // The trainer averages BatchNorm buffers after exactly the averaging steps.
  EXPECT_EQ(local.synchronized_steps, (std::vector<int>{3, 7, 11, 15, 19}));
  // 20 steps at interval 4: 5 all-reduces of the parameters.
  const double p = static_cast<double>(Parameters(options));
  EXPECT_NEAR(local.bytes_sent[0], 5 * 2.0 * 3 / 4 * 4 * p, 0.01 * 5 * 6 * p);
}

TEST(LocalSgd, ReportsItsInterval) {
  SimOptions options;
  options.steps = 8;
  options.steps_per_epoch = 4;
  job::JobSpec spec = HarnessJob("localsgd");
  SimResult r = Simulate(spec, options);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.intervals, (std::vector<int>{8, 8}));
}

}  // namespace
}  // namespace hptrain::sync::testing
