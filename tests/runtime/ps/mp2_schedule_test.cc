// MP²'s push schedule (runtime/ps/mp2/schedule.h; docs/algorithms.md §1d): every C consecutive rounds
// are a disjoint cover of the indices, the same (seed, shard, piece) gives the same subsets in any
// process, and small tensors and ρ = 1 push everything.
#include <cmath>

#include "gtest/gtest.h"
#include "runtime/ps/mp2/schedule.h"

namespace hptrain::ps::mp2 {
namespace {

TEST(RoundsPerCycle, IsCeilOfTheInverse) {
  EXPECT_EQ(RoundsPerCycle(0.1), 10);
  EXPECT_EQ(RoundsPerCycle(0.25), 4);
  EXPECT_EQ(RoundsPerCycle(0.3), 4);
  EXPECT_EQ(RoundsPerCycle(0.5), 2);
  EXPECT_EQ(RoundsPerCycle(0.01), 100);
  EXPECT_EQ(RoundsPerCycle(1.0), 1);
}

// For each ratio and size: over any C consecutive rounds (starting anywhere) the subsets are
// disjoint, sorted, in range and together hold every index once.
TEST(SubsetSchedule, EveryCycleIsADisjointCover) {
  for (double ratio : {0.1, 0.3, 0.25, 0.45, 0.07}) {
    for (int64_t size : {4097, 10080, 48000}) {
      SubsetSchedule schedule(42, 0, 3, size, ratio);
      ASSERT_TRUE(schedule.predicted());
      const int C = schedule.cycle();
      EXPECT_EQ(C, RoundsPerCycle(ratio));
      for (int64_t start : {0, 3, 17}) {
        std::vector<int> seen(static_cast<size_t>(size), 0);
        for (int64_t t = start; t < start + C; ++t) {
          auto subset = schedule.Subset(t);
          EXPECT_LE(static_cast<int64_t>(subset.size()),
                    static_cast<int64_t>(std::ceil(ratio * size)) + 1);
          for (size_t k = 0; k < subset.size(); ++k) {
            ASSERT_GE(subset[k], 0);
            ASSERT_LT(subset[k], size);
            if (k > 0) EXPECT_LT(subset[k - 1], subset[k]);
            ++seen[subset[k]];
          }
        }
        for (int64_t i = 0; i < size; ++i) {
          ASSERT_EQ(seen[i], 1) << "index " << i << " ratio " << ratio << " size " << size;
        }
      }
      // Round t and t + C push the same subset.
      auto a = schedule.Subset(5), b = schedule.Subset(5 + C);
      EXPECT_EQ(std::vector<int32_t>(a.begin(), a.end()), std::vector<int32_t>(b.begin(), b.end()));
    }
  }
}

TEST(SubsetSchedule, TheSameKeyGivesTheSameSubsetsAndOtherKeysOthers) {
  SubsetSchedule a(7, 1, 4, 10080, 0.1), b(7, 1, 4, 10080, 0.1);
  for (int64_t t = 0; t < 12; ++t) {
    auto x = a.Subset(t), y = b.Subset(t);
    ASSERT_EQ(std::vector<int32_t>(x.begin(), x.end()), std::vector<int32_t>(y.begin(), y.end()));
  }
  for (const SubsetSchedule& other :
       {SubsetSchedule(8, 1, 4, 10080, 0.1), SubsetSchedule(7, 0, 4, 10080, 0.1),
        SubsetSchedule(7, 1, 5, 10080, 0.1)}) {
    auto x = a.Subset(0), y = other.Subset(0);
    EXPECT_NE(std::vector<int32_t>(x.begin(), x.end()), std::vector<int32_t>(y.begin(), y.end()));
  }
}

TEST(SubsetSchedule, SmallTensorsAndRatioOnePushEverything) {
  for (const SubsetSchedule& s :
       {SubsetSchedule(1, 0, 0, kMaxDenseElements, 0.1), SubsetSchedule(1, 0, 0, 48000, 1.0)}) {
    EXPECT_FALSE(s.predicted());
    EXPECT_EQ(s.cycle(), 1);
    for (int64_t t : {0, 1, 9}) {
      auto subset = s.Subset(t);
      ASSERT_EQ(static_cast<int64_t>(subset.size()), s.size());
      for (size_t k = 0; k < subset.size(); ++k) ASSERT_EQ(subset[k], static_cast<int32_t>(k));
    }
  }
}

TEST(SubsetSchedule, GatherTakesTheSubsetInOrder) {
  SubsetSchedule schedule(3, 0, 0, 5000, 0.2);
  std::vector<float> values(5000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  for (int64_t t = 0; t < 3; ++t) {
    auto subset = schedule.Subset(t);
    std::vector<float> out(subset.size());
    schedule.Gather(t, values.data(), out.data());
    for (size_t k = 0; k < subset.size(); ++k) EXPECT_EQ(out[k], values[subset[k]]);
  }
}

TEST(ScheduleFingerprint, DependsOnSeedAndRatio) {
  EXPECT_EQ(ScheduleFingerprint(42, 0.1), ScheduleFingerprint(42, 0.1));
  EXPECT_NE(ScheduleFingerprint(42, 0.1), ScheduleFingerprint(43, 0.1));
  EXPECT_NE(ScheduleFingerprint(42, 0.1), ScheduleFingerprint(42, 0.2));
  EXPECT_NE(ScheduleFingerprint(42, 0.1), 0u);
}

}  // namespace
}  // namespace hptrain::ps::mp2
