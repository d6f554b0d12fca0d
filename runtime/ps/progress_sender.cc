#include "runtime/ps/progress_sender.h"

#include <utility>

namespace hptrain::ps {

ProgressSender::ProgressSender(Send send) : send_(std::move(send)) {
  thread_ = std::thread([this] { Loop(); });
}

ProgressSender::~ProgressSender() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ProgressSender::Offer(const hptrain::v1::ProgressReport& report) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (waiting_.has_value()) ++replaced_;
    waiting_ = report;
  }
  cv_.notify_all();
}

void ProgressSender::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !waiting_.has_value() && !sending_; });
}

int64_t ProgressSender::sent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sent_;
}

int64_t ProgressSender::replaced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return replaced_;
}

void ProgressSender::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || waiting_.has_value(); });
    if (!waiting_.has_value()) return;  // stopping with nothing left to send
    hptrain::v1::ProgressReport report = std::move(*waiting_);
    waiting_.reset();
    sending_ = true;
    lock.unlock();
    (void)send_(report);  // advisory: a lost report must not fail training
    lock.lock();
    sending_ = false;
    ++sent_;
    cv_.notify_all();
  }
}

}  // namespace hptrain::ps
