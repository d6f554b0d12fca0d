#include "runtime/sync/compression_gate.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/status.h"

namespace hptrain::sync {

void CompressionGate::Start(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (restored_) return;  // the checkpoint's decision stands
  start_ = step;
  choice_ = Choice::kProbing;
  compute_ = comm_seconds_ = exposed_ = 0;
  measured_steps_ = 0;
}

void CompressionGate::Record(const StepTiming& timing) {
  std::lock_guard<std::mutex> lock(mu_);
  // The window's first step carries one-time costs (allocations, connections): left out.
  if (choice_ != Choice::kProbing || timing.step <= start_ ||
      timing.step >= start_ + options_.probe_steps) {
    return;
  }
  compute_ += timing.compute_seconds;
  comm_seconds_ += timing.comm_seconds;
  exposed_ += timing.exposed_comm_seconds;
  ++measured_steps_;
}

absl::StatusOr<CompressionGate::Choice> CompressionGate::Decide(int64_t step) {
  std::unique_lock<std::mutex> lock(mu_);
  if (choice_ != Choice::kProbing || step < start_ + options_.probe_steps) return choice_;
  float sums[4] = {static_cast<float>(compute_), static_cast<float>(comm_seconds_),
                   static_cast<float>(exposed_), static_cast<float>(measured_steps_)};
  lock.unlock();  // Record is not called during the exchange, but the all-reduce may take long
  HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSum(sums, 4), "agreeing on the probe's times");
  lock.lock();
  const double steps = sums[3] > 0 ? sums[3] : 1.0;
  compute_ = sums[0] / steps;
  comm_seconds_ = sums[1] / steps;
  exposed_ = sums[2] / steps;
  choice_ = exposed_ > options_.compress_above * compute_ ? Choice::kCompressed : Choice::kDense;
  return choice_;
}

CompressionGate::Choice CompressionGate::choice() const {
  std::lock_guard<std::mutex> lock(mu_);
  return choice_;
}

std::string CompressionGate::describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (choice_ == Choice::kProbing) {
    return absl::StrCat("probing in fp32 until step ", start_ + options_.probe_steps);
  }
  const bool compressed = choice_ == Choice::kCompressed;
  if (restored_) return "decided before the checkpoint this run resumed from";
  return absl::StrFormat(
        "exposed communication %.0f %% of compute (%.2f of %.2f ms per step, communication "
        "%.2f ms, steps %d-%d, mean over %d ranks) %s %.0f %%",
        compute_ > 0 ? 100.0 * exposed_ / compute_ : 0.0, 1e3 * exposed_, 1e3 * compute_,
        1e3 * comm_seconds_, start_ + 1, start_ + options_.probe_steps - 1, comm_->size(),
      compressed ? ">" : "<=", 100.0 * options_.compress_above);
}

std::vector<float> CompressionGate::Save() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (choice_ == Choice::kProbing) return {};
  return {choice_ == Choice::kCompressed ? 1.0f : 0.0f};
}

void CompressionGate::Restore(const std::vector<float>& saved) {
  std::lock_guard<std::mutex> lock(mu_);
  if (saved.size() != 1) return;
  choice_ = saved[0] != 0 ? Choice::kCompressed : Choice::kDense;
  restored_ = true;
}

}  // namespace hptrain::sync
