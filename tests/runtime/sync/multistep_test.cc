// algorithms.md §3d checks for multistep (the sub-tensor scheduler's checks do not apply: it is
// not implemented).
#include <cmath>
#include <cstring>

#include "gtest/gtest.h"
#include "tests/runtime/sync/strategy_harness.h"

namespace hptrain::sync::testing {
namespace {

bool Identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

job::JobSpec Multistep(int interval) {
  job::JobSpec spec = HarnessJob("multistep");
  spec.strategy.interval = interval;
  return spec;
}

// Momentum 0.9 and weight decay 1e-4 (the harness job): the same all-reduce of the same buckets,
// the same division by B, the same update kernel, so bit for bit.
TEST(Multistep, IntervalOneIsSsgdWithMomentumBitForBit) {
  SimOptions options;
  SimResult ssgd = Simulate(HarnessJob("ssgd"), options);
  ASSERT_TRUE(ssgd.ok) << ssgd.error;
  job::JobSpec adaptive_capped = HarnessJob("multistep");
  adaptive_capped.strategy.h_max = 1;
  job::JobSpec warmup = Multistep(8);
  warmup.strategy.warmup_epochs = 100;
  for (const job::JobSpec& spec : {Multistep(1), adaptive_capped, warmup}) {
    SimResult r = Simulate(spec, options);
    ASSERT_TRUE(r.ok) << r.error;
    for (int rank = 0; rank < options.world; ++rank) {
      EXPECT_TRUE(Identical(r.params[rank], ssgd.params[0]))
          << "interval " << spec.strategy.interval << " hMax " << spec.strategy.h_max
          << " warm-up " << spec.strategy.warmup_epochs << ", rank " << rank;
    }
  }
}

// Several buckets (backward hands the last layers' first), as a model larger than one bucket has.
TEST(Multistep, SeveralBucketsAreSsgdBitForBit) {
  SimOptions options;
  options.bucket_bytes = 16u << 10;  // LeNet-5's tensors in several buckets
  SimResult ssgd = Simulate(HarnessJob("ssgd"), options);
  ASSERT_TRUE(ssgd.ok) << ssgd.error;
  SimResult r = Simulate(Multistep(1), options);
  ASSERT_TRUE(r.ok) << r.error;
  for (int rank = 0; rank < options.world; ++rank) {
    EXPECT_TRUE(Identical(r.params[rank], ssgd.params[0])) << "rank " << rank;
  }
  SimResult rounds = Simulate(Multistep(4), options);
  ASSERT_TRUE(rounds.ok) << rounds.error;
}

TEST(Multistep, RanksAgreeOnTheGlobalModelAfterEveryRound) {
  constexpr int kInterval = 4;
  SimOptions options;
  options.steps = 18;  // the last round is cut short by the final Synchronize
  options.save_state = true;
  std::vector<std::vector<std::vector<float>>> rounds(options.world);
  options.after_step = [&](int rank, int step, const std::vector<float>& params) {
    if ((step + 1) % kInterval == 0) rounds[rank].push_back(params);
  };
  job::JobSpec spec = Multistep(kInterval);
  spec.strategy.mu = 0.01;
  SimResult r = Simulate(spec, options);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(rounds[0].size(), 4u);
  for (int rank = 1; rank < options.world; ++rank) {
    for (size_t k = 0; k < rounds[0].size(); ++k) {
      EXPECT_TRUE(Identical(rounds[0][k], rounds[rank][k])) << "round " << k << " rank " << rank;
    }
    EXPECT_TRUE(Identical(r.params[0], r.params[rank])) << "after the short round, rank " << rank;
    EXPECT_TRUE(Identical(r.sections[0].at("multistep.momentum"),
                          r.sections[rank].at("multistep.momentum")))
        << "global momentum, rank " << rank;
  }
  EXPECT_FALSE(Identical(rounds[0][0], rounds[0][1]));
}

TEST(Multistep, PlainSgdRoundMovesAsFarAsIntervalSsgdSteps) {
  // The harness's gradients do not depend on the model: with plain SGD one global step with the
  // round's summed gradients equals the round's ssgd steps (up to summation order).
  SimOptions options;
  options.steps = 16;
  job::JobSpec spec = Multistep(4);
  spec.optimizer.momentum = 0;
  spec.optimizer.weight_decay = 0;
  job::JobSpec ssgd_spec = HarnessJob("ssgd");
  ssgd_spec.optimizer.momentum = 0;
  ssgd_spec.optimizer.weight_decay = 0;
  SimResult r = Simulate(spec, options);
  SimResult ssgd = Simulate(ssgd_spec, options);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(ssgd.ok) << ssgd.error;
  float worst = 0;
  for (size_t i = 0; i < r.params[0].size(); ++i) {
    worst = std::max(worst, std::fabs(r.params[0][i] - ssgd.params[0][i]));
  }
  EXPECT_LE(worst, 1e-5f);
}

TEST(Multistep, SendsOneAllReducePerRound) {
  SimOptions options;
  options.steps = 24;
  const double p = static_cast<double>(Parameters(options));
  const double ring = 2.0 * 3 / 4 * 4 * p;  // one all-reduce of the parameters, N = 4
  for (int interval : {1, 4, 8}) {
    SimResult r = Simulate(Multistep(interval), options);
    ASSERT_TRUE(r.ok) << r.error;
    const double rounds = static_cast<double>(options.steps) / interval;
    EXPECT_NEAR(r.bytes_sent[0], rounds * ring, 0.01 * rounds * ring) << "interval " << interval;
    // BatchNorm buffers are averaged at the end of every round of local steps (none at H = 1,
    // which is ssgd).
    std::vector<int> ends;
    for (int s = interval - 1; interval > 1 && s < options.steps; s += interval) ends.push_back(s);
    EXPECT_EQ(r.synchronized_steps, ends) << "interval " << interval;
  }
  // Adaptive, 3 epochs of 8 steps at H_0 = 8: 3 rounds, and nothing more for the interval (it
  // reads the epoch loss the trainer already agreed on).
  options.steps_per_epoch = 8;
  options.epoch_timing = [](int) {
    EpochTiming t;
    t.train_loss = 2.0;
    return t;
  };
  SimResult r = Simulate(HarnessJob("multistep"), options);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_GE(r.bytes_sent[0], 3 * ring * 0.99);
  EXPECT_LE(r.bytes_sent[0], 3 * ring * 1.01);
}

SimResult AdaptiveRun(job::JobSpec spec, std::function<double(int epoch)> loss, int epochs) {
  SimOptions options;
  options.tensor_sizes = {100, 10};
  options.steps_per_epoch = 4;
  options.steps = 4 * epochs;
  options.epoch_timing = [loss](int epoch) {
    EpochTiming t;
    t.epoch = epoch;
    t.train_loss = loss(epoch);
    return t;
  };
  return Simulate(spec, options);
}

TEST(Multistep, ConstantLossKeepsTheInitialInterval) {
  job::JobSpec spec = HarnessJob("multistep");
  spec.strategy.adaptive_interval = true;
  spec.strategy.warmup_epochs = 1;
  SimResult r = AdaptiveRun(spec, [](int) { return 2.3; }, 6);
  ASSERT_TRUE(r.ok) << r.error;
  // Epoch 0 is warm-up (SSGD, interval 1) and gives F_0; then H_0 = 8 throughout.
  EXPECT_EQ(r.intervals, (std::vector<int>{1, 8, 8, 8, 8, 8}));
}

TEST(Multistep, IntervalFollowsTheLossWithinItsBounds) {
  job::JobSpec spec = HarnessJob("multistep");
  spec.strategy.h_min = 2;
  spec.strategy.h_max = 12;
  // Falling loss: sqrt(F/F_0) shrinks, so does H, never below hMin.
  SimResult falling = AdaptiveRun(spec, [](int e) { return 2.0 * std::pow(0.3, e); }, 30);
  ASSERT_TRUE(falling.ok) << falling.error;
  for (int h : falling.intervals) {
    EXPECT_GE(h, 2);
    EXPECT_LE(h, 12);
  }
  EXPECT_EQ(falling.intervals.front(), 8);
  EXPECT_EQ(falling.intervals.back(), 2);
  for (size_t k = 1; k < falling.intervals.size(); ++k) {
    EXPECT_LE(falling.intervals[k], falling.intervals[k - 1]);
  }
  // Rising loss: H grows, never above hMax.
  SimResult rising = AdaptiveRun(spec, [](int e) { return 1.0 + e; }, 30);
  ASSERT_TRUE(rising.ok) << rising.error;
  for (int h : rising.intervals) EXPECT_LE(h, 12);
  EXPECT_EQ(rising.intervals.back(), 12);
  // H_0 outside the bounds is clamped.
  spec.strategy.h_max = 4;
  SimResult capped = AdaptiveRun(spec, [](int) { return 1.0; }, 3);
  ASSERT_TRUE(capped.ok) << capped.error;
  EXPECT_EQ(capped.intervals, (std::vector<int>{4, 4, 4}));
}

TEST(Multistep, RejectsAdam) {
  job::JobSpec spec = Multistep(4);
  spec.optimizer.type = "adam";
  SimResult r = Simulate(spec, SimOptions());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("spec.optimizer.type"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace hptrain::sync::testing
