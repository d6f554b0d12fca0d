#include "runtime/sync/compression_gate.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/status.h"

namespace hptrain::sync {

void CompressionGate::Start(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (restored_) return;  // the checkpoint's decision stands
  start_ = step;
  choice_ = Choice::kProbing;
  measured_.assign(static_cast<size_t>(options_.probe_steps - 1), StepTiming());
  compute_ = comm_seconds_ = exposed_ = 0;
}

void CompressionGate::Record(const StepTiming& timing) {
  std::lock_guard<std::mutex> lock(mu_);
  // The window's first step carries one-time costs (allocations, connections): left out.
  if (choice_ != Choice::kProbing || timing.step <= start_ ||
      timing.step >= start_ + options_.probe_steps) {
    return;
  }
  const size_t i = static_cast<size_t>(timing.step - start_ - 1);
  if (i < measured_.size()) measured_[i] = timing;
}

absl::StatusOr<AgreedTimes> AgreeTimes(comm::Communicator* comm,
                                       const std::vector<StepTiming>& own) {
  // Every rank's times, each in its own slots: [rank][step][compute, comm, exposed].
  const size_t steps = own.size();
  const int ranks = comm->size();
  std::vector<float> all(static_cast<size_t>(ranks) * steps * 3, 0.0f);
  float* mine = all.data() + static_cast<size_t>(comm->rank()) * steps * 3;
  for (size_t i = 0; i < steps; ++i) {
    mine[3 * i] = static_cast<float>(own[i].compute_seconds);
    mine[3 * i + 1] = static_cast<float>(own[i].comm_seconds);
    mine[3 * i + 2] = static_cast<float>(own[i].exposed_comm_seconds);
  }
  HPTRAIN_RETURN_IF_ERROR(comm->AllReduceSum(all.data(), all.size()), "agreeing on the times");
  double compute = 0, communication = 0, exposed = 0;
  for (size_t i = 0; i < steps; ++i) {
    float least = 0;
    for (int r = 0; r < ranks; ++r) {
      const float* t = all.data() + (static_cast<size_t>(r) * steps + i) * 3;
      compute += t[0];
      communication += t[1];
      least = r == 0 ? t[2] : std::min(least, t[2]);
    }
    exposed += least;
  }
  const double n = static_cast<double>(std::max<size_t>(steps, 1));
  AgreedTimes agreed;
  agreed.compute = compute / ranks / n;
  agreed.comm = communication / ranks / n;
  agreed.exposed = exposed / n;
  return agreed;
}

absl::StatusOr<CompressionGate::Choice> CompressionGate::Decide(int64_t step) {
  std::unique_lock<std::mutex> lock(mu_);
  if (choice_ != Choice::kProbing || step < start_ + options_.probe_steps) return choice_;
  const std::vector<StepTiming> measured = measured_;
  lock.unlock();  // Record is not called during the exchange, but the all-reduce may take long
  absl::StatusOr<AgreedTimes> agreed_or = AgreeTimes(comm_, measured);
  if (!agreed_or.ok()) return Annotate(agreed_or.status(), "the probe's times");
  const AgreedTimes& agreed = *agreed_or;
  lock.lock();
  compute_ = agreed.compute;
  comm_seconds_ = agreed.comm;
  exposed_ = agreed.exposed;
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
      "exposed communication %.0f %% of compute (%.2f of %.2f ms per step, the least over %d "
      "ranks in each step; communication %.2f ms; steps %d-%d) %s %.0f %%",
      compute_ > 0 ? 100.0 * exposed_ / compute_ : 0.0, 1e3 * exposed_, 1e3 * compute_,
      comm_->size(), 1e3 * comm_seconds_, start_ + 1, start_ + options_.probe_steps - 1,
      compressed ? ">" : "<=", 100.0 * options_.compress_above);
}

std::string CompressionGate::Decision(const std::string& compressed,
                                      const std::string& note) const {
  switch (choice()) {
    case Choice::kProbing:
      return describe();
    case Choice::kCompressed:
      return absl::StrCat("picked ", compressed, note, ": ", describe());
    case Choice::kDense:
      break;
  }
  return absl::StrCat("picked fp32 (ssgd's all-reduce)", note, ": ", describe());
}

void CompressionGate::Resume(int64_t step,
                             const std::map<std::string, std::vector<float>>& restored,
                             const std::string& section) {
  if (auto it = restored.find(section); it != restored.end()) Restore(it->second);
  Start(step);
}

void CompressionGate::SaveInto(const std::string& section,
                               std::map<std::string, std::vector<float>>* sections) const {
  if (std::vector<float> saved = Save(); !saved.empty()) (*sections)[section] = saved;
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
