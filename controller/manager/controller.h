// Controller: the TrainingJob controller loop. It wires the kube client, the informers
// (job_caches.h), a rate-limited work queue, the pure reconciler (controller/reconcile) and the
// plan executor (plan_executor.h), optionally behind Lease leader election.
//
// The loop:
//   1. Informers list and watch TrainingJobs and the controller's pods, Services and Secrets in
//      the watched namespaces. Every change puts the key of the job concerned into the queue
//      (de-duplicated: a burst of pod updates is one pass).
//   2. Reconciling starts only while this replica leads (always, without leader election) and
//      once every informer has synced. On taking the lead every cached job is queued.
//   3. `workers` threads pop keys. For each: read the job from the cache (gone: done), build the
//      reconciler's Observed from the caches plus a fresh random job token, call
//      reconcile::Reconcile, execute the Plan, then
//      For an elastic job (spec.elastic) that is not finished, the pass first reads its
//      coordinator's membership (GetJobStatus through `membership`, with the token of the job's
//      Secret) into Observed::membership, and after reconciling sends the Plan's membership
//      requests (ChangeMembership REMOVE / LOST), best effort: a failure is logged and the next
//      pass asks again; a request the coordinator took is not repeated within the same epoch.
//        - success: forget the key's failures; queue it again after the Plan's requeue_after,
//          or after resync_period at the latest (a periodic check even when nothing changes);
//        - failure (a 409 from a stale cache included): count the error and requeue the key with
//          per-key exponential backoff.
//      A key is never processed by two workers at once (kube::WorkQueue).
//   4. Losing the lease stops the workers (each finishes the pass in flight) before another
//      replica can take over; Stop() does the same, releases the lease unless told not to, stops
//      the informers and flushes pending events.
//
//   metrics::Registry registry;
//   ControllerOptions options;
//   options.registry = &registry;
//   Controller controller(client.get(), std::move(options));
//   HPTRAIN_RETURN_IF_ERROR(controller.Start());
//   controller.WaitForSync(absl::Seconds(30));
//   ...
//   controller.Stop();
//
// Thread-safety: Start/Stop are for the owner's thread; the accessors are safe from any thread.
#ifndef HPTRAIN_CONTROLLER_MANAGER_CONTROLLER_H_
#define HPTRAIN_CONTROLLER_MANAGER_CONTROLLER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/kube/client.h"
#include "controller/kube/event_recorder.h"
#include "controller/kube/leader_election.h"
#include "controller/kube/rate_limiter.h"
#include "controller/kube/work_queue.h"
#include "controller/manager/controller_metrics.h"
#include "controller/manager/job_caches.h"
#include "controller/manager/membership_client.h"
#include "controller/manager/plan_executor.h"
#include "controller/manager/rebalance_loop.h"
#include "controller/manager/worker_readings.h"
#include "controller/reconcile/reconciler.h"
#include "runtime/metrics/registry.h"

namespace hptrain::manager {

struct ControllerOptions {
  // Namespaces to watch; empty = all.
  std::vector<std::string> namespaces;
  // Worker threads reconciling in parallel (different jobs); at least 1.
  int workers = 2;
  reconcile::Options reconcile;

  // Leader election: nullopt reconciles at once. Otherwise lease_namespace and identity are
  // required; the callbacks are the controller's own (any set here are replaced).
  std::optional<kube::LeaderElectionConfig> leader_election;

  // Longest time between two passes over an unchanged job.
  absl::Duration resync_period = absl::Minutes(10);
  // Informers: server-side watch timeout, and the backoff between failed lists / watches.
  int watch_timeout_seconds = 300;
  kube::BackoffOptions informer_backoff;
  // How often the informer of a PodGroup kind that is not installed looks again (job_caches.h).
  absl::Duration absent_kind_relist = absl::Minutes(1);
  // Retry delays of failed passes; null: kube::DefaultControllerRateLimiter().
  std::unique_ptr<kube::RateLimiter> rate_limiter;
  kube::EventRecorderOptions events;  // instance defaults to the lease identity
  absl::Duration event_flush_timeout = absl::Seconds(2);  // Stop() waits this long for events

  // Where the metrics live (not owned, must outlive the controller); null: a registry of the
  // controller's own (registry()).
  metrics::Registry* registry = nullptr;
  // Worker throughput for status; empty: the rebalance loop's readings, if any. Called on
  // worker threads.
  std::function<reconcile::WorkerMetricsMap(const nlohmann::json& job)> worker_metrics;
  // Batch rebalancing of jobs with spec.rebalance.enabled (rebalance_loop.h), while leading:
  // makes the source of worker readings from the controller's caches (e.g. NewScrapedReadings
  // or NewPrometheusReadings); empty: no rebalancing.
  std::function<std::unique_ptr<WorkerReadingsSource>(const JobCaches* caches)> worker_readings;
  RebalanceLoopOptions rebalance;
  // Elastic jobs' coordinators (membership_client.h); null: gRPC to each job's ps pod, at
  // rebalance.coordinator_address when set, each call bounded by rebalance.rpc_timeout.
  std::shared_ptr<MembershipClient> membership;
  // The reconciler's clock; empty: absl::Now.
  std::function<absl::Time()> now;
};

class Controller {
 public:
  // `client` is not owned and must outlive the controller.
  Controller(kube::Client* client, ControllerOptions options);
  // Stops the controller if it runs.
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Starts the informers and either the leader election or the workers, and returns.
  // InvalidArgument for bad options (workers < 1, leader election without identity or
  // namespace, or with unordered durations); FailedPrecondition when already started.
  absl::Status Start();

  // Stops the election (releasing the lease when the config says so), waits for the passes in
  // flight, stops the informers and flushes the event recorder (up to event_flush_timeout).
  // Idempotent. Blocks for at most one API request per worker plus the release.
  void Stop();

  // Every informer has delivered its first list.
  bool HasSynced() const { return caches_.HasSynced(); }
  bool WaitForSync(absl::Duration timeout) const { return caches_.WaitForSync(timeout); }
  // This replica reconciles (holds the lease, or runs without election).
  bool IsLeader() const { return leading_.load(); }

  // Reconcile passes finished so far (successful or not), for tests and logs.
  int64_t reconciles() const { return reconciles_.load(); }
  const JobCaches& caches() const { return caches_; }
  metrics::Registry& registry() { return *registry_; }
  const ControllerMetrics& metrics() const { return metrics_; }
  // The rebalance loop; null without options.worker_readings.
  const RebalanceLoop* rebalance_loop() const { return rebalance_.get(); }

 private:
  void Enqueue(const std::string& key);
  void StartLeading();
  void StopLeading();
  void StartWorkers();
  void StopWorkers();
  void WorkerLoop();
  // One pass over `key`, with its requeue.
  void Process(const std::string& key);
  absl::Status ReconcileKey(const std::string& key, std::optional<absl::Duration>* requeue_after);
  absl::Time Now() const { return options_.now ? options_.now() : absl::Now(); }
  // Elastic jobs: the coordinator's membership (nullopt when it cannot be read), and the Plan's
  // requests sent to it.
  std::optional<reconcile::CoordinatorMembership> ReadMembership(
      const nlohmann::json& job, const reconcile::Observed& observed);
  void SendMembership(const nlohmann::json& job, const reconcile::Observed& observed,
                      const reconcile::Plan& plan);

  // Membership requests the coordinator took, per job key: not sent again in the same epoch.
  struct SentRequests {
    std::string uid;
    int64_t epoch = -1;
    std::set<std::pair<int, int>> sent;  // (kind, slot)
  };
  absl::Mutex membership_mu_;
  std::map<std::string, SentRequests> membership_sent_ ABSL_GUARDED_BY(membership_mu_);

  kube::Client* const client_;
  ControllerOptions options_;
  std::unique_ptr<metrics::Registry> own_registry_;
  metrics::Registry* const registry_;
  ControllerMetrics metrics_;
  kube::WorkQueue queue_;
  kube::EventRecorder recorder_;
  PlanExecutor executor_;
  JobCaches caches_;  // after queue_: its handlers feed the queue
  std::unique_ptr<RebalanceLoop> rebalance_;  // after caches_ and executor_, which it uses
  std::unique_ptr<kube::LeaderElector> elector_;

  std::atomic<bool> leading_{false};
  std::atomic<bool> workers_stop_{false};
  std::atomic<int64_t> reconciles_{0};

  absl::Mutex lifecycle_mu_;  // Start/Stop
  bool started_ ABSL_GUARDED_BY(lifecycle_mu_) = false;
  absl::Mutex workers_mu_;  // the worker threads; taken by the owner and the elector's thread
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(workers_mu_);
};

}  // namespace hptrain::manager

#endif  // HPTRAIN_CONTROLLER_MANAGER_CONTROLLER_H_
