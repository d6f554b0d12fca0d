#include "runtime/sync/gossip_trigger.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hptrain::sync {

bool GossipTrigger::can_fire() const {
  return options_.period > 0 || options_.max_interval > 0 || options_.calibrate ||
         std::isfinite(threshold_);
}

void GossipTrigger::Reset(absl::Span<const float> x) {
  reference_.assign(x.begin(), x.end());
  double sum = 0;
  for (float v : x) sum += static_cast<double>(v) * v;
  reference_norm_ = std::sqrt(sum);
  steps_ = 0;
  delta_ = 0;
}

double GossipTrigger::Delta(absl::Span<const float> x) const {
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - reference_[i];
    sum += d * d;
  }
  return std::sqrt(sum) / (reference_norm_ + 1e-12);
}

void GossipTrigger::FinishCalibration() {
  calibrated_ = true;
  std::vector<double> sorted = calibration_deltas_;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  threshold_ = options_.calibration_factor * median;
  std::fprintf(stderr,
               "gossip: calibrated threshold θ = %.6g from %zu exchanges (median δ %.6g, an "
               "exchange requested every %lld steps over the first %lld)\n",
               threshold_, n, median, static_cast<long long>(options_.calibration_period),
               static_cast<long long>(total_steps_));
}

bool GossipTrigger::Step(absl::Span<const float> x) {
  ++steps_;
  ++total_steps_;
  if (reference_.size() != x.size()) reference_.assign(x.size(), 0.0f);  // never Reset: x_ref = 0
  if (options_.period > 0) return steps_ >= options_.period;
  if (calibrating()) {
    bool due = false;
    if (steps_ >= std::max<int64_t>(options_.calibration_period, 1)) {
      delta_ = Delta(x);
      calibration_deltas_.push_back(delta_);
      due = true;
    }
    // A worker whose every exchange its peers requested has no δ yet: the window runs on.
    if (total_steps_ >= options_.calibration_steps && !calibration_deltas_.empty()) {
      FinishCalibration();
    }
    return due;
  }
  if (options_.max_interval > 0 && steps_ >= options_.max_interval) return true;
  if (steps_ < options_.min_interval || !std::isfinite(threshold_)) return false;
  delta_ = Delta(x);
  return delta_ >= threshold_;
}

}  // namespace hptrain::sync
