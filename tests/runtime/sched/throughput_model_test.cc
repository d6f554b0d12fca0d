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

TEST(ThroughputModel, CloseSizesGiveAProportionalModelNotANoiseFittedFixedCost) {
  // A worker taking 1.2 ms per sample, measured with about 10 % noise at sizes within 1.5x of
  // each other: least squares would say 75 ms fixed + 0.38 ms per sample.
  ThroughputModel m;
  m.Observe(64, 0.101);
  m.Observe(83, 0.100);
  m.Observe(90, 0.118);
  m.Observe(96, 0.110);
  EXPECT_EQ(m.fixed_seconds(), 0.0);
  EXPECT_NEAR(m.per_sample_seconds(), (0.101 + 0.100 + 0.118 + 0.110) / (64 + 83 + 90 + 96), 1e-12);
  // A size twice the smallest of those kept (the last four: 83 to 96) brings the fixed cost in.
  m.Observe(192, 0.200);
  EXPECT_GT(m.fixed_seconds(), 0.0);
}

TEST(ThroughputModel, OnlyTheSizesMeasuredMostRecentlyTakePart) {
  ModelOptions options;
  options.max_sizes = 2;
  ThroughputModel m(options);
  m.Observe(16, 0.080);  // measured long ago, under other conditions
  m.Observe(64, 0.074);
  m.Observe(32, 0.042);  // 10 ms fixed + 1 ms per sample: 16 is forgotten
  EXPECT_NEAR(m.fixed_seconds(), 0.010, 1e-9);
  EXPECT_NEAR(m.per_sample_seconds(), 0.001, 1e-9);
  m.Observe(64, 0.074);  // measuring a size again makes it recent: 32 goes next, not 64
  m.Observe(128, 0.134);
  EXPECT_NEAR(m.per_sample_seconds(), (0.134 - 0.074) / 64, 1e-9);
}

TEST(ThroughputModel, AnchoredItPassesThroughTheSizeMeasuredLastKeepingTheFittedShape) {
  ModelOptions options;
  options.anchor_latest = true;
  ThroughputModel m(options);
  m.Observe(16, 0.026);
  m.Observe(64, 0.074);
  m.Observe(128, 0.150);  // off the line through the first two: the fit misses all three
  EXPECT_NEAR(m.Seconds(128), 0.150, 1e-12);
  // Scaled as a whole: fixed / per-sample as least squares over the three sizes gave it.
  const double slope = (3 * (16 * 0.026 + 64 * 0.074 + 128 * 0.150) - 208 * 0.250) /
                       (3 * (16.0 * 16 + 64 * 64 + 128 * 128) - 208.0 * 208);
  const double fixed = (0.250 - slope * 208) / 3;
  EXPECT_NEAR(m.fixed_seconds() / m.per_sample_seconds(), fixed / slope, 1e-9);
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

TEST(ThroughputModel, WithDriftAMeanFarFromTheModelRescalesEverySize) {
  ModelOptions options;
  options.drift_factor = 1.25;
  ThroughputModel m(options);
  // 10 ms fixed + 1 ms per sample, measured at two sizes.
  m.Observe(16, 0.026);
  m.Observe(64, 0.074);
  m.Observe(64, 0.080);  // within 25 %: averaged (alpha 0.3)
  EXPECT_NEAR(m.Seconds(64), 0.7 * 0.074 + 0.3 * 0.080, 1e-12);
  // The worker became twice as slow; one mean at a size it ran is enough to follow.
  ThroughputModel slowed(options);
  slowed.Observe(16, 0.026);
  slowed.Observe(64, 0.074);
  slowed.Observe(64, 0.148);
  EXPECT_NEAR(slowed.Seconds(64), 0.148, 1e-9);
  EXPECT_NEAR(slowed.Seconds(16), 0.052, 1e-9);
  EXPECT_NEAR(slowed.fixed_seconds(), 0.020, 1e-9);
  // A size never run is taken as it is, not judged by the extrapolation.
  ThroughputModel fixed_cost(options);
  fixed_cost.Observe(64, 0.074);
  fixed_cost.Observe(4, 0.014);  // proportional extrapolation says 0.0046
  EXPECT_NEAR(fixed_cost.Seconds(64), 0.074, 1e-9);
  EXPECT_NEAR(fixed_cost.fixed_seconds(), 0.010, 1e-9);
}

TEST(ThroughputModel, WithNeighboursANewSizeCloseToAMeasuredOneIsJudgedByTheModel) {
  ModelOptions options;
  options.ewma_alpha = 0.3;
  options.drift_factor = 1.5;
  options.neighbour_ratio = 1.3;
  options.anchor_latest = true;
  ThroughputModel m(options);
  m.Observe(89, 0.1335);  // 1.5 ms per sample
  // 77 samples, 20 % slower than the model says there: averaged in, not taken whole.
  const double predicted = 77 * 0.0015;
  m.Observe(77, 1.2 * predicted);
  EXPECT_NEAR(m.Seconds(77), 0.7 * predicted + 0.3 * 1.2 * predicted, 1e-12);
  // Twice as slow at a close size: a change of speed, every size follows.
  ThroughputModel slowed(options);
  slowed.Observe(89, 0.1335);
  slowed.Observe(100, 2 * 0.150);
  EXPECT_NEAR(slowed.Seconds(100), 0.300, 1e-9);
  EXPECT_NEAR(slowed.Seconds(89), 0.267, 1e-9);
  // A size far from every measured one is taken as it is (its fixed cost is unknown).
  ThroughputModel far(options);
  far.Observe(89, 0.1335);
  far.Observe(21, 0.060);
  EXPECT_NEAR(far.Seconds(21), 0.060, 1e-9);
  // Without neighbour_ratio a new size is never judged.
  options.neighbour_ratio = 0;
  ThroughputModel off(options);
  off.Observe(89, 0.1335);
  off.Observe(77, 1.2 * predicted);
  EXPECT_NEAR(off.Seconds(77), 1.2 * predicted, 1e-9);
}

TEST(ThroughputModel, TheMeasurementAfterAChangeOfSpeedIsTakenWholeToo) {
  ModelOptions options;
  options.ewma_alpha = 0.3;
  options.drift_factor = 1.5;
  ThroughputModel m(options);
  // 10 ms fixed + 1 ms per sample at two sizes.
  m.Observe(16, 0.026);
  m.Observe(64, 0.074);
  // The worker became 4 times as slow during an interval whose median caught 3 times: followed.
  m.Observe(64, 3 * 0.074);
  EXPECT_NEAR(m.Seconds(16), 3 * 0.026, 1e-9);
  // The next interval shows the rest: taken whole although it is within 50 %, at every size.
  m.Observe(64, 4 * 0.074);
  EXPECT_NEAR(m.Seconds(64), 4 * 0.074, 1e-9);
  EXPECT_NEAR(m.Seconds(16), 4 * 0.026, 1e-9);
  // From then on, a small difference is averaged in again.
  m.Observe(64, 1.1 * 4 * 0.074);
  EXPECT_NEAR(m.Seconds(64), (0.7 + 0.3 * 1.1) * 4 * 0.074, 1e-9);
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
