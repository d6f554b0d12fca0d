#include "controller/kube/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"

namespace hptrain::kube {
namespace {

// A limiter with fixed answers, to test the queue apart from the default limiter's timing.
class FixedLimiter : public RateLimiter {
 public:
  explicit FixedLimiter(absl::Duration delay) : delay_(delay) {}
  absl::Duration When(absl::string_view) override {
    ++failures_;
    return delay_;
  }
  void Forget(absl::string_view) override { failures_ = 0; }
  int NumRequeues(absl::string_view) override { return failures_; }

 private:
  absl::Duration delay_;
  int failures_ = 0;
};

TEST(KubeWorkQueueTest, AddDeduplicatesQueuedKeys) {
  WorkQueue queue;
  queue.Add("ns/a");
  queue.Add("ns/b");
  queue.Add("ns/a");
  EXPECT_EQ(queue.Len(), 2u);
  EXPECT_EQ(queue.Get(), "ns/a");
  EXPECT_EQ(queue.Get(), "ns/b");
  EXPECT_EQ(queue.Len(), 0u);
  EXPECT_EQ(queue.Get(absl::Milliseconds(1)), std::nullopt);  // nothing ready
}

TEST(KubeWorkQueueTest, KeyAddedWhileProcessingIsRequeuedAfterDone) {
  WorkQueue queue;
  queue.Add("ns/a");
  std::optional<std::string> key = queue.Get();
  ASSERT_EQ(key, "ns/a");
  queue.Add("ns/a");  // a watch event arrives while a worker reconciles ns/a
  queue.Add("ns/a");
  EXPECT_EQ(queue.Len(), 0u);  // never handed to a second worker meanwhile
  EXPECT_EQ(queue.Get(absl::Milliseconds(1)), std::nullopt);
  queue.Done("ns/a");
  EXPECT_EQ(queue.Len(), 1u);
  EXPECT_EQ(queue.Get(), "ns/a");
  queue.Done("ns/a");
  EXPECT_EQ(queue.Len(), 0u);
  queue.Done("ns/unknown");  // harmless
}

TEST(KubeWorkQueueTest, AddAfterKeepsTheEarliestTimeAndDeliversLater) {
  WorkQueue queue;
  queue.AddAfter("ns/late", absl::Hours(1));
  queue.AddAfter("ns/soon", absl::Milliseconds(20));
  queue.AddAfter("ns/soon", absl::Hours(2));  // the earlier time stays
  EXPECT_EQ(queue.Len(), 0u);
  EXPECT_EQ(queue.NumWaiting(), 2u);
  EXPECT_EQ(queue.Get(absl::Seconds(10)), "ns/soon");  // Get wakes up when the delay ends
  EXPECT_EQ(queue.NumWaiting(), 1u);
  queue.AddAfter("ns/late", absl::ZeroDuration());  // no delay: at once
  EXPECT_EQ(queue.Get(absl::Seconds(10)), "ns/late");
}

TEST(KubeWorkQueueTest, RateLimitedAddsForgetAndRequeueCount) {
  WorkQueue queue(std::make_unique<FixedLimiter>(absl::Milliseconds(10)));
  queue.AddRateLimited("ns/a");
  queue.AddRateLimited("ns/a");
  EXPECT_EQ(queue.NumRequeues("ns/a"), 2);
  EXPECT_EQ(queue.Get(absl::Seconds(10)), "ns/a");
  queue.Forget("ns/a");
  EXPECT_EQ(queue.NumRequeues("ns/a"), 0);
}

TEST(KubeWorkQueueTest, ShutDownWakesBlockedWorkersAndDrains) {
  WorkQueue queue;
  std::atomic<int> woke{0};
  std::vector<std::thread> workers;
  for (int i = 0; i < 3; ++i) {
    workers.emplace_back([&] {
      while (queue.Get().has_value()) {
      }
      ++woke;
    });
  }
  queue.ShutDown();
  for (std::thread& t : workers) t.join();
  EXPECT_EQ(woke.load(), 3);
  EXPECT_TRUE(queue.ShuttingDown());

  WorkQueue draining;
  draining.Add("ns/a");
  draining.AddAfter("ns/b", absl::Hours(1));
  draining.ShutDown();
  draining.Add("ns/c");  // ignored after shutdown
  EXPECT_EQ(draining.NumWaiting(), 0u);
  EXPECT_EQ(draining.Get(), "ns/a");  // already queued keys are still handed out
  EXPECT_EQ(draining.Get(), std::nullopt);
}

TEST(KubeWorkQueueTest, ConcurrentWorkersNeverHoldTheSameKey) {
  WorkQueue queue;
  std::atomic<int> holding[4] = {};
  std::atomic<bool> overlap{false};
  std::atomic<int> processed{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (std::optional<std::string> key = queue.Get()) {
        int index = (*key)[0] - 'a';
        if (holding[index].fetch_add(1) != 0) overlap = true;
        std::this_thread::yield();
        holding[index].fetch_sub(1);
        ++processed;
        queue.Done(*key);
      }
    });
  }
  for (int i = 0; i < 2000; ++i) queue.Add(std::string(1, static_cast<char>('a' + i % 4)));
  while (queue.Len() > 0) std::this_thread::yield();
  queue.ShutDown();
  for (std::thread& t : workers) t.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_GE(processed.load(), 4);
}

}  // namespace
}  // namespace hptrain::kube
