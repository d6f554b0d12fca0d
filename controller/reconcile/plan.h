// Plan: what one reconcile pass decided, for the controller loop to carry out.
//
// The loop executes a Plan in this order, stopping at the first error (and requeueing the job
// with backoff):
//   1. status, when set: write it through the /status subresource (update with the job's
//      resourceVersion, or a merge patch of the whole status). Always first: the gang restart
//      protocol (gang_restart.h) depends on the new restart count being stored before any pod
//      is deleted.
//   2. deletes, in order, each with its uid as a precondition (a pod of the same name created
//      since is not touched); NotFound counts as done.
//   3. creates, in order (the Secret before the pods that mount it); AlreadyExists counts as
//      done, the next pass sees the object.
//   4. events, on the TrainingJob.
//   5. delete_job: delete the TrainingJob itself (uid precondition; background propagation).
//   6. membership (elastic jobs): ChangeMembership calls on the job's coordinator, best effort
//      (a failure is logged, never an error of the Plan); the controller loop sends them before
//      the writes above. They are no API writes: NoWrites() does not count them, and a pass
//      asks again for as long as the reason holds (a removed worker that has not left yet).
//   7. requeue_after: reconcile again after this delay even if nothing changes (a deadline or
//      a TTL is due). Watch events requeue the job anyway.
// Plans are idempotent: a Plan computed from the state its own application produced has no
// writes, except where the Plan had to wait for something it started: deleted objects to be gone
// (graceful deletion) before their names are reused. Each pass after such an event does the next
// step, until an unchanged world yields a Plan with no writes.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_PLAN_H_
#define HPTRAIN_CONTROLLER_RECONCILE_PLAN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "controller/reconcile/elastic.h"
#include "controller/reconcile/events.h"
#include "controller/reconcile/object_meta.h"

namespace hptrain::reconcile {

// One object to delete.
struct ObjectRef {
  std::string api_version;  // "v1", "hptrain.io/v1alpha1"
  std::string kind;         // "Pod", "Service", "Secret", "TrainingJob"
  std::string ns;
  std::string name;
  std::string uid;               // precondition; "" = none
  std::string resource_version;  // precondition; "" = none (pods change status all the time,
                                 // so the reconciler never sets it for them)

  bool operator==(const ObjectRef& other) const;
};

struct Plan {
  std::vector<Json> creates;
  std::vector<ObjectRef> deletes;
  std::optional<Json> status;  // the complete new status; nullopt = unchanged, do not write
  std::vector<Event> events;
  std::optional<absl::Duration> requeue_after;
  std::optional<ObjectRef> delete_job;
  std::vector<MembershipRequest> membership;

  // True when the Plan writes nothing (creates, deletes, status, events, delete_job all empty);
  // requeue_after and membership do not count.
  bool NoWrites() const;

  // A short multi-line description for logs and test failures, e.g.
  //   status: phase=Running restarts=1
  //   delete Pod ns/j-worker-1
  //   create Pod ns/j-worker-1
  //   event Warning GangRestart: ...
  std::string DebugString() const;

  bool operator==(const Plan& other) const;
};

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_PLAN_H_
