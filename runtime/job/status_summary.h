// The run summary (run_summary.h) of a finished local run, from the coordinator's last JobStatus
// (proto/hptrain/v1/coordinator.proto): what `hptrain run` prints and writes with --output-json.
// Pure.
#ifndef HPTRAIN_RUNTIME_JOB_STATUS_SUMMARY_H_
#define HPTRAIN_RUNTIME_JOB_STATUS_SUMMARY_H_

#include "proto/hptrain/v1/coordinator.pb.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/run_summary.h"

namespace hptrain::job {

// `status` is the coordinator's last status of the run's last gang; `wall_seconds` the run's
// duration and `start_unix_seconds` when the launcher started (the evaluations' elapsed times
// count from it). Ranks are keyed by the workers' --rank (an elastic job's slot). The timeline
// and an elastic job's worker restarts are the launcher's, added by the caller.
RunSummary BuildSummary(const JobSpec& spec, const hptrain::v1::JobStatus& status,
                        double wall_seconds, double start_unix_seconds);

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_STATUS_SUMMARY_H_
