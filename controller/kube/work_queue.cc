#include "controller/kube/work_queue.h"

#include <algorithm>
#include <utility>

namespace hptrain::kube {

WorkQueue::WorkQueue(std::unique_ptr<RateLimiter> limiter)
    : limiter_(limiter ? std::move(limiter) : DefaultControllerRateLimiter()) {}

WorkQueue::~WorkQueue() { ShutDown(); }

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_ || dirty_.count(key) > 0) return;
  dirty_.insert(key);
  if (processing_.count(key) > 0) return;  // Done() queues it
  queue_.push_back(key);
  cv_.Signal();
}

void WorkQueue::PromoteReadyLocked(absl::Time now) {
  while (!waiting_.empty() && waiting_.begin()->first <= now) {
    std::string key = std::move(waiting_.begin()->second);
    waiting_.erase(waiting_.begin());
    waiting_until_.erase(key);
    AddLocked(key);
  }
}

void WorkQueue::Add(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  AddLocked(std::string(key));
}

void WorkQueue::AddAfter(absl::string_view key, absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return;
  if (delay <= absl::ZeroDuration()) {
    AddLocked(std::string(key));
    return;
  }
  absl::Time ready = absl::Now() + delay;
  auto pending = waiting_until_.find(key);
  if (pending != waiting_until_.end()) {
    if (pending->second <= ready) return;  // already due earlier
    auto range = waiting_.equal_range(pending->second);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second == key) {
        waiting_.erase(it);
        break;
      }
    }
    pending->second = ready;
  } else {
    waiting_until_.emplace(std::string(key), ready);
  }
  waiting_.emplace(ready, std::string(key));
  cv_.SignalAll();  // a waiting Get may need an earlier wake-up
}

void WorkQueue::AddRateLimited(absl::string_view key) { AddAfter(key, limiter_->When(key)); }

void WorkQueue::Forget(absl::string_view key) { limiter_->Forget(key); }

int WorkQueue::NumRequeues(absl::string_view key) { return limiter_->NumRequeues(key); }

std::optional<std::string> WorkQueue::Get(absl::Duration timeout) {
  absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (true) {
    absl::Time now = absl::Now();
    PromoteReadyLocked(now);
    if (!queue_.empty()) break;
    if (shutting_down_ || now >= deadline) return std::nullopt;
    absl::Time wake = deadline;
    if (!waiting_.empty()) wake = std::min(wake, waiting_.begin()->first);
    cv_.WaitWithDeadline(&mu_, wake);
  }
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  return key;
}

void WorkQueue::Done(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  auto it = processing_.find(key);
  if (it == processing_.end()) return;
  processing_.erase(it);
  if (dirty_.count(key) > 0) {
    queue_.emplace_back(key);
    cv_.Signal();
  }
}

size_t WorkQueue::Len() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

size_t WorkQueue::NumWaiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_.size();
}

void WorkQueue::ShutDown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  waiting_.clear();
  waiting_until_.clear();
  cv_.SignalAll();
}

bool WorkQueue::ShuttingDown() const {
  absl::MutexLock lock(&mu_);
  return shutting_down_;
}

}  // namespace hptrain::kube
