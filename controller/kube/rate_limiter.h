// Rate limiters for the work queue's AddRateLimited (client-go's workqueue rate limiters).
//
//   ItemExponentialRateLimiter  per key: base * 2^failures, capped (5 ms, 10 ms, ... 1000 s);
//                               Forget(key) resets the key after a success.
//   TokenBucketRateLimiter      overall: `qps` tokens per second, `burst` deep; When() reserves
//                               a token and returns how long until it is available.
//   MaxOfRateLimiter            the longest delay of several limiters.
//   DefaultControllerRateLimiter()  max(exponential 5 ms..1000 s, bucket 10 qps / 100 burst),
//                               the defaults of client-go's controllers.
//
// The clock is injectable (`now`) so the token bucket can be tested without waiting.
// Thread-safety: every limiter is thread-safe.
#ifndef HPTRAIN_CONTROLLER_KUBE_RATE_LIMITER_H_
#define HPTRAIN_CONTROLLER_KUBE_RATE_LIMITER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hptrain::kube {

using NowFunction = std::function<absl::Time()>;

class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // How long `key` should wait before its next attempt; counts one more failure for it.
  virtual absl::Duration When(absl::string_view key) = 0;
  // Forgets `key`'s failures (after a successful attempt).
  virtual void Forget(absl::string_view key) = 0;
  // Failures counted for `key` since the last Forget.
  virtual int NumRequeues(absl::string_view key) = 0;
};

class ItemExponentialRateLimiter : public RateLimiter {
 public:
  ItemExponentialRateLimiter(absl::Duration base, absl::Duration max);
  absl::Duration When(absl::string_view key) override;
  void Forget(absl::string_view key) override;
  int NumRequeues(absl::string_view key) override;

 private:
  const absl::Duration base_;
  const absl::Duration max_;
  absl::Mutex mu_;
  std::map<std::string, int, std::less<>> failures_ ABSL_GUARDED_BY(mu_);
};

class TokenBucketRateLimiter : public RateLimiter {
 public:
  // `now` empty: absl::Now.
  TokenBucketRateLimiter(double qps, int burst, NowFunction now = nullptr);
  absl::Duration When(absl::string_view key) override;
  void Forget(absl::string_view) override {}
  int NumRequeues(absl::string_view) override { return 0; }

 private:
  const double qps_;
  const double burst_;
  const NowFunction now_;
  absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_);
};

class MaxOfRateLimiter : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters);
  absl::Duration When(absl::string_view key) override;
  void Forget(absl::string_view key) override;
  int NumRequeues(absl::string_view key) override;

 private:
  std::vector<std::unique_ptr<RateLimiter>> limiters_;
};

std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(NowFunction now = nullptr);

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_RATE_LIMITER_H_
