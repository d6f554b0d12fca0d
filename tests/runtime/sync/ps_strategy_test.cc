// The parameter-server strategies ps and hps on the harness (N ranks as threads, the shards as
// in-process ParamStores): exactness against ssgd, the degenerate identities, sharding, the
// mirrors, the staleness bound and the byte formulas of docs/algorithms.md §5c-d.
#include <cmath>
#include <iostream>
#include <memory>

#include "gtest/gtest.h"
#include "runtime/ps/param_store.h"
#include "runtime/ps/ps_codec.h"
#include "runtime/ps/ps_connection.h"
#include "tests/runtime/sync/strategy_harness.h"

namespace hptrain::sync::testing {
namespace {

job::JobSpec PsJob(const std::string& type, int staleness, const std::string& bits) {
  job::JobSpec spec = HarnessJob(type);
  if (staleness >= 0) spec.strategy.Set("staleness", staleness);
  if (!bits.empty()) spec.strategy.Set("bits", bits);
  return spec;
}

// ‖a − b‖ / ‖b‖ (Euclidean norms): the relative difference of two parameter vectors.
double NormRelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

// The largest element-wise |a − b| / max(|b|, 0.01).
double MaxRelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) /
                                std::max(std::abs(static_cast<double>(b[i])), 1e-2));
  }
  return worst;
}

SimOptions Uneven() {
  SimOptions options;
  options.local_batches = {8, 8, 24, 24};
  return options;
}

TEST(PsStrategy, EqualsSsgdWithAnUnevenAllocation) {
  SimResult ps = RunPs(PsJob("ps", -1, ""), Uneven(), 1);
  ASSERT_TRUE(ps.ok) << ps.error;
  SimResult ssgd = Simulate(HarnessJob("ssgd"), Uneven());
  ASSERT_TRUE(ssgd.ok) << ssgd.error;
  // The two differ only in the order of the sum (rank order here, ring order there).
  std::cout << "ps vs ssgd after 20 steps: relative difference "
            << NormRelativeDifference(ps.params[0], ssgd.params[0]) << ", largest element-wise "
            << MaxRelativeDifference(ps.params[0], ssgd.params[0]) << "\n";
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(ps.params[r], ps.params[0]) << "rank " << r;
    EXPECT_LE(NormRelativeDifference(ps.params[r], ssgd.params[r]), 1e-6) << "rank " << r;
    EXPECT_LE(MaxRelativeDifference(ps.params[r], ssgd.params[r]), 1e-5) << "rank " << r;
  }
  // The parameters moved: the comparison is not between two initial states.
  SimOptions none = Uneven();
  none.steps = 0;
  SimResult initial = Simulate(HarnessJob("ssgd"), none);
  EXPECT_GT(MaxRelativeDifference(ps.params[0], initial.params[0]), 1e-3);
}

TEST(PsStrategy, HpsWithStalenessZeroAnd32BitsIsPsBitForBit) {
  SimResult ps = RunPs(PsJob("ps", -1, ""), Uneven(), 1);
  SimResult hps = RunPs(PsJob("hps", 0, "32"), Uneven(), 1);
  ASSERT_TRUE(ps.ok) << ps.error;
  ASSERT_TRUE(hps.ok) << hps.error;
  for (int r = 0; r < 4; ++r) EXPECT_EQ(hps.params[r], ps.params[r]) << "rank " << r;
}

// In fp32 the shards only change where the sums happen, not their order. (Quantized, a tensor cut
// at a shard boundary gets a scale per piece, which changes the rounding.)
TEST(PsStrategy, TwoShardsGiveTheParametersOfOneBitForBit) {
  for (const auto& [type, staleness, bits] :
       std::vector<std::tuple<std::string, int, std::string>>{
           {"ps", -1, ""}, {"hps", 1, "32"}, {"hps", 0, "32"}}) {
    SimResult one = RunPs(PsJob(type, staleness, bits), Uneven(), 1);
    SimResult two = RunPs(PsJob(type, staleness, bits), Uneven(), 2);
    ASSERT_TRUE(one.ok) << one.error;
    ASSERT_TRUE(two.ok) << two.error;
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(two.params[r], one.params[r]) << type << " bits " << bits << " rank " << r;
    }
  }
}

TEST(PsStrategy, TheCopyEqualsTheMirrorAfterEveryQuantizedPull) {
  for (const std::string& bits : {"8", "4", "2", "16"}) {
    job::JobSpec spec = PsJob("hps", 0, bits);
    auto local = std::make_unique<LocalPs>(spec, 4, 2);
    SimOptions options;
    options.steps = 200;
    options.ps = local->for_ranks();
    std::atomic<int> mismatches{0}, checks{0};
    options.after_step = [&](int rank, int, const std::vector<float>& params) {
      // Shard s's mirror of this rank, laid out over the shard's range.
      std::vector<float> mirror;
      for (auto& store : local->stores) {
        std::vector<float> part = store->Mirror(rank);
        mirror.insert(mirror.end(), part.begin(), part.end());
      }
      ++checks;
      if (mirror != params) ++mismatches;
    };
    SimResult result = Simulate(spec, options);
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(checks.load(), 4 * 200);
    EXPECT_EQ(mismatches.load(), 0) << "bits " << bits;
    // And the quantized copy follows the model: after the final fp32 synchronisation all ranks
    // hold the same parameters.
    for (int r = 1; r < 4; ++r) EXPECT_EQ(result.params[r], result.params[0]);
  }
}

TEST(PsStrategy, VersionsNeverLagMoreThanTheStalenessBound) {
  for (int staleness : {0, 1}) {
    SimOptions options;
    options.steps = 50;
    SimResult result = RunPs(PsJob("hps", staleness, "8"), options, 2);
    ASSERT_TRUE(result.ok) << result.error;
    for (int r = 0; r < 4; ++r) {
      // Staleness 1 really pipelines (the copy lags by one version) and never by more.
      EXPECT_EQ(result.max_staleness[r], staleness) << "rank " << r;
    }
  }
}

// Bytes per worker per step from the connections' counters against §5c: push S and pull S at
// 32 bits (S = 4P); at b bits each tensor of n ≥ 1024 elements takes 8 + ceil(n·b/8) bytes and
// smaller ones 4n.
TEST(PsStrategy, BytesFollowTheFormulas) {
  const std::vector<size_t> sizes = SimOptions().tensor_sizes;  // LeNet-5's tensors
  int64_t P = 0;
  for (size_t n : sizes) P += static_cast<int64_t>(n);
  ASSERT_EQ(P, 61706);
  auto formula = [&](int bits) {
    int64_t total = 0;
    for (size_t n : sizes) total += ps::PsPayloadBytes(static_cast<int64_t>(n), bits);
    return total;
  };
  const int steps = 10;
  std::map<int, int64_t> push_per_step;
  for (int bits : {32, 16, 8, 4}) {
    job::JobSpec spec = PsJob("hps", 0, std::to_string(bits));
    std::unique_ptr<LocalPs> local;
    SimOptions options;
    options.steps = steps;
    SimResult result = RunPs(spec, options, 1, &local);
    ASSERT_TRUE(result.ok) << result.error;
    for (int r = 0; r < 4; ++r) {
      const ps::PsConnection& c = *local->connections[r];
      // Rank 0 also sent the initial parameters; every rank pulled them once in fp32, and once
      // more at the end (Synchronize) unless its copy was already exact.
      const int64_t init = r == 0 ? 4 * P : 0;
      const int64_t full_pulls = bits == 32 ? 1 : 2;
      EXPECT_EQ(c.bytes_sent(), init + steps * formula(bits)) << "bits " << bits << " rank " << r;
      EXPECT_EQ(c.bytes_received(), full_pulls * 4 * P + steps * formula(bits))
          << "bits " << bits << " rank " << r;
    }
    push_per_step[bits] = formula(bits);
  }
  EXPECT_EQ(push_per_step[32], 4 * P);
  const double ratio8 = static_cast<double>(push_per_step[8]) / push_per_step[32];
  std::cout << "8-bit push/pull bytes per step: " << push_per_step[8] << " of "
            << push_per_step[32] << " (" << 100 * ratio8 << " %)\n";
  EXPECT_LE(ratio8, 0.27);
}

}  // namespace
}  // namespace hptrain::sync::testing
