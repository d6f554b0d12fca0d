#include "controller/kube/rate_limiter.h"

#include <gtest/gtest.h>

#include <memory>

namespace hptrain::kube {
namespace {

TEST(KubeItemExponentialRateLimiterTest, DoublesPerKeyUpToTheCapAndForgets) {
  ItemExponentialRateLimiter limiter(absl::Milliseconds(5), absl::Seconds(1000));
  EXPECT_EQ(limiter.When("a"), absl::Milliseconds(5));
  EXPECT_EQ(limiter.When("a"), absl::Milliseconds(10));
  EXPECT_EQ(limiter.When("a"), absl::Milliseconds(20));
  EXPECT_EQ(limiter.When("b"), absl::Milliseconds(5));  // keys are independent
  EXPECT_EQ(limiter.NumRequeues("a"), 3);
  for (int i = 0; i < 100; ++i) limiter.When("a");
  EXPECT_EQ(limiter.When("a"), absl::Seconds(1000));
  limiter.Forget("a");
  EXPECT_EQ(limiter.NumRequeues("a"), 0);
  EXPECT_EQ(limiter.When("a"), absl::Milliseconds(5));
}

TEST(KubeTokenBucketRateLimiterTest, BurstThenQpsOnAFakeClock) {
  absl::Time now = absl::FromUnixSeconds(1000);
  TokenBucketRateLimiter limiter(10.0, 100, [&] { return now; });
  for (int i = 0; i < 100; ++i) ASSERT_EQ(limiter.When("x"), absl::ZeroDuration()) << i;
  EXPECT_EQ(limiter.When("x"), absl::Milliseconds(100));  // 1 token at 10 qps
  EXPECT_EQ(limiter.When("x"), absl::Milliseconds(200));  // queued behind the previous one
  now += absl::Seconds(1);                                // 10 tokens refilled
  EXPECT_EQ(limiter.When("x"), absl::ZeroDuration());
  EXPECT_EQ(limiter.NumRequeues("x"), 0);
}

TEST(KubeDefaultControllerRateLimiterTest, TakesTheLongerOfBothLimits) {
  absl::Time now = absl::FromUnixSeconds(1000);
  std::unique_ptr<RateLimiter> limiter = DefaultControllerRateLimiter([&] { return now; });
  EXPECT_EQ(limiter->When("ns/a"), absl::Milliseconds(5));
  EXPECT_EQ(limiter->When("ns/a"), absl::Milliseconds(10));
  EXPECT_EQ(limiter->NumRequeues("ns/a"), 2);
  // Exhaust the bucket with other keys: the bucket's wait then exceeds the item backoff.
  for (int i = 0; i < 98; ++i) limiter->When("ns/other" + std::to_string(i));
  EXPECT_EQ(limiter->When("ns/b"), absl::Milliseconds(100));
  limiter->Forget("ns/a");
  EXPECT_EQ(limiter->NumRequeues("ns/a"), 0);
}

}  // namespace
}  // namespace hptrain::kube
