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
// Elastic jobs (spec.elastic, docs/elastic.md "On Kubernetes") differ in steps 8 to 10:
//   * The pods' spec hash leaves out the worker replica count (parsed_job.h): scaling creates the
//     missing worker pods (never one above spec.elastic.maxReplicas) and removes the surplus
//     ones, and restarts nothing. A surplus worker pod (its slot at or above the replica count)
//     is deleted once its worker has left: the pod finished (Succeeded or Failed), or
//     Observed::membership is known and the slot is not a member. Until then the Plan asks the
//     coordinator for ChangeMembership REMOVE (reason "scaled down"), and the worker leaves at a
//     step boundary and exits 0. When the coordinator cannot be read (membership nullopt) the pod
//     is deleted at once: the survivors then see it lost.
//   * A worker pod that fails is deleted and recreated alone (same name, same slot; a Warning
//     WorkerReplaced), one that is deleted or lost is recreated alone, and no other pod is touched.
//     runPolicy.restartPolicy Never still fails the job, and ExitCode still fails it on exit code
//     2 or 130; replacements do not count as restarts. While the coordinator still lists such a
//     slot as a member, the Plan reports it: ChangeMembership LOST. A ps pod that fails or is
//     lost restarts the gang as in step 8.
//   * The missing worker pods are created as soon as their names are free; only pods of another
//     restart generation or spec hash (a gang restart, a spec change) hold the creation back.
//   * Phase Running needs every ps pod and spec.elastic.minReplicas worker pods running.
//   * Below minimum: once the job ran, fewer members than spec.elastic.minReplicas (the
//     coordinator's members when known, else the current worker pods that are Running and
//     Ready) sets condition BelowMinReplicas=True; still True joinTimeoutSeconds after its
//     lastTransitionTime, the gang restarts as in step 8 (GangRestart names the cause) and the
//     condition turns False. Enough members again: False, reason MinReplicasMet.
//   * status.membership {epoch, members} follows the coordinator, with one Normal event
//     MembershipChanged per new epoch ("epoch 3: slot 2 lost; members 0,1,3"); an older epoch
//     (a restarted coordinator) is followed without events.
//   * The Secret keeps the token the running workers hold: it is not replaced when only the
//     replica count changed while the job has pods; with none left (a gang restart, suspension)
//     an outdated one is replaced, so the next coordinator starts with the current replicas.
//   * A live elastic job is requeued every Options::membership_poll, to follow the coordinator.
//
// Thread-safe: Reconcile touches nothing but its arguments.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_RECONCILER_H_
#define HPTRAIN_CONTROLLER_RECONCILE_RECONCILER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "controller/reconcile/elastic.h"
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
  // Elastic jobs: the coordinator's membership (GetJobStatus); nullopt when it could not be read
  // (or was not asked: a job that is not elastic).
  std::optional<CoordinatorMembership> membership;
};

struct Options {
  // Image for pods whose template names none (e.g. hptrain/runtime:<version>), with the pull
  // policy and pull secrets that go with it; an empty image = such a template is an invalid
  // spec. A bare image name converts to it.
  RuntimeImage default_image;
  // How often a live elastic job is reconciled again to follow its coordinator's membership.
  absl::Duration membership_poll = absl::Seconds(5);
};

Plan Reconcile(const Observed& observed, const Options& options, absl::Time now);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_RECONCILER_H_
