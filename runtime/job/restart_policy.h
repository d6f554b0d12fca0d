// What `hptrain run` does when its gang fails: spec.runPolicy.restartPolicy and backoffLimit
// applied to a local run, as the controller applies them to pods (controller/reconcile/
// reconciler.cc, Pass::Restart):
//   Never      the run fails.
//   OnFailure  the gang (ps and every worker) is stopped and started again, from the last
//              checkpoint when spec.checkpoint.path is set, at most backoffLimit times.
//   ExitCode   (default) as OnFailure, except that a child that exited 2 (bad input: the job file,
//              its data or flags) or 130 (interrupted) fails the run at once: no retry fixes those.
// Interruption (Ctrl-C) and spec.runPolicy.activeDeadlineSeconds never restart.
//
// Pure; thread-safe.
#ifndef HPTRAIN_RUNTIME_JOB_RESTART_POLICY_H_
#define HPTRAIN_RUNTIME_JOB_RESTART_POLICY_H_

#include <string>

#include "runtime/job/supervisor.h"

namespace hptrain::job {

struct RestartDecision {
  bool restart = false;
  // Why not, appended to the failure line when the run ends: "; runPolicy.restartPolicy is
  // Never", "; runPolicy.backoffLimit is 3, reached after 3 gang restarts". Empty when the policy
  // had no say (success, interruption, deadline).
  std::string reason;
};

// `restart_policy` and `backoff_limit` are spec.runPolicy's (runtime/job/job_spec.h, validated);
// `restarts` is how many gang restarts this run has had so far.
RestartDecision DecideRestart(const std::string& restart_policy, int backoff_limit, int restarts,
                              const RunResult& result);

// The exit code of the child that ended a failed run: its exit status, 128 + signal for a signal,
// -1 when none failed on its own (e.g. the progress callback ended the run).
int FailedChildExitCode(const RunResult& result);

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_RESTART_POLICY_H_
