// Kubernetes events the reconciler asks the controller loop to record on a TrainingJob, and their
// reasons. Reasons are stable CamelCase identifiers (an interface: users filter and alert on
// them); messages are for people and may change.
//
// An event accompanies a change of the job's status (a condition flips, the restart counter
// moves, ...) or the job's deletion, so a Plan computed from the state after its own application
// repeats none of them. (A Plan computed twice from the same state has the same events: the
// loop records them only once it has written that status.)
#ifndef HPTRAIN_CONTROLLER_RECONCILE_EVENTS_H_
#define HPTRAIN_CONTROLLER_RECONCILE_EVENTS_H_

#include <string>

namespace hptrain::reconcile {

inline constexpr char kEventNormal[] = "Normal";
inline constexpr char kEventWarning[] = "Warning";

// Normal: the job's objects were created for the first time.
inline constexpr char kReasonCreated[] = "Created";
// Normal: every pod of the current gang runs.
inline constexpr char kReasonRunning[] = "Running";
// Normal: every worker finished successfully.
inline constexpr char kReasonSucceeded[] = "Succeeded";
// Reserved for a failure without a more specific reason (the reconciler always has one).
inline constexpr char kReasonFailed[] = "Failed";
// Warning: the spec passes the CRD schema but cannot run (parser or validator message).
inline constexpr char kReasonInvalidSpec[] = "InvalidSpec";
// Warning: a pod failed; every pod is deleted and recreated.
inline constexpr char kReasonGangRestart[] = "GangRestart";
// Warning: a pod exited with a code no restart can fix (2: bad input; 130: interrupted) under
// runPolicy.restartPolicy ExitCode; the job failed at once.
inline constexpr char kReasonBadInput[] = "BadInput";
// Warning, once with Created: the job writes checkpoints but has no spec.checkpoint.volume to
// share them with the gangs a restart creates, which therefore start over.
inline constexpr char kReasonNoSharedCheckpoint[] = "NoSharedCheckpoint";
// Warning (from the plan executor): the job's PodGroup cannot be created because the gang
// scheduler's PodGroup kind is not installed; retried with backoff.
inline constexpr char kReasonPodGroupUnavailable[] = "PodGroupUnavailable";
// Warning: a pod failed under runPolicy.restartPolicy Never; the job failed.
inline constexpr char kReasonPodFailed[] = "PodFailed";
// Warning: a pod failed after runPolicy.backoffLimit restarts; the job failed.
inline constexpr char kReasonBackoffLimitExceeded[] = "BackoffLimitExceeded";
// Warning: the job ran past runPolicy.activeDeadlineSeconds; the job failed.
inline constexpr char kReasonDeadlineExceeded[] = "DeadlineExceeded";
// Normal: runPolicy.suspend became true; pods deleted.
inline constexpr char kReasonSuspended[] = "Suspended";
// Normal: runPolicy.suspend became false; pods recreated.
inline constexpr char kReasonResumed[] = "Resumed";
// Normal: runPolicy.ttlSecondsAfterFinished passed; the job is deleted.
inline constexpr char kReasonTtlExpired[] = "TTLExpired";
// Normal: the rebalancer recorded a new batch allocation (allocation.h).
inline constexpr char kReasonRebalanced[] = "Rebalanced";
// Normal: the spec changed while pods ran the old one; the gang is recreated (not counted as a
// restart).
inline constexpr char kReasonSpecChanged[] = "SpecChanged";
// Warning: the controller cannot read the job's worker metrics (Prometheus unreachable, a
// worker pod's /metrics unreachable, no series for its workers) for a while; status.step,
// samplesPerSecond and rebalancing wait for them. Rate-limited per job (metrics_warnings.h).
inline constexpr char kReasonMetricsUnavailable[] = "MetricsUnavailable";
// Elastic jobs (spec.elastic): Warning, one worker pod failed and is replaced alone; Normal, the
// coordinator began a new membership epoch ("epoch 3: slot 2 lost; members 0,1,3").
inline constexpr char kReasonWorkerReplaced[] = "WorkerReplaced";
inline constexpr char kReasonMembershipChanged[] = "MembershipChanged";
// Condition BelowMinReplicas: True (reason BelowMinReplicas) while an elastic job that ran has
// fewer members than spec.elastic.minReplicas; False (reason MinReplicasMet) once it has enough
// again, or (reason GangRestart) when the wait ran out and the gang restarted.
inline constexpr char kReasonBelowMinReplicas[] = "BelowMinReplicas";
inline constexpr char kReasonMinReplicasMet[] = "MinReplicasMet";
// Condition reason (Running=False): some pods of the gang are not running yet.
inline constexpr char kReasonPodsNotRunning[] = "PodsNotRunning";

struct Event {
  std::string type;  // kEventNormal | kEventWarning
  std::string reason;
  std::string message;

  bool operator==(const Event& other) const {
    return type == other.type && reason == other.reason && message == other.message;
  }
};

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_EVENTS_H_
