// Time-based parts of spec.runPolicy: the active deadline and the TTL after finishing.
//
//   activeDeadlineSeconds    counted from status.startTime (set once, when the gang first runs;
//                            kept across gang restarts and suspensions, so time spent suspended
//                            counts): when it passes, the job fails with DeadlineExceeded.
//   ttlSecondsAfterFinished  counted from status.completionTime of a Succeeded or Failed job:
//                            when it passes, the job is deleted (its pods go with it).
// 0 means "none" for both (runtime/job/job_spec.h). Until a moment is due the reconciler asks to
// be requeued at it.
//
// Pure; thread-safe.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_RUN_POLICY_H_
#define HPTRAIN_CONTROLLER_RECONCILE_RUN_POLICY_H_

#include <cstdint>
#include <optional>

#include "absl/time/time.h"
#include "controller/reconcile/object_meta.h"

namespace hptrain::reconcile {

// startTime + activeDeadlineSeconds; nullopt when there is no deadline or no (readable)
// startTime.
std::optional<absl::Time> DeadlineOf(int64_t active_deadline_seconds, const Json& status);

// completionTime + ttlSecondsAfterFinished; nullopt when there is no TTL or no (readable)
// completionTime.
std::optional<absl::Time> TtlExpiryOf(int64_t ttl_seconds, const Json& status);

// spec.runPolicy.ttlSecondsAfterFinished read from the object itself, 0 when absent or not an
// integer: finished jobs are cleaned up even if their spec was since edited into one that no
// longer parses.
int64_t TtlSecondsOf(const Json& job);

// Keeps the earlier of `*requeue` and `due - now` (at least one second: a requeue at 0 would
// spin on a clock a little behind the API server's).
void RequeueAt(absl::Time due, absl::Time now, std::optional<absl::Duration>* requeue);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_RUN_POLICY_H_
