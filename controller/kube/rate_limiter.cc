#include "controller/kube/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace hptrain::kube {

ItemExponentialRateLimiter::ItemExponentialRateLimiter(absl::Duration base, absl::Duration max)
    : base_(base), max_(max) {}

absl::Duration ItemExponentialRateLimiter::When(absl::string_view key) {
  int exponent;
  {
    absl::MutexLock lock(&mu_);
    auto it = failures_.find(key);
    if (it == failures_.end()) it = failures_.emplace(std::string(key), 0).first;
    exponent = it->second++;
  }
  // Computed in floating point: 2^exponent overflows integer durations long before the cap.
  double seconds = absl::ToDoubleSeconds(base_) * std::pow(2.0, std::min(exponent, 62));
  if (seconds >= absl::ToDoubleSeconds(max_)) return max_;
  return absl::Seconds(seconds);
}

void ItemExponentialRateLimiter::Forget(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  auto it = failures_.find(key);
  if (it != failures_.end()) failures_.erase(it);
}

int ItemExponentialRateLimiter::NumRequeues(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

TokenBucketRateLimiter::TokenBucketRateLimiter(double qps, int burst, NowFunction now)
    : qps_(qps),
      burst_(burst),
      now_(now ? std::move(now) : NowFunction([] { return absl::Now(); })),
      tokens_(burst),
      last_(now_()) {}

absl::Duration TokenBucketRateLimiter::When(absl::string_view) {
  absl::MutexLock lock(&mu_);
  absl::Time now = now_();
  if (now > last_) {
    tokens_ = std::min(burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * qps_);
    last_ = now;
  }
  tokens_ -= 1.0;  // reserve: a negative balance is the wait of the reservations ahead
  if (tokens_ >= 0.0) return absl::ZeroDuration();
  return absl::Seconds(-tokens_ / qps_);
}

MaxOfRateLimiter::MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters)
    : limiters_(std::move(limiters)) {}

absl::Duration MaxOfRateLimiter::When(absl::string_view key) {
  absl::Duration longest = absl::ZeroDuration();
  for (auto& limiter : limiters_) longest = std::max(longest, limiter->When(key));
  return longest;
}

void MaxOfRateLimiter::Forget(absl::string_view key) {
  for (auto& limiter : limiters_) limiter->Forget(key);
}

int MaxOfRateLimiter::NumRequeues(absl::string_view key) {
  int most = 0;
  for (auto& limiter : limiters_) most = std::max(most, limiter->NumRequeues(key));
  return most;
}

std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(NowFunction now) {
  std::vector<std::unique_ptr<RateLimiter>> limiters;
  limiters.push_back(
      std::make_unique<ItemExponentialRateLimiter>(absl::Milliseconds(5), absl::Seconds(1000)));
  limiters.push_back(std::make_unique<TokenBucketRateLimiter>(10.0, 100, std::move(now)));
  return std::make_unique<MaxOfRateLimiter>(std::move(limiters));
}

}  // namespace hptrain::kube
