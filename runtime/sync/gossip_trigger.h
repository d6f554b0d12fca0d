// GossipTrigger: when a gossip worker asks for an exchange (docs/algorithms.md §4b).
//
// Adaptive (period 0): after each local step, s += 1 and δ = ||x − x_ref||₂ / (||x_ref||₂ + 1e-12),
// x_ref being the model at the last exchange (fp64 accumulation); an exchange is due when
// (δ ≥ θ and s ≥ T_min) or s ≥ T_max. Fixed period p (gossiping SGD, the baseline): due when
// s ≥ p. Reset (after an exchange) sets x_ref ← x, s ← 0, δ ← 0.
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
};

class GossipTrigger {
 public:
  explicit GossipTrigger(const GossipTriggerOptions& options) : options_(options) {}

  // False when no exchange can ever be due (θ = +inf, no T_max, no period).
  bool can_fire() const;

  // x_ref ← x, s ← 0, δ ← 0.
  void Reset(absl::Span<const float> x);

  // After one local step on x: s += 1, δ updated; true when an exchange is due.
  bool Step(absl::Span<const float> x);

  double delta() const { return delta_; }   // δ at the last Step (0 when not computed)
  int64_t steps() const { return steps_; }  // s

 private:
  GossipTriggerOptions options_;
  std::vector<float> reference_;  // x_ref
  double reference_norm_ = 0;     // ||x_ref||₂
  int64_t steps_ = 0;
  double delta_ = 0;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_GOSSIP_TRIGGER_H_
