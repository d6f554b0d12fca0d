// Balancer properties, randomized (fixed seeds): the allocation always sums to B and respects
// the bounds, equal speeds split equally, faster workers never get less, noise does not make it
// flap, and a leaving worker's share is redistributed.
#include "runtime/sched/balancer.h"

#include <numeric>
#include <random>

#include "gtest/gtest.h"

namespace hptrain::sched {
namespace {

std::vector<std::string> Names(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back("worker-" + std::to_string(i));
  return names;
}

int Sum(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0); }

// Two workers a and b at 50/50 of a global batch of 100. Each observation sets the model (alpha
// 1), so a round's numbers are exactly what the test says.
BalancerOptions TwoWorkerOptions() {
  BalancerOptions o;
  o.global_batch = 100;
  o.model.ewma_alpha = 1.0;
  return o;
}

// One decision round: a and b took these times at 50 samples; whether the balancer moves.
bool TwoWorkerRound(Balancer& b, double a_seconds, double b_seconds) {
  b.Observe("a", 50, a_seconds);
  b.Observe("b", 50, b_seconds);
  auto next = b.Propose({"a", "b"}, {50, 50});
  EXPECT_TRUE(next.ok());
  return next.ok() && next->has_value();
}

TEST(Balancer, RandomizedSumAndBoundsAndMonotoneInSpeed) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 8);
    BalancerOptions o;
    o.min_batch = static_cast<int>(rng() % 9);
    o.global_batch = n * o.min_batch + static_cast<int>(rng() % 600);
    o.max_batch = rng() % 3 == 0 ? 0 : o.global_batch / n + 1 + static_cast<int>(rng() % 100);
    if (o.max_batch > 0 && o.max_batch * n < o.global_batch) o.max_batch = 0;
    Balancer b(o);
    const auto names = Names(n);
    std::vector<double> per_sample(n);
    for (int i = 0; i < n; ++i) {
      per_sample[i] = std::uniform_real_distribution<double>(0.1e-3, 5e-3)(rng);
      b.Observe(names[i], 32, 32 * per_sample[i]);
    }
    auto alloc = b.Optimal(names);
    ASSERT_TRUE(alloc.ok()) << alloc.status();
    ASSERT_EQ(Sum(*alloc), o.global_batch);
    for (int i = 0; i < n; ++i) {
      EXPECT_GE((*alloc)[i], o.min_batch);
      if (o.max_batch > 0) EXPECT_LE((*alloc)[i], o.max_batch);
    }
    // Monotone: a strictly faster worker never gets fewer samples.
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (per_sample[i] < per_sample[j]) EXPECT_GE((*alloc)[i], (*alloc)[j]) << trial;
      }
    }
  }
}

TEST(Balancer, EqualSpeedsSplitEquallyAndUnmeasuredWorkersToo) {
  BalancerOptions o;
  o.global_batch = 130;
  Balancer b(o);
  const auto names = Names(4);
  auto none = b.Optimal(names);  // nothing measured yet
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, (std::vector<int>{33, 33, 32, 32}));
  for (const auto& w : names) b.Observe(w, 32, 0.064);
  EXPECT_EQ(*b.Optimal(names), (std::vector<int>{33, 33, 32, 32}));
}

TEST(Balancer, SpeedsOneOneHalfQuarterGetProportionalShares) {
  BalancerOptions o;
  o.global_batch = 128;
  Balancer b(o);
  const auto names = Names(4);
  const double slowdown[] = {1, 1, 2, 4};
  for (int i = 0; i < 4; ++i) b.Observe(names[i], 32, 0.032 * slowdown[i]);
  // Speeds 1 : 1 : 0.5 : 0.25 of 2.75 -> 46.5, 46.5, 23.3, 11.6.
  auto alloc = b.Optimal(names);
  ASSERT_TRUE(alloc.ok());
  EXPECT_EQ(Sum(*alloc), 128);
  EXPECT_NEAR((*alloc)[0], 46.5, 1.0);
  EXPECT_NEAR((*alloc)[2], 23.3, 1.0);
  EXPECT_NEAR((*alloc)[3], 11.6, 1.0);
  // Predicted step time falls from 4 x 32 ms to about 46.5 ms.
  EXPECT_LT(b.PredictedStepSeconds(names, *alloc), 0.05);
  EXPECT_NEAR(b.PredictedStepSeconds(names, {32, 32, 32, 32}), 0.128, 1e-9);
}

TEST(Balancer, AffineModelsGiveSlowFixedCostWorkersLess) {
  BalancerOptions o;
  o.global_batch = 100;
  Balancer b(o);
  // Worker 0: 20 ms fixed + 0.5 ms/sample; worker 1: 1 ms/sample, no fixed cost.
  b.Observe("a", 10, 0.025);
  b.Observe("a", 40, 0.040);
  b.Observe("b", 10, 0.010);
  b.Observe("b", 40, 0.040);
  auto alloc = b.Optimal({"a", "b"});
  ASSERT_TRUE(alloc.ok());
  // Equal finish: 0.02 + 0.0005 x = 0.001 (100 - x) -> x = 53.3.
  EXPECT_NEAR((*alloc)[0], 53.3, 1.0);
}

TEST(Balancer, NoiseDoesNotMakeItFlap) {
  const double per_sample[] = {1e-3, 1e-3, 2e-3, 4e-3};
  const auto names = Names(4);
  for (unsigned seed = 0; seed < 20; ++seed) {
    BalancerOptions o;
    o.global_batch = 128;
    Balancer b(o);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> noise(0.9, 1.1);
    std::vector<int> current(4, 32);
    int changes_after_convergence = 0;
    for (int round = 0; round < 1000; ++round) {
      for (int i = 0; i < 4; ++i) {
        b.Observe(names[i], current[i], current[i] * per_sample[i] * noise(rng));
      }
      auto next = b.Propose(names, current);
      ASSERT_TRUE(next.ok());
      if (next->has_value()) {
        current = **next;
        if (round >= 10) ++changes_after_convergence;
      }
      ASSERT_EQ(Sum(current), 128);
    }
    EXPECT_LE(changes_after_convergence, 2) << "seed " << seed;
    EXPECT_NEAR(current[3], 11.6, 2.0) << "seed " << seed;
  }
}

TEST(Balancer, ALeavingWorkersShareIsRedistributedAndAJoiningOneGetsOne) {
  BalancerOptions o;
  o.global_batch = 120;
  Balancer b(o);
  auto names = Names(3);
  for (const auto& w : names) b.Observe(w, 40, 0.04);
  std::vector<int> current = {40, 40, 40};
  b.Forget(names[2]);
  names.pop_back();
  auto next = b.Propose(names, current);  // another length: always replaced
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ(**next, (std::vector<int>{60, 60}));
  names.push_back("newcomer");  // unmeasured: as fast as the median
  auto joined = b.Propose(names, **next);
  ASSERT_TRUE(joined.ok());
  ASSERT_TRUE(joined->has_value());
  EXPECT_EQ(**joined, (std::vector<int>{40, 40, 40}));
}

TEST(Balancer, HysteresisKeepsANearlyBalancedAllocation) {
  BalancerOptions o;
  o.global_batch = 100;
  Balancer b(o);
  b.Observe("a", 50, 0.050);
  b.Observe("b", 50, 0.052);  // 4 % slower: not worth a switch at 5 % hysteresis
  auto keep = b.Propose({"a", "b"}, {50, 50});
  ASSERT_TRUE(keep.ok());
  EXPECT_FALSE(keep->has_value());
  o.hysteresis = 0.0;
  Balancer eager(o);
  eager.Observe("a", 50, 0.050);
  eager.Observe("b", 50, 0.052);
  auto change = eager.Propose({"a", "b"}, {50, 50});
  ASSERT_TRUE(change.ok());
  EXPECT_TRUE(change->has_value());
}

// Worker b 8 % slower than a at 50/50: moving two samples to a gains 3.7 %, below the 5 %
// hysteresis but above 60 % of it.
TEST(Balancer, ASmallGainIsAppliedOnlyWhenItPersistsFromTheSameWorkers) {
  BalancerOptions o = TwoWorkerOptions();
  const std::vector<std::string> names = {"a", "b"};
  const std::vector<int> even = {50, 50};
  Balancer persistent(o);
  for (int r = 1; r < o.persistent_rounds; ++r) {
    EXPECT_FALSE(TwoWorkerRound(persistent, 0.050, 0.054)) << "round " << r;
  }
  ASSERT_TRUE(TwoWorkerRound(persistent, 0.050, 0.054));
  auto moved = persistent.Propose(names, even);  // the streak starts over after a change
  ASSERT_TRUE(moved.ok());
  EXPECT_FALSE(moved->has_value());
  EXPECT_EQ(*persistent.Optimal(names), (std::vector<int>{52, 48}));

  // The same gain with the bottleneck alternating, as noise does, is never applied.
  Balancer alternating(o);
  for (int r = 0; r < 4 * o.persistent_rounds; ++r) {
    EXPECT_FALSE(r % 2 ? TwoWorkerRound(alternating, 0.050, 0.054)
                       : TwoWorkerRound(alternating, 0.054, 0.050))
        << "round " << r;
  }

  // Two workers equally slow, with noise choosing which of them is the slower in each round:
  // the proposal keeps taking samples from both, so the gain persists and is applied.
  BalancerOptions three = o;
  three.global_batch = 300;
  Balancer tied(three);
  const std::vector<std::string> abc = {"a", "b", "c"};
  const std::vector<int> thirds = {100, 100, 100};
  bool applied = false;
  for (int r = 0; r < three.persistent_rounds && !applied; ++r) {
    tied.Observe("a", 100, 0.1119);
    tied.Observe("b", 100, r % 2 ? 0.1120 : 0.1118);
    tied.Observe("c", 100, 0.1000);
    auto next = tied.Propose(abc, thirds);
    ASSERT_TRUE(next.ok());
    applied = next->has_value();
    EXPECT_EQ(applied, r == three.persistent_rounds - 1) << "round " << r;
  }
  EXPECT_TRUE(applied);

  // A round with a gain below the threshold breaks the streak.
  Balancer interrupted(o);
  for (int r = 0; r < 2 * o.persistent_rounds; ++r) {
    const bool small = r % o.persistent_rounds == o.persistent_rounds - 1;
    EXPECT_FALSE(TwoWorkerRound(interrupted, 0.050, small ? 0.051 : 0.054)) << "round " << r;
  }

  o.persistent_rounds = 0;  // off: only the hysteresis counts
  Balancer off(o);
  for (int r = 0; r < 4 * 4; ++r) EXPECT_FALSE(TwoWorkerRound(off, 0.050, 0.054)) << "round " << r;
}

TEST(Balancer, AGainUpToTwiceTheHysteresisIsAppliedWhenTheNextRoundConfirmsIt) {
  BalancerOptions o = TwoWorkerOptions();
  // b 16 % slower: equal times at 51.8/48.2 samples, a predicted gain of 7.4 %.
  Balancer confirmed(o);
  EXPECT_FALSE(TwoWorkerRound(confirmed, 0.050, 0.058));
  EXPECT_TRUE(TwoWorkerRound(confirmed, 0.050, 0.058));

  // Noise proposing the same gain in alternating directions never moves the allocation.
  Balancer alternating(o);
  for (int r = 0; r < 8; ++r) {
    EXPECT_FALSE(r % 2 ? TwoWorkerRound(alternating, 0.050, 0.058)
                       : TwoWorkerRound(alternating, 0.058, 0.050))
        << "round " << r;
  }

  // A round with a smaller gain in the same direction confirms it too.
  Balancer smaller_first(o);
  EXPECT_FALSE(TwoWorkerRound(smaller_first, 0.050, 0.054));
  EXPECT_TRUE(TwoWorkerRound(smaller_first, 0.050, 0.058));

  // Beyond twice the hysteresis (b 40 % slower: a gain of 16.7 %) it is applied at once.
  Balancer large(o);
  EXPECT_TRUE(TwoWorkerRound(large, 0.050, 0.070));

  o.confirm_factor = 1;  // off: every gain above the hysteresis at once
  Balancer off(o);
  EXPECT_TRUE(TwoWorkerRound(off, 0.050, 0.058));
}

TEST(Balancer, PerWorkerMemoryLimitAndInfeasibleBounds) {
  BalancerOptions o;
  o.global_batch = 100;
  Balancer b(o);
  b.Observe("fast", 50, 0.010);
  b.Observe("slow", 50, 0.100);
  b.SetMaxBatch("fast", 60);
  auto alloc = b.Optimal({"fast", "slow"});
  ASSERT_TRUE(alloc.ok());
  EXPECT_EQ(*alloc, (std::vector<int>{60, 40}));
  o.min_batch = 60;
  Balancer tight(o);
  auto bad = tight.Optimal({"a", "b"});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cannot be split over 2 workers"), std::string::npos);
  EXPECT_FALSE(tight.Optimal({}).ok());
}

TEST(RoundLargestRemainder, SumsExactlyWithinBounds) {
  EXPECT_EQ(RoundLargestRemainder({1.5, 1.5, 1.0}, 4, {0, 0, 0}, {4, 4, 4}),
            (std::vector<int>{2, 1, 1}));
  EXPECT_EQ(RoundLargestRemainder({0.2, 0.2, 3.6}, 4, {1, 1, 0}, {4, 4, 2}),
            (std::vector<int>{1, 1, 2}));
}

}  // namespace
}  // namespace hptrain::sched
