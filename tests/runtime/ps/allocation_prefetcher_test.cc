#include "runtime/ps/allocation_prefetcher.h"

#include <atomic>
#include <mutex>
#include <vector>

#include "gtest/gtest.h"

namespace hptrain::ps {
namespace {

// A coordinator stand-in: the allocation at step s is {s, 100 - s}; records what was asked.
struct FakeCoordinator {
  std::mutex mu;
  std::vector<int64_t> asked;
  std::atomic<int> fail_step{-1};

  absl::StatusOr<std::vector<int>> Fetch(int64_t step) {
    {
      std::lock_guard<std::mutex> lock(mu);
      asked.push_back(step);
    }
    if (step == fail_step.load()) return absl::UnavailableError("coordinator restarting");
    return std::vector<int>{static_cast<int>(step), static_cast<int>(100 - step)};
  }
};

TEST(AllocationPrefetcher, AnswersEveryStepWithItsOwnAllocationFromTheRequestStartedAStepAhead) {
  FakeCoordinator coordinator;
  AllocationPrefetcher prefetcher([&](int64_t s) { return coordinator.Fetch(s); });
  for (int64_t step = 0; step < 50; ++step) {
    auto a = prefetcher.For(step);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(*a, (std::vector<int>{static_cast<int>(step), static_cast<int>(100 - step)}));
  }
  EXPECT_EQ(prefetcher.prefetch_hits(), 49);  // all but the first
}

TEST(AllocationPrefetcher, AStepOtherThanTheOnePrefetchedIsAskedForItself) {
  FakeCoordinator coordinator;
  AllocationPrefetcher prefetcher([&](int64_t s) { return coordinator.Fetch(s); });
  ASSERT_TRUE(prefetcher.For(10).ok());
  auto a = prefetcher.For(20);  // e.g. a resumed run
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)[0], 20);
  EXPECT_EQ(prefetcher.prefetch_hits(), 0);
}

TEST(AllocationPrefetcher, AFailedPrefetchIsAskedAgainAndAFailedAskIsReturned) {
  FakeCoordinator coordinator;
  coordinator.fail_step = 3;
  {
    AllocationPrefetcher prefetcher([&](int64_t s) { return coordinator.Fetch(s); });
    ASSERT_TRUE(prefetcher.For(2).ok());
    // The prefetch of step 3 failed, and so does the synchronous retry.
    auto a = prefetcher.For(3);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kUnavailable);
    coordinator.fail_step = -1;
    auto b = prefetcher.For(3);  // nothing was prefetched after the failure
    ASSERT_TRUE(b.ok());
    EXPECT_EQ((*b)[0], 3);
  }  // waits for the prefetch of step 4
  // 2, prefetch 3 (failed), retry 3 (failed), 3, prefetch 4.
  EXPECT_EQ(coordinator.asked, (std::vector<int64_t>{2, 3, 3, 3, 4}));
}

}  // namespace
}  // namespace hptrain::ps
