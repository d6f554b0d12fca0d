#include "runtime/sync/gossip_trigger.h"

#include <cmath>

namespace hptrain::sync {

bool GossipTrigger::can_fire() const {
  return options_.period > 0 || options_.max_interval > 0 || std::isfinite(options_.threshold);
}

void GossipTrigger::Reset(absl::Span<const float> x) {
  reference_.assign(x.begin(), x.end());
  double sum = 0;
  for (float v : x) sum += static_cast<double>(v) * v;
  reference_norm_ = std::sqrt(sum);
  steps_ = 0;
  delta_ = 0;
}

bool GossipTrigger::Step(absl::Span<const float> x) {
  ++steps_;
  if (reference_.size() != x.size()) reference_.assign(x.size(), 0.0f);  // never Reset: x_ref = 0
  if (options_.period > 0) return steps_ >= options_.period;
  if (options_.max_interval > 0 && steps_ >= options_.max_interval) return true;
  if (steps_ < options_.min_interval || !std::isfinite(options_.threshold)) return false;
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - reference_[i];
    sum += d * d;
  }
  delta_ = std::sqrt(sum) / (reference_norm_ + 1e-12);
  return delta_ >= options_.threshold;
}

}  // namespace hptrain::sync
