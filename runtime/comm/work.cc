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

}  // namespace

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
