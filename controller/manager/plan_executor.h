// PlanExecutor: carries out one reconcile Plan (controller/reconcile/plan.h) through the API.
//
// The order is the Plan's, and it stops at the first error:
//   1. status: PUT to the job's /status subresource, carrying the resourceVersion the Plan was
//      computed from. A job changed since (a newer spec, or a status write that the cache has not
//      shown yet) is a 409 Conflict: the Plan was made from stale state and is dropped whole;
//      the caller requeues and the next pass starts from the newer job. A job gone (404) ends
//      the Plan successfully: there is nothing left to reconcile.
//   2. events on the TrainingJob, handed to the EventRecorder (asynchronous, best effort), as
//      soon as the status they go with is stored: the next pass, computed from that status,
//      does not repeat them, so an error in a later step must not lose them. (plan.h lists
//      events after the creates; what it requires is that they follow the status write.)
//   3. deletes, each with the Plan's uid (and resourceVersion) precondition, background
//      propagation. NotFound is done; so is a uid precondition conflict, which means the name now
//      belongs to a newer object and the one to delete is gone.
//   4. creates, in order; AlreadyExists is done (the next pass sees the object). A PodGroup
//      whose kind is not installed (404) is FailedPrecondition, also said on the job as a
//      Warning event PodGroupUnavailable.
//   5. delete_job: the TrainingJob itself, uid precondition, background propagation; NotFound is
//      done.
// requeue_after is the caller's (the work queue's) business.
//
// Thread-safety: Execute may run concurrently for different jobs; the executor holds no state
// of its own. Blocking: one API request at a time, each bounded by the client's timeout.
#ifndef HPTRAIN_CONTROLLER_MANAGER_PLAN_EXECUTOR_H_
#define HPTRAIN_CONTROLLER_MANAGER_PLAN_EXECUTOR_H_

#include "absl/status/status.h"
#include "controller/kube/client.h"
#include "controller/kube/event_recorder.h"
#include "controller/reconcile/plan.h"
#include "nlohmann/json.hpp"

namespace hptrain::manager {

class PlanExecutor {
 public:
  // Neither pointer is owned; both must outlive the executor. `recorder` may be null (events
  // are then dropped).
  PlanExecutor(kube::Client* client, kube::EventRecorder* recorder)
      : client_(client), recorder_(recorder) {}

  // Executes `plan`, computed from `job` (the TrainingJob as the reconciler saw it). Returns OK
  // when every step is done (or the job is gone), else the first API error annotated with the
  // step ("create Pod team-a/j-worker-1: ..."): IsConflict for a stale job, Unavailable for a
  // transport failure, and so on (kube/api_error.h).
  absl::Status Execute(const nlohmann::json& job, const reconcile::Plan& plan);

 private:
  // Step 1; sets *job_gone when the job no longer exists.
  absl::Status WriteStatus(const nlohmann::json& job, const nlohmann::json& status, bool* job_gone);
  absl::Status DeleteObject(const reconcile::ObjectRef& ref);
  absl::Status CreateObject(const nlohmann::json& object);

  kube::Client* const client_;
  kube::EventRecorder* const recorder_;
};

}  // namespace hptrain::manager

#endif  // HPTRAIN_CONTROLLER_MANAGER_PLAN_EXECUTOR_H_
