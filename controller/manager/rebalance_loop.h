// RebalanceLoop: the controller side of H-PS batch allocation (docs/algorithms.md §5b part 1) for
// TrainingJobs with spec.rebalance.enabled.
//
// Every `period` the loop takes one reading of the workers of every such Running job
// (worker_readings.h) and, per job:
//   1. asks the job's coordinator (the ps pod, authenticated with the token of the job's
//      Secret) for its allocation, the truth about what the workers compute. A coordinator that
//      restarted with the gang hands out the initial allocation again: the job's balancer then
//      starts over, and status is brought back in line;
//   2. feeds the reading to the job's balancer (runtime/job/local_rebalancer.h, the same logic as
//      `hptrain run`), which measures per-step compute time at each batch size and, every
//      rebalance.intervalSeconds (or intervalSteps), proposes a new allocation when it improves
//      the predicted step time by more than the hysteresis;
//   3. on a proposal calls SetAllocation (every worker switches at the same step boundary), then
//      records it in status (per-worker batchSize, allocationGeneration, lastRebalanceTime,
//      condition Rebalanced) and emits a Normal Rebalanced event (reconcile/allocation.h),
//      through the PlanExecutor and therefore with the job's resourceVersion: a status write
//      that loses a race with the reconciler is retried on the next pass, when status and
//      coordinator disagree.
// The readings also give the reconciler each worker's samples/s, step, epoch, resume step, training
// loss and evaluation metrics (MetricsFor). Jobs that do not rebalance are read too while a
// restarted gang's resume step is awaited (status.restarts > 0 with spec.checkpoint.path, and
// status.resume not yet of this restart), and otherwise once every `status_period`, for their
// status only. After each job's reading at most every `status_period` the loop calls
// `on_status` so that the reconciler writes the new values into status (trainLoss, evaluation,
// step, samplesPerSecond): a bounded number of status writes, whatever `period`.
// A job whose readings keep failing (the source cannot be read, cannot read some of its workers,
// or has nothing for them) gets a Warning event MetricsUnavailable naming the source and the
// error, through the PlanExecutor, at most once per episode and `metrics_warnings.repeat`
// (reconcile/metrics_warnings.h); failures are also logged, once until the error changes.
//
// Thread-safety: Start/Stop are for the owner's thread; Tick runs on the loop's thread (or the
// test's, when not started); MetricsFor and the counters are safe from any thread.
#ifndef HPTRAIN_CONTROLLER_MANAGER_REBALANCE_LOOP_H_
#define HPTRAIN_CONTROLLER_MANAGER_REBALANCE_LOOP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "controller/manager/job_caches.h"
#include "controller/manager/plan_executor.h"
#include "controller/manager/worker_readings.h"
#include "controller/reconcile/metrics_warnings.h"
#include "controller/reconcile/worker_status.h"
#include "runtime/metrics/registry.h"

namespace hptrain::job {
class LocalRebalancer;
}
namespace hptrain::ps {
class CoordinatorClient;
}

namespace hptrain::manager {

struct RebalanceLoopOptions {
  absl::Duration period = absl::Seconds(2);  // between two readings
  // host:port of a job's coordinator; empty: the ps pod's in-cluster DNS name, port 29400
  // (what the pods themselves use, reconcile/desired_objects.h).
  std::function<std::string(const nlohmann::json& job)> coordinator_address;
  absl::Duration rpc_timeout = absl::Seconds(5);
  int lead_steps = 2;  // SetAllocationRequest.lead_steps
  // Called (on the loop's thread; must not block) with a job's key when one of its workers
  // reports a new hptrain_resumed_from_step while status does not record the resume yet: the
  // controller then reconciles the job, which records it (reconcile/resume_record.h).
  std::function<void(const std::string& key)> on_resumed;
  // How often every Running job is read for its status, and `on_status` called with its key (on
  // the loop's thread; must not block); the controller then reconciles the job.
  absl::Duration status_period = absl::Seconds(15);
  std::function<void(const std::string& key)> on_status;
  // When a job whose readings fail gets its Warning event MetricsUnavailable.
  reconcile::MetricsWarningPolicy metrics_warnings;
};

class RebalanceLoop {
 public:
  // None of the pointers is owned; all must outlive the loop. `rebalances` (may be null) counts
  // Rebalanced events.
  RebalanceLoop(const JobCaches* caches, std::unique_ptr<WorkerReadingsSource> source,
                PlanExecutor* executor, metrics::Counter* rebalances, RebalanceLoopOptions options);
  ~RebalanceLoop();
  RebalanceLoop(const RebalanceLoop&) = delete;
  RebalanceLoop& operator=(const RebalanceLoop&) = delete;

  // Starts the loop's thread (no-op when running).
  void Start();
  // Stops it and waits (at most one RPC or query in flight). Idempotent.
  void Stop();

  // One pass at `now`.
  void Tick(absl::Time now);

  // The last reading of `job`'s workers, by worker pod name (empty when none).
  reconcile::WorkerMetricsMap MetricsFor(const nlohmann::json& job) const;

  // Allocations set through a coordinator so far.
  int64_t allocations_set() const { return allocations_set_.load(); }
  std::string Describe() const { return source_->Describe(); }

 private:
  struct JobState;
  // The job's state, (re)built when the job's uid or generation changed; null when the spec does
  // not parse (the reconciler reports that).
  JobState* StateFor(const nlohmann::json& job);
  void TickJob(const nlohmann::json& job, const std::map<int, WorkerReading>& ranks,
               absl::Time now);
  // Records a failed reading of `job`; emits MetricsUnavailable when one is due.
  void ReadingFailed(const nlohmann::json& job, absl::Time now, absl::string_view error);
  // Writes `batch_sizes` to status with the Rebalanced event.
  void Record(const nlohmann::json& job, const std::vector<int>& batch_sizes, absl::Time now,
              const char* why);

  const JobCaches* const caches_;
  const std::unique_ptr<WorkerReadingsSource> source_;
  PlanExecutor* const executor_;
  metrics::Counter* const rebalances_;
  const RebalanceLoopOptions options_;

  std::map<std::string, std::unique_ptr<JobState>> jobs_;  // the loop's thread only
  std::map<std::string, absl::Time> last_status_;          // idem: by job key
  std::string last_error_;                                 // logged once until it changes
  reconcile::MetricsWarnings warnings_;                    // the loop's thread only

  mutable absl::Mutex mu_;
  std::map<std::string, reconcile::WorkerMetricsMap> metrics_ ABSL_GUARDED_BY(mu_);

  std::atomic<int64_t> allocations_set_{0};
  std::thread thread_;
  std::unique_ptr<absl::Notification> stop_;
};

}  // namespace hptrain::manager

#endif  // HPTRAIN_CONTROLLER_MANAGER_REBALANCE_LOOP_H_
