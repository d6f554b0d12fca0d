// LocalRebalancer: the `hptrain run` side of H-PS batch allocation (spec.rebalance.enabled). The
// launcher hands it every progress snapshot it polls from the coordinator; it turns the growth of
// each rank's compute time into per-step measurements for the balancer (runtime/sched) and, every
// rebalance.intervalSeconds (or intervalSteps), says which allocation to set, if any. The
// coordinator then makes every worker switch at the same step (GetAllocationRequest.at_step).
//
// A measurement is taken only over stretches where the rank's batch size stayed the same, so a
// switch never mixes two sizes into one number. The balancer gets one measurement per rank and
// batch size per interval, the median compute time per step over the interval (weighted by
// steps): snapshots come about once a step and are noisy, and a median, unlike a mean, does not
// blend the two speeds of an interval in which a worker's speed changed, so the model follows
// a change of half or more whole at once (drift_factor in throughput_model.h), within one or two
// intervals, and averages smaller differences over several.
// Pure logic, no I/O; not thread-safe.
#ifndef HPTRAIN_RUNTIME_JOB_LOCAL_REBALANCER_H_
#define HPTRAIN_RUNTIME_JOB_LOCAL_REBALANCER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/job/job_spec.h"
#include "runtime/sched/balancer.h"

namespace hptrain::job {

struct RankProgress {
  int rank = 0;
  int64_t step = 0;            // steps done
  int batch_size = 0;          // the batch of the last step
  double compute_seconds = 0;  // total compute time so far (emulated slowdown included)
};

class LocalRebalancer {
 public:
  explicit LocalRebalancer(const JobSpec& spec);

  // Feeds one snapshot taken at `now_seconds` (any monotonic clock). Returns the allocation to
  // set (rank order) when an interval has passed and the balancer proposes a change.
  std::optional<std::vector<int>> Update(const std::vector<RankProgress>& ranks,
                                         double now_seconds);

  // Rebalances proposed so far.
  int changes() const { return changes_; }

 private:
  RebalanceSpec options_;
  sched::Balancer balancer_;
  std::vector<std::string> names_;
  std::vector<int> current_;
  struct Stretch {  // the measurements at one batch size within the current interval
    std::vector<std::pair<double, int64_t>> samples;  // (seconds per step, steps) per snapshot
    int64_t steps = 0;
    double Median() const;  // of seconds per step, weighted by steps
  };
  std::map<int, RankProgress> last_;
  std::map<int, std::map<int, Stretch>> interval_;  // rank -> batch size -> stretch
  double last_decision_seconds_ = -1;
  int64_t last_decision_step_ = 0;
  int changes_ = 0;
};

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_LOCAL_REBALANCER_H_
