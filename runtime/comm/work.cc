#include "runtime/comm/work.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace hptrain::comm {
namespace {

class DoneWork : public Work {
 public:
  DoneWork(absl::Status status, int64_t sent, int64_t received)
      : Work(std::chrono::milliseconds(0)), status_(std::move(status)) {
    SetResult(sent, received);
  }
  bool IsCompleted() const override { return true; }
  absl::Status Wait(std::chrono::milliseconds) override { return status_; }

 private:
  const absl::Status status_;
};

class ThenWork : public Work {
 public:
  ThenWork(std::shared_ptr<Work> inner, std::function<absl::Status()> then)
      : Work(inner->timeout()), inner_(std::move(inner)), then_(std::move(then)) {}
  bool IsCompleted() const override { return inner_->IsCompleted(); }
  absl::Status Wait(std::chrono::milliseconds timeout) override {
    absl::Status status = inner_->Wait(timeout);
    if (absl::IsDeadlineExceeded(status) && !inner_->IsCompleted()) return status;
    std::lock_guard<std::mutex> lock(mu_);
    if (!ran_) {
      ran_ = true;
      SetResult(inner_->bytes_sent(), inner_->bytes_received(), inner_->seconds());
      status_ = status.ok() ? then_() : status;
    }
    return status_;
  }

 private:
  const std::shared_ptr<Work> inner_;
  const std::function<absl::Status()> then_;
  std::mutex mu_;
  bool ran_ = false;
  absl::Status status_;
};

}  // namespace

std::shared_ptr<Work> Work::Then(std::shared_ptr<Work> inner,
                                 std::function<absl::Status()> then) {
  return std::make_shared<ThenWork>(std::move(inner), std::move(then));
}

std::shared_ptr<Work> Work::Done(absl::Status status, int64_t bytes_sent,
                                 int64_t bytes_received) {
  if (!status.ok()) bytes_sent = bytes_received = 0;
  return std::make_shared<DoneWork>(std::move(status), bytes_sent, bytes_received);
}

bool HostWork::IsCompleted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

absl::Status HostWork::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
    return absl::DeadlineExceededError(
        absl::StrCat("collective did not complete within ", timeout.count(), " ms"));
  }
  return status_;
}

void HostWork::Complete(absl::Status status, int64_t sent, int64_t received, double seconds) {
  if (!status.ok()) sent = received = 0;
  SetResult(sent, received, seconds);
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    status_ = std::move(status);
  }
  cv_.notify_all();
}

}  // namespace hptrain::comm
