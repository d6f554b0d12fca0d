// Strategy `hierarchical` and spec.communicator.hierarchical: the checks of
// docs/algorithms.md §2d and the byte counts of §2c, on the strategy harness.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/runtime/sync/strategy_harness.h"

namespace hptrain::sync::testing {
namespace {

// spec.strategy.warmupSteps is set (W = `warmup_steps`, 0: none) unless `warmup_steps` is −1.
job::JobSpec Job(const std::string& strategy, std::vector<int> nodes, int interval = 0,
                 int warmup_steps = 0) {
  job::JobSpec spec = HarnessJob(strategy);
  spec.topology.node_sizes = std::move(nodes);
  if (interval != 0) {
    spec.strategy.Set("interval", interval);
  }
  if (warmup_steps >= 0) spec.strategy.Set("warmupSteps", warmup_steps);
  return spec;
}

bool Same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

// ||a − b|| / ||b||.
double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

void ExpectAllRanksIdentical(const SimResult& r) {
  for (size_t rank = 1; rank < r.params.size(); ++rank) {
    EXPECT_TRUE(Same(r.params[rank], r.params[0])) << "rank " << rank;
  }
}

TEST(Hierarchical, OneNodeEqualsSsgdBitForBit) {
  for (int interval : {-1, 1, 5}) {
    SimOptions options;
    options.steps = 23;
    options.steps_per_epoch = 7;
    options.synchronize_at_epoch_end = true;
    options.local_batches = {8, 24, 16, 16};  // uneven: nothing is rescaled with one node
    SimResult ssgd = Simulate(HarnessJob("ssgd"), options);
    SimResult h = Simulate(Job("hierarchical", {4}, interval), options);
    ASSERT_TRUE(ssgd.ok) << ssgd.error;
    ASSERT_TRUE(h.ok) << h.error;
    for (int rank = 0; rank < options.world; ++rank) {
      EXPECT_TRUE(Same(h.params[rank], ssgd.params[rank])) << "K′ " << interval << " rank " << rank;
    }
    EXPECT_EQ(h.inter_node_bytes_sent[0], 0);
    EXPECT_TRUE(h.synchronized_steps.empty());  // the global step is skipped
  }
}

TEST(Hierarchical, IntervalOneEqualsSsgdWithinRelative1e5After100Steps) {
  for (const std::vector<int>& nodes : std::vector<std::vector<int>>{{2, 2}, {1, 3}}) {
    SimOptions options;
    options.steps = 100;
    SimResult ssgd = Simulate(HarnessJob("ssgd"), options);
    SimResult h = Simulate(Job("hierarchical", nodes, 1), options);
    ASSERT_TRUE(ssgd.ok) << ssgd.error;
    ASSERT_TRUE(h.ok) << h.error;
    ExpectAllRanksIdentical(h);
    const double error = RelativeError(h.params[0], ssgd.params[0]);
    EXPECT_LE(error, 1e-5) << "nodes " << nodes.size();
    EXPECT_GT(RelativeError(ssgd.params[0], std::vector<float>(ssgd.params[0].size(), 0.0f)), 0);
  }
}

TEST(Hierarchical, NodeReplicasIdenticalEveryStepAllReplicasAfterEachGlobalSync) {
  for (int interval : {4, -1}) {
    SimOptions options;
    options.world = 5;
    options.global_batch = 60;
    options.steps = 17;
    options.steps_per_epoch = 6;
    options.synchronize_at_epoch_end = true;
    const std::vector<int> node_of = {0, 0, 1, 1, 1};
    std::mutex mu;
    std::map<int, std::vector<std::vector<float>>> after_step;  // step -> params per rank
    std::map<int, std::vector<std::vector<float>>> after_sync;  // epoch-end step -> params
    options.after_step = [&](int rank, int step, const std::vector<float>& params) {
      std::lock_guard<std::mutex> lock(mu);
      after_step[step].resize(5);
      after_step[step][rank] = params;
    };
    options.after_synchronize = [&](int rank, int step, const std::vector<float>& params) {
      std::lock_guard<std::mutex> lock(mu);
      after_sync[step].resize(5);
      after_sync[step][rank] = params;
    };
    SimResult h = Simulate(Job("hierarchical", {2, 3}, interval), options);
    ASSERT_TRUE(h.ok) << h.error;
    for (const auto& [step, ranks] : after_step) {
      for (int rank = 1; rank < 5; ++rank) {
        const int first = node_of[rank] == 0 ? 0 : 2;
        EXPECT_TRUE(Same(ranks[rank], ranks[first])) << "step " << step << " rank " << rank;
      }
      const bool global = interval > 0 && (step + 1) % interval == 0;
      EXPECT_EQ(Same(ranks[0], ranks[2]), global) << "K′ " << interval << " step " << step;
      if (global) {
        for (int rank = 1; rank < 5; ++rank) EXPECT_TRUE(Same(ranks[rank], ranks[0]));
      }
    }
    ASSERT_EQ(after_sync.size(), 2u);  // epoch ends after steps 6 and 12
    for (const auto& [step, ranks] : after_sync) {
      for (int rank = 1; rank < 5; ++rank) {
        EXPECT_TRUE(Same(ranks[rank], ranks[0])) << "epoch end " << step << " rank " << rank;
      }
    }
    ExpectAllRanksIdentical(h);  // after the final Synchronize
  }
}

// Global syncs of a run of `steps` with epochs of `per_epoch` steps: every K′-th step after the
// `warmup` steps (which all-reduce the gradients, so the models never differ), plus each epoch
// end and the final synchronisation unless a K′ sync or a warm-up step just happened.
int ExpectedSyncs(int steps, int per_epoch, int interval, int warmup = 0) {
  int syncs = 0;
  int since = 0;
  for (int it = 1; it <= steps; ++it) {
    if (it <= warmup) continue;
    ++since;
    if (interval > 0 && (it - warmup) % interval == 0) {
      ++syncs;
      since = 0;
    }
    if ((it % per_epoch == 0 || it == steps) && since > 0) {
      ++syncs;
      since = 0;
    }
  }
  return syncs;
}

TEST(Hierarchical, InterNodeCollectivesAndBytesPerNodeMatchSections2cAnd2d) {
  SimOptions options;
  options.steps = 23;
  options.steps_per_epoch = 7;
  options.synchronize_at_epoch_end = true;
  const int64_t s = 4 * static_cast<int64_t>(Parameters(options));  // S, P even: exact chunks
  ASSERT_EQ(Parameters(options) % 2, 0u);
  // Per node on 2 × 2 (only rank 0 and rank 2 send across).
  auto per_node = [](const SimResult& r) {
    return r.inter_node_bytes_sent[0] + r.inter_node_bytes_sent[1];
  };

  for (int interval : {1, 5, -1}) {
    SimResult h = Simulate(Job("hierarchical", {2, 2}, interval), options);
    ASSERT_TRUE(h.ok) << h.error;
    const int syncs = ExpectedSyncs(options.steps, options.steps_per_epoch, interval);
    // floor(steps / K′) syncs on the K′ schedule, plus the epoch ends that do not coincide.
    if (interval > 0) {
      EXPECT_EQ(static_cast<int>(h.synchronized_steps.size()), options.steps / interval);
    } else {
      EXPECT_TRUE(h.synchronized_steps.empty());
    }
    // Each sync is one hierarchical all-reduce: 2(M−1)/M · S = S per node, from its leader.
    EXPECT_EQ(per_node(h), syncs * s) << "K′ " << interval;
    EXPECT_EQ(h.inter_node_bytes_sent[1], 0);
    EXPECT_EQ(h.inter_node_bytes_sent[3], 0);
  }
  EXPECT_EQ(ExpectedSyncs(23, 7, 5), 4 + 3 + 1);  // K′ syncs 5 10 15 20; epoch ends 7 14 21; end
  EXPECT_EQ(ExpectedSyncs(23, 7, -1), 4);

  // ssgd flat: a ring over N = 4 every step, 2(N−1)/N · S per node; over the hierarchical
  // all-reduce 2(M−1)/M · S = S per node.
  SimResult flat = Simulate(Job("ssgd", {2, 2}), options);
  job::JobSpec over = Job("ssgd", {2, 2});
  over.communicator.hierarchical = true;
  SimResult hier = Simulate(over, options);
  ASSERT_TRUE(flat.ok) << flat.error;
  ASSERT_TRUE(hier.ok) << hier.error;
  // (P = 61706 is not a multiple of 4: the ring's chunks differ by one element.)
  EXPECT_NEAR(per_node(flat), options.steps * 3 * s / 2, options.steps * 2 * 3 * 4);
  EXPECT_EQ(per_node(hier), options.steps * s);
  // A flat job's counters still split by node: everything on one node is intra-node.
  SimResult one = Simulate(Job("ssgd", {4}), options);
  ASSERT_TRUE(one.ok) << one.error;
  EXPECT_EQ(one.inter_node_bytes_sent[0], 0);
  EXPECT_GT(one.bytes_sent[0], 0);
}

// K′ ramp-up (§2e): a warm-up over the whole run is ssgd over the hierarchical all-reduce, every
// replica identical after every step, one all-reduce of S per node and step across the network.
TEST(Hierarchical, WarmupOverTheWholeRunEqualsSsgd) {
  for (const std::vector<int>& nodes : std::vector<std::vector<int>>{{2, 2}, {1, 3}}) {
    for (int interval : {-1, 5}) {
      SimOptions options;
      options.steps = 30;
      options.steps_per_epoch = 8;
      options.synchronize_at_epoch_end = true;
      std::mutex mu;
      std::map<int, std::vector<std::vector<float>>> after_step;
      options.after_step = [&](int rank, int step, const std::vector<float>& params) {
        std::lock_guard<std::mutex> lock(mu);
        after_step[step].resize(4);
        after_step[step][rank] = params;
      };
      SimResult ssgd = Simulate(HarnessJob("ssgd"), options);
      SimResult h = Simulate(Job("hierarchical", nodes, interval, options.steps), options);
      ASSERT_TRUE(ssgd.ok) << ssgd.error;
      ASSERT_TRUE(h.ok) << h.error;
      for (const auto& [step, ranks] : after_step) {
        for (int rank = 1; rank < 4; ++rank) {
          EXPECT_TRUE(Same(ranks[rank], ranks[0])) << "step " << step << " rank " << rank;
        }
      }
      EXPECT_LE(RelativeError(h.params[0], ssgd.params[0]), 1e-5) << "nodes " << nodes.size();
      EXPECT_TRUE(h.synchronized_steps.empty());
      // Ring among the leaders: 2(M−1)/M · S = S per node and step; no parameter average.
      const int64_t s = 4 * static_cast<int64_t>(Parameters(options));
      EXPECT_EQ(h.inter_node_bytes_sent[0], options.steps * s);  // node 0's leader
      EXPECT_EQ(h.inter_node_bytes_sent[nodes[0]], options.steps * s);  // node 1's leader
    }
  }
}

// After W warm-up steps the nodes train apart; the K′ schedule counts from W: syncs after steps
// W + K′, W + 2K′, ..., so the inter-node collectives are W + floor((T − W)/K′) plus the epoch
// ends off that schedule.
TEST(Hierarchical, WarmupThenLocalStepsOnTheScheduleFromTheWarmupsEnd) {
  SimOptions options;
  options.steps = 23;
  options.steps_per_epoch = 7;
  options.synchronize_at_epoch_end = true;
  const int warmup = 6;
  const int64_t s = 4 * static_cast<int64_t>(Parameters(options));
  for (int interval : {5, -1}) {
    std::mutex mu;
    std::map<int, std::vector<std::vector<float>>> after_step;
    options.after_step = [&](int rank, int step, const std::vector<float>& params) {
      std::lock_guard<std::mutex> lock(mu);
      after_step[step].resize(4);
      after_step[step][rank] = params;
    };
    SimResult h = Simulate(Job("hierarchical", {2, 2}, interval, warmup), options);
    ASSERT_TRUE(h.ok) << h.error;
    for (const auto& [step, ranks] : after_step) {
      const bool global = step < warmup || (interval > 0 && (step + 1 - warmup) % interval == 0);
      EXPECT_EQ(Same(ranks[0], ranks[2]), global) << "K′ " << interval << " step " << step;
      EXPECT_TRUE(Same(ranks[1], ranks[0])) << "step " << step;
      EXPECT_TRUE(Same(ranks[3], ranks[2])) << "step " << step;
    }
    if (interval > 0) {
      EXPECT_EQ(h.synchronized_steps, (std::vector<int>{10, 15, 20}));
    } else {
      EXPECT_TRUE(h.synchronized_steps.empty());
    }
    const int syncs = ExpectedSyncs(options.steps, options.steps_per_epoch, interval, warmup);
    // Per node (its leader), S per warm-up step and per sync.
    EXPECT_EQ(h.inter_node_bytes_sent[0], (warmup + syncs) * s) << "K′ " << interval;
    EXPECT_EQ(h.inter_node_bytes_sent[1], 0);
    ExpectAllRanksIdentical(h);
  }
  // K′ = 5: warm-up steps 1–6; syncs after 11, 16, 21; epoch ends 7 and 14 (off the schedule),
  // 21 (just synced) and the end after 23.
  EXPECT_EQ(ExpectedSyncs(23, 7, 5, 6), 3 + 2 + 1);
  // K′ = −1: epoch ends 7, 14, 21 and the end (the warm-up ends inside the first epoch).
  EXPECT_EQ(ExpectedSyncs(23, 7, -1, 6), 4);
  // A warm-up past the first epoch end skips that sync: the models were equal there.
  EXPECT_EQ(ExpectedSyncs(23, 7, -1, 10), 3);
}

// Without warmupSteps: W is the steps of max(LR warm-up epochs, 1/2) epochs, from the epoch clock.
TEST(Hierarchical, DefaultWarmupIsHalfAnEpochOrTheLearningRateWarmup) {
  for (double lr_warmup_epochs : {0.0, 1.5}) {
    SimOptions options;
    options.steps = 20;
    options.steps_per_epoch = 8;
    options.synchronize_at_epoch_end = true;
    std::mutex mu;
    std::map<int, std::vector<std::vector<float>>> after_step;
    options.after_step = [&](int rank, int step, const std::vector<float>& params) {
      std::lock_guard<std::mutex> lock(mu);
      after_step[step].resize(4);
      after_step[step][rank] = params;
    };
    job::JobSpec spec = Job("hierarchical", {2, 2}, -1, -1);
    spec.optimizer.schedule.warmup_epochs = lr_warmup_epochs;
    SimResult h = Simulate(spec, options);
    ASSERT_TRUE(h.ok) << h.error;
    const int warmup = lr_warmup_epochs > 0 ? 12 : 4;
    ASSERT_EQ(after_step.size(), 20u);
    for (const auto& [step, ranks] : after_step) {
      // (after_step sees an epoch end's models before its sync)
      EXPECT_EQ(Same(ranks[0], ranks[2]), step < warmup)
          << "LR warm-up " << lr_warmup_epochs << " epochs, step " << step;
    }
    // Leaders' bytes: S per warm-up step and per sync (epoch ends after the warm-up, the end).
    const int64_t s = 4 * static_cast<int64_t>(Parameters(options));
    const int syncs = ExpectedSyncs(options.steps, options.steps_per_epoch, -1, warmup);
    EXPECT_EQ(h.inter_node_bytes_sent[0], (warmup + syncs) * s) << lr_warmup_epochs;
  }
}

TEST(Hierarchical, SsgdOverTheHierarchicalAllReduceTrainsToTheSameParameters) {
  SimOptions options;
  options.world = 6;
  options.global_batch = 60;
  options.steps = 30;
  SimResult flat = Simulate(HarnessJob("ssgd"), options);
  job::JobSpec spec = Job("ssgd", {2, 1, 3});
  spec.communicator.hierarchical = true;
  SimResult hier = Simulate(spec, options);
  ASSERT_TRUE(flat.ok) << flat.error;
  ASSERT_TRUE(hier.ok) << hier.error;
  ExpectAllRanksIdentical(hier);
  EXPECT_LE(RelativeError(hier.params[0], flat.params[0]), 1e-5);
}

TEST(Hierarchical, QuantizedOverTheHierarchicalAllReduceEncodesBetweenNodes) {
  SimOptions options;
  options.steps = 6;
  job::JobSpec fp32 = Job("ssgd", {2, 2});
  fp32.communicator.hierarchical = true;
  job::JobSpec quantized = Job("quantized", {2, 2});
  quantized.strategy.Set("bits", "8");
  quantized.communicator.hierarchical = true;
  quantized.communicator.compress_inter_node_only = true;
  SimResult a = Simulate(fp32, options);
  SimResult b = Simulate(quantized, options);
  ASSERT_TRUE(a.ok) << a.error;
  ASSERT_TRUE(b.ok) << b.error;
  ExpectAllRanksIdentical(b);
  // 8 bits plus bucket metadata instead of 32 bits between nodes.
  EXPECT_LT(b.inter_node_bytes_sent[0] * 3, a.inter_node_bytes_sent[0]);
  // Inside the node the non-leader's ring is fp32 either way.
  EXPECT_EQ(b.bytes_sent[1] - b.inter_node_bytes_sent[1],
            a.bytes_sent[1] - a.inter_node_bytes_sent[1]);
  EXPECT_LE(RelativeError(b.params[0], a.params[0]), 1e-2);
}

TEST(Hierarchical, RefusedWithoutTopology) {
  SimOptions options;
  options.steps = 1;
  job::JobSpec spec = HarnessJob("hierarchical");
  SimResult r = Simulate(spec, options);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("spec.topology"), std::string::npos) << r.error;
  job::JobSpec ssgd = HarnessJob("ssgd");
  ssgd.communicator.hierarchical = true;
  SimResult s = Simulate(ssgd, options);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.error.find("spec.communicator.hierarchical"), std::string::npos) << s.error;
}

}  // namespace
}  // namespace hptrain::sync::testing
