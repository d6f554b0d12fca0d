// Strategies under the sub-tensor priority scheduler (spec.scheduler.type: priority;
// docs/algorithms.md §3d): chunking does not change what the all-reduce computes, so ssgd with the
// scheduler is ssgd; multistep with H ≡ 1 under the scheduler is ssgd under the scheduler, bit
// for bit; and the scheduled results do not depend on timing.
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

job::JobSpec Scheduled(job::JobSpec spec, int64_t partition = 4096, int64_t credit = 3 * 4096) {
  spec.scheduler.type = "priority";
  spec.scheduler.partition_elements = partition;
  spec.scheduler.credit_elements = credit;
  return spec;
}

void ExpectBitIdentical(const SimResult& a, const SimResult& b, const std::string& what) {
  ASSERT_TRUE(a.ok) << a.error;
  ASSERT_TRUE(b.ok) << b.error;
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t r = 0; r < a.params.size(); ++r) {
    ASSERT_EQ(a.params[r].size(), b.params[r].size());
    EXPECT_EQ(0, std::memcmp(a.params[r].data(), b.params[r].data(), 4 * a.params[r].size()))
        << what << ", rank " << r;
  }
}

// Two ranks: a + b = b + a, so no summation order can change a bit.
TEST(Scheduled, SsgdOnTwoRanksEqualsSsgdWithoutTheScheduler) {
  SimOptions options;
  options.world = 2;
  ExpectBitIdentical(Simulate(HarnessJob("ssgd"), options),
                     Simulate(Scheduled(HarnessJob("ssgd")), options), "ssgd, 2 ranks");
}

// More ranks: the ring sums each segment in another rank order, so the chunked exchange may
// round differently (fp tolerance); but it is the same at every run and for every credit.
TEST(Scheduled, SsgdOnFourRanksIsDeterministicAndWithinRoundingOfSsgd) {
  SimOptions options;
  options.world = 4;
  const SimResult plain = Simulate(HarnessJob("ssgd"), options);
  const SimResult a = Simulate(Scheduled(HarnessJob("ssgd")), options);
  const SimResult b = Simulate(Scheduled(HarnessJob("ssgd"), 4096, 1 << 20), options);
  ExpectBitIdentical(a, b, "ssgd, 4 ranks, credits 12288 and 1M");
  ASSERT_TRUE(plain.ok) << plain.error;
  for (int r = 0; r < options.world; ++r) {
    EXPECT_EQ(0, std::memcmp(a.params[r].data(), a.params[0].data(), 4 * a.params[0].size()));
    for (size_t i = 0; i < plain.params[r].size(); ++i) {
      ASSERT_NEAR(a.params[r][i], plain.params[r][i], 1e-6 * (1 + std::fabs(plain.params[r][i])))
          << "element " << i;
    }
  }
}

// The chunks' bytes are the unscheduled all-reduce's; a launch adds its readiness vector (one
// float per chunk) and at most (N − 1)·(chunks + 1) padding elements, a negotiation the vector.
TEST(Scheduled, SsgdSendsTheRingVolumePlusTheReadinessVectors) {
  SimOptions options;
  options.world = 4;
  const SimResult plain = Simulate(HarnessJob("ssgd"), options);
  const SimResult scheduled = Simulate(Scheduled(HarnessJob("ssgd")), options);
  ASSERT_TRUE(plain.ok && scheduled.ok) << plain.error << scheduled.error;
  // 61,706 elements in chunks of ≤ 4096: 20 chunks; at most 2 collectives per chunk.
  const double chunks = 20, n = options.world;
  const double overhead_per_step = 2 * chunks * 2 * (n - 1) / n * 4 * (chunks + (n - 1) * 2);
  for (int r = 0; r < options.world; ++r) {
    EXPECT_GE(scheduled.bytes_sent[r], plain.bytes_sent[r]);
    EXPECT_LE(scheduled.bytes_sent[r], plain.bytes_sent[r] + options.steps * overhead_per_step)
        << "rank " << r;
  }
}

job::JobSpec Multistep(int interval, double mu = 0) {
  job::JobSpec spec = HarnessJob("multistep");
  if (interval != 0) spec.strategy.Set("interval", interval);  // 0: adaptive
  spec.strategy.Set("mu", mu);
  return spec;
}

// docs/algorithms.md §3d: H ≡ 1, μ = 0 is SSGD with momentum bit for bit, with the scheduler on.
TEST(Scheduled, MultistepWithIntervalOneIsSsgdBitForBitUnderTheScheduler) {
  SimOptions options;
  options.world = 4;
  ExpectBitIdentical(Simulate(Scheduled(HarnessJob("ssgd")), options),
                     Simulate(Scheduled(Multistep(1)), options), "multistep H = 1 vs ssgd");
}

// Rounds of local steps, layer by layer, give what the bucketed rounds give (two ranks: the
// same sums), with and without the proximal term; the BatchNorm synchronisations fall on the
// same steps.
TEST(Scheduled, MultistepRoundsUnderTheSchedulerEqualTheBucketedRounds) {
  for (const std::string update : {"average", "delayed"}) {
    for (double mu : {0.0, 0.01}) {
      SimOptions options;
      options.world = 2;
      options.steps = 22;
      job::JobSpec spec = Multistep(4, mu);
      spec.strategy.Set("update", update);
      const SimResult bucketed = Simulate(spec, options);
      const SimResult scheduled = Simulate(Scheduled(spec), options);
      ExpectBitIdentical(bucketed, scheduled,
                         "multistep H = 4, update " + update + ", mu " + std::to_string(mu));
      EXPECT_EQ(bucketed.synchronized_steps, scheduled.synchronized_steps);
      EXPECT_EQ(scheduled.synchronized_steps, (std::vector<int>{3, 7, 11, 15, 19}));
    }
  }
}

// After every round all ranks hold the same model (x_i = x̄), under the scheduler too.
TEST(Scheduled, MultistepRanksAgreeAfterEveryScheduledRound) {
  SimOptions options;
  options.world = 4;
  options.steps = 16;
  std::mutex mu;
  std::map<int, std::vector<std::vector<float>>> at_round_end;  // step -> per-rank params
  options.after_step = [&](int rank, int step, const std::vector<float>& params) {
    if ((step + 1) % 4 != 0) return;
    std::lock_guard<std::mutex> lock(mu);
    auto& ranks = at_round_end[step];
    ranks.resize(options.world);
    ranks[rank] = params;
  };
  const SimResult r = Simulate(Scheduled(Multistep(4)), options);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(at_round_end.size(), 4u);
  for (const auto& [step, ranks] : at_round_end) {
    for (int rank = 1; rank < options.world; ++rank) {
      EXPECT_TRUE(ranks[rank] == ranks[0]) << "step " << step << ", rank " << rank;
    }
  }
}

}  // namespace
}  // namespace hptrain::sync::testing
