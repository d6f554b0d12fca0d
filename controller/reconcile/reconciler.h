// The TrainingJob reconciler: from what exists to what should be done, as a Plan (plan.h).
//
//   Plan Reconcile(observed, options, now)
//
// is a pure function. It reads no clock, no cache and no network: the controller loop lists the
// job and what it owns from its informers, calls Reconcile, executes the Plan (plan.h gives the
// order) and requeues. The same Observed always gives the same Plan, a Plan never creates an
// object whose name is taken, and once the world stops changing the Plans stop writing.
//
// One pass, in order:
//   1. A job being deleted is left alone (garbage collection removes what it owns).
//   2. A finished job (condition Succeeded or Failed is True) is terminal: nothing is created
//      and status is not rewritten. After success the ps pods (and any pod that is not a
//      succeeded worker) is deleted, the succeeded workers are kept for their logs; after a
//      failure every live pod but the failed ones is deleted. With
//      runPolicy.ttlSecondsAfterFinished the job itself is deleted once completionTime + TTL
//      has passed (TTLExpired event); until then the pass asks to be requeued at that moment.
//   3. The spec is parsed with the runtime's parser and validator (parsed_job.h). A spec that
//      cannot run fails the job for good: phase Failed, condition Failed=True reason
//      InvalidSpec with the validator's message, one Warning event, no pod created, existing
//      ones deleted. Fixing the spec later does not revive a failed job; re-create it.
//   4. Status basics: observedGeneration, replicas and desiredWorkers (total workers, the scale
//      subresource's status path), selector (the workers' label selector), strategy, restarts
//      (gang_restart.h step 2), workers[] and aggregates (worker_status.h).
//   5. runPolicy.activeDeadlineSeconds past startTime: Failed, reason DeadlineExceeded, pods
//      deleted (run_policy.h).
//   6. runPolicy.suspend: every live pod is deleted, phase Suspended, condition Suspended=True
//      (Suspended event); restarts, startTime and the Service and Secret are kept, nothing new is
//      created. When suspend turns false again: Suspended=False reason Resumed (Resumed event),
//      and the pass goes on to recreate the pods.
//   7. Every worker of the current gang Succeeded: phase Succeeded, completionTime, condition
//      Succeeded=True (event), the ps pods deleted. The ps pods' own state does not matter here:
//      the workers' results are the job's. (A ps pod that exits 0 while workers still run is not
//      a failure either; the workers then finish or fail on their own.)
//   8. A pod of the current gang Failed, or a gang that ran in full lost a pod (deleted by
//      hand, evicted, gone with its node: never replaced alone, since a new rank cannot join a
//      running ring). runPolicy.restartPolicy decides: Never fails the job (reason PodFailed);
//      ExitCode (the default) fails it at once on exit code 2 or 130 (reason BadInput); else
//      (and always with OnFailure) a gang restart (gang_restart.h): restarts + 1 written to
//      status, every live pod deleted, Warning GangRestart, Running=False; or, when restarts
//      would exceed runPolicy.backoffLimit, phase Failed with reason BackoffLimitExceeded and
//      status.restarts left at the restarts that happened. A failed job keeps its failed pods
//      (for their logs) and deletes the others.
//   9. Converge: delete stale pods (older generation, outdated spec, names no longer desired);
//      replace the Secret when its spec hash is outdated; create the Services (the headless one
//      and, with a parameter-server strategy, one per ps shard) and the Secret when absent,
//      delete owned Services no longer desired (fewer shards); with gang scheduling create
//      the PodGroup (pod_group.h) when absent, delete an owned one that no longer matches the
//      spec (or of the other provider, or any once gang scheduling is off), and record its
//      status.phase in status.podGroupPhase (a PodGroup the user created under the job's name
//      is used as it is); create the missing pods of the current gang, but only once the
//      PodGroup exists or is created in this Plan, no pod of the job is
//      stale or still terminating (a new gang never meets the remains of the old one, and a name
//      held by a terminating pod cannot be reused before it is gone: its DELETED watch event
//      requeues the job) and the Secret with the current spec exists or is created in this Plan.
//      Created=True (event) the first time pods are created.
//  10. Phase: Running (Running=True and a Running event on the flip; startTime set once) when
//      every desired pod of the current gang is Running (a ps or worker that already Succeeded
//      counts), else Pending (Running=False if it was True).
//      A Running gang after a restart also records the step it resumed from (status.resume
//      and a CheckpointRestored event, resume_record.h).
//  11. status is part of the Plan only when it differs from the observed one, and it describes
//      the state the Plan leads to (a pod the Plan creates reads Pending, one it deletes
//      Terminating), so re-observing after the Plan finds nothing more to write. Events only
//      come with such a status change.
//
// Thread-safe: Reconcile touches nothing but its arguments.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_RECONCILER_H_
#define HPTRAIN_CONTROLLER_RECONCILE_RECONCILER_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "controller/reconcile/object_meta.h"
#include "controller/reconcile/plan.h"
#include "controller/reconcile/pod_template.h"
#include "controller/reconcile/worker_status.h"

namespace hptrain::reconcile {

struct Observed {
  // The TrainingJob as last read (metadata, spec, status).
  Json job;
  // What the informers hold under the label hptrain.io/job=<name> in the job's namespace.
  // Objects of another owner may be among them; they are recognised and left alone.
  std::vector<Json> pods;
  std::vector<Json> services;
  std::vector<Json> secrets;
  // PodGroups of both gang-scheduling providers (pod_group.h), where their kinds exist.
  std::vector<Json> pod_groups;
  // The token to put in the Secret if it must be created (a fresh random string from the loop;
  // ignored otherwise). When empty and the Secret is missing, neither it nor any pod is created.
  std::string token;
  // Throughput per worker pod from the metrics feed; may be empty.
  WorkerMetricsMap worker_metrics;
};

struct Options {
  // Image for pods whose template names none (e.g. hptrain/runtime:<version>), with the pull
  // policy and pull secrets that go with it; an empty image = such a template is an invalid
  // spec. A bare image name converts to it.
  RuntimeImage default_image;
};

Plan Reconcile(const Observed& observed, const Options& options, absl::Time now);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_RECONCILER_H_
