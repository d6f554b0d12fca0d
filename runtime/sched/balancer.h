// Balancer: H-PS heterogeneity-aware batch allocation (docs/algorithms.md §5b(1)). Given each worker's
// measured compute speed, it splits the fixed global batch B into per-worker batches b_i with
// Σ b_i = B so that every worker finishes its share of a step at the same time: the slowest
// worker no longer sets the pace of N workers.
//
//   * Each worker has a ThroughputModel (time against batch size, EWMA-smoothed, outliers set
//     aside), fed by Observe() with the compute time of its steps (data + forward + backward,
//     never waits for the network or for other workers).
//   * Optimal() minimizes the predicted step time max_i t_i(b_i) subject to min <= b_i <= max_i
//     (water-filling on the models, then largest-remainder rounding, then single-sample moves
//     off the slowest worker while they help).
//   * Propose() returns a new allocation only when it predicts a step time shorter by more than
//     the hysteresis (default 5 %) than the allocation in force, so noise does not make the
//     allocation flap. A gain of up to twice the hysteresis (`confirm_factor`) is applied only
//     when the proposal before it, against the same allocation, also took samples from the same
//     workers: one interval's noise proposes such gains in a random direction, a real difference
//     in the same one twice. A smaller gain, above 60 % of the hysteresis, is applied once it
//     has held in `persistent_rounds` consecutive proposals that take samples from the same
//     workers: a systematic imbalance of a few percent (one worker's CPU a little slower than
//     the others') otherwise stays forever, while noise moves the bottleneck from worker to
//     worker and rarely keeps a gain that long. A change of speed large enough to matter
//     (a worker twice as slow) predicts a larger gain and is followed at once. A changed worker set
//     (a worker joined or left) is always re-allocated: a leaving worker's share goes to the
//     others.
//   * A worker with no measurement yet is assumed as fast as the median measured worker; with
//     no measurements at all the split is equal (largest remainder, lower ranks first).
//
// Pure library: no libtorch, no Kubernetes, no I/O; the local launcher and the controller both
// feed it. Not thread-safe.
#ifndef HPTRAIN_RUNTIME_SCHED_BALANCER_H_
#define HPTRAIN_RUNTIME_SCHED_BALANCER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/sched/throughput_model.h"

namespace hptrain::sched {

struct BalancerOptions {
  int global_batch = 0;     // B
  int min_batch = 1;        // lower bound of every b_i (>= 0)
  int max_batch = 0;        // upper bound of every b_i; 0 = none (see also SetMaxBatch)
  double hysteresis = 0.05; // apply only when the predicted step time improves by more than this
  // ... or by more than persistent_fraction · hysteresis in `persistent_rounds` consecutive
  // proposals that take samples from the same workers (0 rounds: off). At 3 % and 4 rounds, in
  // 200 seeds each of the 10 %-noise property test and of the launcher's model settings under
  // 3 % noise, no seed changed the allocation more than twice after convergence; at 2 % and 4
  // rounds, 8 % and 16 % of the seeds did.
  double persistent_fraction = 0.6;
  int persistent_rounds = 4;
  // A gain above the hysteresis but below confirm_factor · hysteresis must show in two
  // consecutive proposals that take samples from the same workers (<= 1: off). In a simulation
  // of the rebalance benchmark (per-worker speeds drifting by 8 % from interval to interval, 200
  // seeds), 2 took the share of runs whose allocation re-converged within 3 intervals after a
  // change of slowdowns from 43 % to 59 % and the moves after it from 7.7 to 5.3, at 0.3 % less
  // throughput; tests/runtime/job/local_rebalancer_test.cc checks a like simulation.
  double confirm_factor = 2.0;
  ModelOptions model;
};

class Balancer {
 public:
  explicit Balancer(BalancerOptions options) : options_(options) {}

  // One measurement of `worker`: a step of `batch` samples took `seconds` of compute. Returns
  // false if it was set aside as an outlier (throughput_model.h).
  bool Observe(const std::string& worker, int batch, double seconds);
  // A per-worker upper bound (e.g. what fits in its GPU memory); 0 removes it.
  void SetMaxBatch(const std::string& worker, int max_batch);
  // Drops what is known of a worker that left.
  void Forget(const std::string& worker);

  // The allocation for `workers` (in rank order) that minimizes the predicted step time.
  // InvalidArgument when the bounds make Σ b_i = B impossible (N·min > B, or Σ max < B) or
  // `workers` is empty.
  absl::StatusOr<std::vector<int>> Optimal(const std::vector<std::string>& workers) const;

  // The allocation to switch to, or nullopt to keep `current` (the allocation in force, in the
  // same order as `workers`). A `current` of another length, with another sum or out of the
  // bounds is always replaced. Errors as Optimal(). Counts the rounds of a persistent gain, so
  // call it once per decision.
  absl::StatusOr<std::optional<std::vector<int>>> Propose(const std::vector<std::string>& workers,
                                                          const std::vector<int>& current);

  // max_i t_i(b_i) as the models predict it (seconds); 0 when nothing is measured.
  double PredictedStepSeconds(const std::vector<std::string>& workers,
                              const std::vector<int>& allocation) const;

  // The model of `worker`, or nullptr if it has no measurement.
  const ThroughputModel* model(const std::string& worker) const;

 private:
  struct Line {  // t(b) = fixed + per_sample * b
    double fixed = 0;
    double per_sample = 0;
    double Seconds(double b) const { return fixed + per_sample * b; }
  };
  std::vector<Line> Lines(const std::vector<std::string>& workers) const;
  int MaxFor(const std::string& worker) const;

  BalancerOptions options_;
  std::map<std::string, ThroughputModel> models_;
  std::map<std::string, int> max_batch_;
  // The run of proposals with a gain above persistent_fraction · hysteresis: against which
  // allocation, taking samples from which workers, how many so far.
  std::vector<int> streak_current_;
  std::vector<std::string> streak_donors_;
  int streak_ = 0;
};

// Largest-remainder rounding of non-negative shares to integers that sum to `total`, each
// within [lo[i], hi[i]] (callers guarantee feasibility). Ties go to lower indices.
std::vector<int> RoundLargestRemainder(const std::vector<double>& shares, int total,
                                       const std::vector<int>& lo, const std::vector<int>& hi);

}  // namespace hptrain::sched

#endif  // HPTRAIN_RUNTIME_SCHED_BALANCER_H_
