// Where a restarted gang resumed training: after a gang restart of a job with
// spec.checkpoint.path, the workers of the new gang run with HPTRAIN_RESUME (desired_objects.h)
// and report the global step they continued from (hptrain_resumed_from_step, 0 when no
// checkpoint had been written yet). Once worker 0 of the current gang reports it, the step is
// recorded once per restart:
//   status.resume   {restart: <status.restarts>, step: <step>}
//   event           Normal CheckpointRestored "gang restart 2 resumed training from step 40
//                   (checkpoint /ckpt/job.ckpt)", or "... found no checkpoint: training started
//                   over from step 0".
// Pure; thread-safe.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_RESUME_RECORD_H_
#define HPTRAIN_CONTROLLER_RECONCILE_RESUME_RECORD_H_

#include <vector>

#include "controller/reconcile/events.h"
#include "controller/reconcile/gang_restart.h"
#include "controller/reconcile/object_meta.h"
#include "controller/reconcile/parsed_job.h"
#include "controller/reconcile/worker_status.h"

namespace hptrain::reconcile {

// Normal: a restarted gang resumed from the checkpoint (or found none).
inline constexpr char kReasonCheckpointRestored[] = "CheckpointRestored";

// Sets status.resume in `*status` (the new status, whose restarts is in force) and appends the
// event, when the current gang's worker 0 reports a resume step not yet recorded for this
// restart; otherwise changes nothing.
void RecordResume(const ParsedJob& job, const GangAssessment& gang,
                  const WorkerMetricsMap& metrics, Json* status, std::vector<Event>* events);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_RESUME_RECORD_H_
