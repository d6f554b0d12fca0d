// The launcher's H-PS loop against a simulated synchronous job: four workers with an affine
// compute time per step (fixed cost + per-sample cost) times their slowdown factor, 10 % noise on
// every step (and, in two tests, a drift of each worker's speed), progress snapshots once a step,
// an allocation applied two steps after it is proposed (the coordinator's lead). The loop must
// settle near the allocation that equalizes the workers' times, stay there, and follow a change
// of slowdowns within three intervals.
#include "runtime/job/local_rebalancer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace hptrain::job {
namespace {

constexpr double kFixed = 0.004;      // seconds per step
constexpr double kPerSample = 0.001;  // seconds per sample
constexpr int kBatch = 256;
constexpr double kInterval = 3.0;

JobSpec RebalancedJob() {
  JobSpec spec;
  spec.global_batch_size = kBatch;
  WorkerGroupSpec group;
  group.name = "cpu";
  group.replicas = 4;
  spec.worker_groups.push_back(group);
  spec.rebalance.enabled = true;
  spec.rebalance.interval_seconds = kInterval;
  return spec;
}

// The real-valued allocation that gives every worker the same step time:
// f_i (a + c b_i) = T for all i, Σ b_i = B.
std::vector<double> Ideal(const std::vector<double>& slowdown) {
  double inverse = 0;
  for (double f : slowdown) inverse += 1 / f;
  const double t = (kBatch * kPerSample + slowdown.size() * kFixed) / inverse;
  std::vector<double> b;
  for (double f : slowdown) b.push_back((t / f - kFixed) / kPerSample);
  return b;
}

// L1 distance from the ideal as a fraction of the global batch.
double Distance(const std::vector<int>& allocation, const std::vector<double>& ideal) {
  double d = 0;
  for (size_t i = 0; i < ideal.size(); ++i) d += std::abs(allocation[i] - ideal[i]);
  return d / kBatch;
}

// The index of the decision from which every decision stays within 10 % of `target`; -1 if the
// last one is not.
int SettledFrom(const std::vector<std::vector<int>>& decisions, const std::vector<double>& target) {
  int first_near = -1;
  for (size_t i = 0; i < decisions.size(); ++i) {
    if (Distance(decisions[i], target) < 0.10) {
      if (first_near < 0) first_near = static_cast<int>(i);
    } else {
      first_near = -1;  // must stay near from then on
    }
  }
  return first_near;
}

struct Simulation {
  LocalRebalancer rebalancer{RebalancedJob()};
  std::vector<int> allocation{64, 64, 64, 64};
  std::vector<double> compute{0, 0, 0, 0};
  std::deque<std::pair<int64_t, std::vector<int>>> pending;  // (step it applies at, allocation)
  double fixed = kFixed;                                     // seconds per step (at slowdown 1)
  std::mt19937 rng{7};
  std::uniform_real_distribution<double> noise{0.9, 1.1};
  // Optional drift of every worker's speed on top of the per-step noise: its logarithm is an
  // AR(1) process updated every half second, with stationary standard deviation drift_sigma.
  double drift_sigma = 0;
  std::vector<double> drift{0, 0, 0, 0};
  double next_drift = 0;
  std::normal_distribution<double> normal{0, 1};
  // Optional episodes: at each drift update a worker not in one starts, with this chance, to run
  // 30 % slower for 3 s.
  double episode_chance = 0;
  std::vector<int> episode_left{0, 0, 0, 0};  // drift updates to go
  std::uniform_real_distribution<double> uniform{0, 1};
  int64_t step = 0;
  double clock = 0;

  // Runs until `until` seconds of simulated time; returns the allocation at each decision time.
  std::vector<std::vector<int>> RunUntil(double until, const std::vector<double>& slowdown) {
    std::vector<std::vector<int>> decisions;
    double next_decision = std::ceil(clock / kInterval) * kInterval;
    while (clock < until) {
      while (!pending.empty() && pending.front().first <= step) {
        allocation = pending.front().second;
        pending.pop_front();
      }
      if (drift_sigma > 0 && clock >= next_drift) {
        for (double& d : drift) d = 0.8 * d + 0.6 * drift_sigma * normal(rng);
        next_drift += 0.5;
        for (int& left : episode_left) {
          if (left > 0) {
            --left;
          } else if (episode_chance > 0 && uniform(rng) < episode_chance) {
            left = 6;
          }
        }
      }
      double slowest = 0;
      for (size_t r = 0; r < 4; ++r) {
        const double t = slowdown[r] * (fixed + kPerSample * allocation[r]) * noise(rng) *
                         std::exp(drift[r]) * (episode_left[r] > 0 ? 1.3 : 1.0);
        compute[r] += t;
        slowest = std::max(slowest, t);
      }
      clock += slowest + 0.002;  // everyone waits for the slowest, then the exchange
      ++step;
      std::vector<RankProgress> progress;
      for (int r = 0; r < 4; ++r) progress.push_back({r, step, allocation[r], compute[r]});
      if (auto next = rebalancer.Update(progress, clock)) pending.emplace_back(step + 2, *next);
      if (clock >= next_decision) {
        decisions.push_back(allocation);
        next_decision += kInterval;
      }
    }
    return decisions;
  }
};

TEST(LocalRebalancer, SettlesNearTheIdealStaysAndFollowsAChangeWithinThreeIntervals) {
  Simulation sim;
  const std::vector<double> before = {1, 1, 2, 4}, after = {4, 1, 1, 2};
  // 20 intervals with slowdowns (1, 1, 2, 4).
  std::vector<std::vector<int>> decisions = sim.RunUntil(20 * kInterval, before);
  ASSERT_FALSE(decisions.empty());
  const std::vector<int> settled = decisions.back();
  EXPECT_LT(Distance(settled, Ideal(before)), 0.10)
      << settled[0] << "," << settled[1] << "," << settled[2] << "," << settled[3];
  // Once settled it stays: the last 10 intervals see at most 2 changes.
  int changes = 0;
  for (size_t i = decisions.size() - 10; i < decisions.size(); ++i) {
    changes += decisions[i] != decisions[i - 1];
  }
  EXPECT_LE(changes, 2);

  // The slowdowns change mid-interval; count intervals until within 10 % of the new ideal.
  sim.RunUntil(sim.clock + kInterval / 2, before);
  const double changed_at = sim.clock;
  decisions = sim.RunUntil(changed_at + 20 * kInterval, after);
  const int first_near = SettledFrom(decisions, Ideal(after));
  ASSERT_GE(first_near, 0) << "never settled near the new ideal";
  // decisions[i] is the allocation i+1 interval boundaries after the change (up to half an
  // interval of the change itself).
  std::cout << "settled after " << first_near + 1 << " intervals\n";
  EXPECT_LE(first_near + 1, 3) << "settled " << first_near + 1 << " intervals after the change";
}

// Runs the change of slowdowns under drifting speeds for seeds 1..runs: how many runs came within
// 10 % of where they end within 3 intervals of it and stayed there, and the moves per run after it.
struct Following {
  int within_three = 0;
  double moves_per_run = 0;
};
Following FollowAChange(double drift_sigma, double episode_chance, double fixed, int runs) {
  const std::vector<double> before = {1, 1, 2, 4}, after = {4, 1, 1, 2};
  Following out;
  int moves = 0;
  for (int seed = 1; seed <= runs; ++seed) {
    Simulation sim;
    sim.rng.seed(seed);
    sim.drift_sigma = drift_sigma;
    sim.episode_chance = episode_chance;
    sim.fixed = fixed;
    sim.RunUntil(13.5 * kInterval, before);
    const std::vector<std::vector<int>> decisions = sim.RunUntil(sim.clock + 15 * kInterval, after);
    const std::vector<int>& last = decisions.back();
    out.within_three += SettledFrom(decisions, {last.begin(), last.end()}) + 1 <= 3;
    for (size_t i = 1; i < decisions.size(); ++i) moves += decisions[i] != decisions[i - 1];
  }
  out.moves_per_run = static_cast<double>(moves) / runs;
  std::cout << out.within_three << " of " << runs << " runs within 3 intervals; "
            << out.moves_per_run << " moves per run after the change\n";
  return out;
}

// Speeds that drift by 8 % from one interval to the next, as four workers sharing two cores did in
// early runs of the rebalance benchmark (bench/rebalance): one interval's noise then often predicts
// a gain above the hysteresis, and the allocation that equalizes the workers' times itself moves
// by more than 10 % within the run. Over 100 seeds, at least 75 runs must come within 10 % of
// where they end within 3 intervals of a change of slowdowns, and stay there, and the allocation
// must move at most 4.5 times per run after it. 92 runs do, moving 3.7 times; with the models of
// before (a mean 25 % off taken whole, weight 0.5, new sizes never judged, the measurement after a
// change averaged in) 54 runs did, moving 5.3 times.
TEST(LocalRebalancer, UnderDriftingSpeedsMostRunsFollowAChangeWithinThreeIntervals) {
  const Following f = FollowAChange(0.08, 0, kFixed, 100);
  EXPECT_GE(f.within_three, 75);
  EXPECT_LE(f.moves_per_run, 4.5);
}

// Speeds as the rebalance benchmark measured them since its device window (every rank's time
// relative to the others' moving by 2–7 % from one 3 s interval to the next), with episodes in
// which one rank runs 30 % slower for an interval (one did so right after a move, and the
// allocation then sat 17 % away from where it ended for four intervals), and the benchmark's fixed
// cost per step, 17 samples' worth: the slowest worker's share (12 samples) is then a small
// difference of large times, and a model a few percent off moves it by half. At least 85 of 100
// runs must come within 10 % of where they end within 3 intervals, moving at most 4 times per
// run. 91 runs do, moving 3.3 times; without taking the measurement after a change of speed whole,
// 79 did, and with the models of before, 49, moving 4.8 times.
TEST(LocalRebalancer, AnIntervalOfOneSlowRankDoesNotMoveTheAllocationAway) {
  const Following f = FollowAChange(0.05, 0.005, 0.017, 100);
  EXPECT_GE(f.within_three, 85);
  EXPECT_LE(f.moves_per_run, 4.0);
}

}  // namespace
}  // namespace hptrain::job
