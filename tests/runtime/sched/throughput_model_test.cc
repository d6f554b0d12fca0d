// The per-worker time-against-batch model the balancer relies on.
#include "runtime/sched/throughput_model.h"

#include "gtest/gtest.h"

namespace hptrain::sched {
namespace {

TEST(ThroughputModel, ProportionalFromOneSizeAffineFromSeveral) {
  ThroughputModel m;
  EXPECT_TRUE(m.empty());
  m.Observe(32, 0.064);
  EXPECT_DOUBLE_EQ(m.Seconds(64), 0.128);
  // GPU-like: 10 ms fixed + 1 ms per sample, measured at two sizes.
  ThroughputModel gpu;
  gpu.Observe(16, 0.026);
  gpu.Observe(64, 0.074);
  EXPECT_NEAR(gpu.fixed_seconds(), 0.010, 1e-9);
  EXPECT_NEAR(gpu.per_sample_seconds(), 0.001, 1e-9);
  EXPECT_NEAR(gpu.SamplesPerSecond(40), 40 / 0.050, 1e-6);
}

TEST(ThroughputModel, OneSlowStepIsAnOutlierARunOfThemIsANewSpeed) {
  ThroughputModel m;
  for (int i = 0; i < 5; ++i) m.Observe(32, 0.032);
  EXPECT_FALSE(m.Observe(32, 0.5));  // a pause
  EXPECT_NEAR(m.Seconds(32), 0.032, 1e-12);
  EXPECT_TRUE(m.Observe(32, 0.032));
  // The worker really became 4x slower: after outlier_run measurements the model follows.
  EXPECT_FALSE(m.Observe(32, 0.128));
  EXPECT_FALSE(m.Observe(32, 0.128));
  EXPECT_TRUE(m.Observe(32, 0.128));
  EXPECT_NEAR(m.Seconds(32), 0.128, 1e-12);
}

TEST(ThroughputModel, ASmallerChangeOfSpeedDropsTheSizesMeasuredBeforeIt) {
  // 1 ms per sample at sizes 64 and 48; then the worker becomes 2x faster (within the outlier
  // factor) while it stays at 48.
  ThroughputModel m;
  for (int i = 0; i < 5; ++i) m.Observe(64, 0.064);
  for (int i = 0; i < 5; ++i) m.Observe(48, 0.048);
  EXPECT_NEAR(m.Seconds(64), 0.064, 1e-9);
  for (int i = 0; i < 12; ++i) EXPECT_TRUE(m.Observe(48, 0.024));
  // Size 64's old average is gone: 64 is predicted from the new speed, not from the old one.
  EXPECT_NEAR(m.Seconds(64), 0.032, 0.002);
  EXPECT_NEAR(m.Seconds(48), 0.024, 0.002);
}

TEST(ThroughputModel, NoiseAndAFixedCostAreNotDrift) {
  // GPU-like (10 ms fixed + 1 ms/sample) measured at three sizes with +-10 % noise: every size
  // stays in the model.
  ThroughputModel m;
  const int sizes[] = {16, 40, 64};
  for (int i = 0; i < 60; ++i) {
    const int b = sizes[i % 3];
    const double noise = (i % 5 - 2) * 0.05;  // -10 % .. +10 %
    m.Observe(b, (0.010 + 0.001 * b) * (1 + noise));
  }
  EXPECT_NEAR(m.fixed_seconds(), 0.010, 0.003);
  EXPECT_NEAR(m.per_sample_seconds(), 0.001, 0.0001);
}

TEST(ThroughputModel, IgnoresMeaninglessMeasurements) {
  ThroughputModel m;
  m.Observe(0, 1.0);
  m.Observe(8, 0.0);
  m.Observe(8, -1.0);
  EXPECT_TRUE(m.empty());
}

}  // namespace
}  // namespace hptrain::sched
