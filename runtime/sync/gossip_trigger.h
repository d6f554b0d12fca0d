// GossipTrigger: when a gossip worker asks for an exchange (docs/algorithms.md §4b).
//
// Adaptive (period 0): after each local step, s += 1 and δ = ||x − x_ref||₂ / (||x_ref||₂ + 1e-12),
// x_ref being the model at the last exchange (fp64 accumulation); an exchange is due when
// (δ ≥ θ and s ≥ T_min) or s ≥ T_max. Fixed period p (gossiping SGD, the baseline): due when
// s ≥ p. Reset (after an exchange) sets x_ref ← x, s ← 0, δ ← 0.
//
// Self-calibration (`calibrate`, §4b, §4g; the job's default unless it sets `threshold` or
// `period`): for the first calibration_steps steps the trigger runs with period
// calibration_period (the target interval K), computing δ at each firing (before the exchange)
// and recording it, so the window itself requests an exchange every K steps; at the end of that
// window θ = calibration_factor · median(δ) (κ = 1 by default: the median change over K steps),
// and the adaptive rule above takes over with that θ (T_min and T_max as set), requesting an
// exchange when the model has moved as far as it typically moves in K steps. A window in which
// this worker never fired (every exchange requested by its peers) runs on until it has fired
// once. Each worker calibrates its own θ, from its own δ values; a restarted worker calibrates
// again.
#ifndef HPTRAIN_RUNTIME_SYNC_GOSSIP_TRIGGER_H_
#define HPTRAIN_RUNTIME_SYNC_GOSSIP_TRIGGER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace hptrain::sync {

struct GossipTriggerOptions {
  double threshold = 0.01;    // θ, relative L2 change; +inf: never by change
  int64_t min_interval = 1;   // T_min
  int64_t max_interval = 64;  // T_max; 0: no forced exchange
  int64_t period = 0;         // p > 0: fixed-period mode (θ, T_min and T_max unused)
  // θ from the first steps' δ (threshold then unused); not with period. Off here; a job's
  // default is on unless it sets threshold or period (GossipOptionsFor).
  bool calibrate = false;
  int64_t calibration_steps = 200;
  int64_t calibration_period = 5;   // K, the job's targetInterval
  double calibration_factor = 1.0;  // κ
};

class GossipTrigger {
 public:
  explicit GossipTrigger(const GossipTriggerOptions& options)
      : options_(options), threshold_(options.threshold) {}

  // False when no exchange can ever be due (θ = +inf, no T_max, no period, no calibration).
  bool can_fire() const;

  // x_ref ← x, s ← 0, δ ← 0.
  void Reset(absl::Span<const float> x);

  // After one local step on x: s += 1, δ updated; true when an exchange is due.
  bool Step(absl::Span<const float> x);

  double delta() const { return delta_; }   // δ at the last Step (0 when not computed)
  int64_t steps() const { return steps_; }  // s

  // θ in force: the option's, or the calibrated one once calibration ended.
  double threshold() const { return threshold_; }
  // True while the calibration window runs (calibrate set, θ not yet calibrated).
  bool calibrating() const { return options_.calibrate && !calibrated_; }
  // True once θ was calibrated; then calibration_deltas() holds the δ values it came from.
  bool calibrated() const { return calibrated_; }
  const std::vector<double>& calibration_deltas() const { return calibration_deltas_; }

 private:
  double Delta(absl::Span<const float> x) const;  // ||x − x_ref||₂ / (||x_ref||₂ + 1e-12)
  void FinishCalibration();

  GossipTriggerOptions options_;
  double threshold_;               // θ in force
  int64_t total_steps_ = 0;        // Step calls since construction (the calibration window)
  bool calibrated_ = false;
  std::vector<double> calibration_deltas_;  // δ at each firing of the calibration window
  std::vector<float> reference_;  // x_ref
  double reference_norm_ = 0;     // ||x_ref||₂
  int64_t steps_ = 0;
  double delta_ = 0;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_GOSSIP_TRIGGER_H_
