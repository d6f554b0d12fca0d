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
// An elastic job's worker (spec.elastic, docs/elastic.md) is restarted alone instead
// (DecideWorkerRestart): the others train on without it meanwhile. Its restarts count against
// backoffLimit per slot, not per job: slots fail independently (a bad host, a preempted node),
// so one flaky slot should not spend the budget of the others, and a failure every worker meets
// still ends the job after backoffLimit restarts of the first slot that meets it.
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

// What becomes of an elastic job's worker that failed on its own.
enum class WorkerRestartAction {
  kRestart,  // start a worker in its slot again; the job goes on meanwhile
  kLeave,    // the slot stays empty (Never); the job goes on with the other members
  kFailJob,  // the job fails (a permanent exit code under ExitCode, or the backoff limit)
};

struct WorkerRestartDecision {
  WorkerRestartAction action = WorkerRestartAction::kRestart;
  // What the launcher prints after the failure: "restarting it (restart 1 of at most 3 for slot
  // 2)", "runPolicy.restartPolicy is Never: the job goes on without slot 2", "; exit code 2
  // means bad input, ...", "; runPolicy.backoffLimit is 3, reached after 3 restarts of slot 2".
  std::string reason;
};

// `exit_code` is the worker's: its exit status, or 128 + signal; `slot_restarts` how many times
// its slot's worker has been restarted so far. Pure.
WorkerRestartDecision DecideWorkerRestart(const std::string& restart_policy, int backoff_limit,
                                          int slot, int slot_restarts, int exit_code);

// The exit code of the child that ended a failed run: its exit status, 128 + signal for a signal,
// -1 when none failed on its own (e.g. the progress callback ended the run).
int FailedChildExitCode(const RunResult& result);

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_RESTART_POLICY_H_
