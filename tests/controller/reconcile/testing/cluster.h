// A tiny in-memory stand-in for the API server, kubelet and controller loop, for the
// reconciler's tests: it holds an Observed, runs Reconcile on it and applies Plans the way the
// controller loop would (plan.h order), checking on the way that a Plan never creates a taken
// name and never deletes what is gone, already terminating or of another uid.
//
// Deletion is graceful, as on a real cluster: a deleted object first gets a deletionTimestamp
// (a running pod killed that way turns Failed, as kubelets since Kubernetes 1.27 report it) and
// disappears only at FinishDeletions().
#ifndef HPTRAIN_TESTS_CONTROLLER_RECONCILE_TESTING_CLUSTER_H_
#define HPTRAIN_TESTS_CONTROLLER_RECONCILE_TESTING_CLUSTER_H_

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "controller/reconcile/plan.h"
#include "controller/reconcile/reconciler.h"

namespace hptrain::reconcile::testing {

// 2027-01-15T08:00:00Z.
absl::Time StartTime();

class Cluster {
 public:
  explicit Cluster(Json job, absl::Time now = StartTime());

  Observed& observed() { return observed_; }
  Json& job() { return observed_.job; }
  const Json& status() const { return observed_.job["status"]; }
  Options& options() { return options_; }
  absl::Time now() const { return now_; }
  void Advance(absl::Duration d) { now_ += d; }

  // Every event applied so far, in order.
  const std::vector<Event>& events() const { return events_; }
  bool job_deleted() const { return job_deleted_; }

  Plan Reconcile() const;

  // Applies the first `deletes` deletes and the first `creates` creates of `plan`, its status
  // when `status` is set, and (only when everything was applied) its events and job deletion:
  // a controller killed part-way through a Plan.
  void Apply(const Plan& plan, bool status = true,
             size_t deletes = std::numeric_limits<size_t>::max(),
             size_t creates = std::numeric_limits<size_t>::max());

  // Objects being deleted disappear.
  void FinishDeletions();
  bool AnyTerminating() const;

  // Reconcile + Apply (+ FinishDeletions when a pass writes nothing) until a pass writes
  // nothing and nothing is terminating. Returns the number of passes; fails the current test
  // if that takes more than `max_passes`.
  int Settle(int max_passes = 8);

  // The kubelet's side: set a pod's phase (Running pods also get Ready=True and a node).
  void SetPodPhase(const std::string& name, const std::string& phase);
  void SetAllPods(const std::string& phase);
  void FailPod(const std::string& name, const std::string& reason = "Error", int exit_code = 1);

  // The named object among pods/services/secrets, or nullptr.
  Json* Pod(const std::string& name);
  // `api_version` "" = any (PodGroups of two providers share kind and name).
  Json* Object(const std::string& kind, const std::string& name,
               const std::string& api_version = "");
  // Names of pods that exist (terminating ones included), sorted.
  std::vector<std::string> PodNames() const;
  // Their restart generation annotations, in the same order.
  std::vector<std::string> RestartGenerations();

 private:
  std::vector<Json>* ListOf(const std::string& kind);

  Observed observed_;
  Options options_;
  absl::Time now_;
  std::vector<Event> events_;
  bool job_deleted_ = false;
  int next_uid_ = 1;
};

}  // namespace hptrain::reconcile::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_RECONCILE_TESTING_CLUSTER_H_
