#include "runtime/job/restart_policy.h"

#include "absl/strings/str_cat.h"

namespace hptrain::job {

int FailedChildExitCode(const RunResult& result) {
  // The child that ended the run is the one result.first_failure describes.
  for (const ChildStatus& child : result.children) {
    if (child.Describe() != result.first_failure) continue;
    if (child.signaled) return 128 + child.term_signal;
    if (child.exited) return child.exit_code;
  }
  return -1;
}

RestartDecision DecideRestart(const std::string& restart_policy, int backoff_limit, int restarts,
                              const RunResult& result) {
  RestartDecision decision;
  if (result.outcome != RunOutcome::kFailed) return decision;
  if (restart_policy == "Never") {
    decision.reason = "; runPolicy.restartPolicy is Never";
    return decision;
  }
  const int exit_code = FailedChildExitCode(result);
  if (restart_policy == "ExitCode" && (exit_code == 2 || exit_code == 130)) {
    decision.reason = absl::StrCat(
        "; exit code ", exit_code,
        exit_code == 2 ? " means bad input, which no restart can fix" : " means interrupted",
        " (runPolicy.restartPolicy is ExitCode; OnFailure retries every failure)");
    return decision;
  }
  if (restarts >= backoff_limit) {
    decision.reason = absl::StrCat("; runPolicy.backoffLimit is ", backoff_limit,
                                   ", reached after ", restarts, " gang restarts");
    return decision;
  }
  decision.restart = true;
  return decision;
}

WorkerRestartDecision DecideWorkerRestart(const std::string& restart_policy, int backoff_limit,
                                          int slot, int slot_restarts, int exit_code) {
  WorkerRestartDecision decision;
  if (restart_policy == "Never") {
    decision.action = WorkerRestartAction::kLeave;
    decision.reason =
        absl::StrCat("runPolicy.restartPolicy is Never: the job goes on without slot ", slot);
    return decision;
  }
  if (restart_policy == "ExitCode" && (exit_code == 2 || exit_code == 130)) {
    decision.action = WorkerRestartAction::kFailJob;
    decision.reason = absl::StrCat(
        "; exit code ", exit_code,
        exit_code == 2 ? " means bad input, which no restart can fix" : " means interrupted",
        " (runPolicy.restartPolicy is ExitCode; OnFailure retries every failure)");
    return decision;
  }
  if (slot_restarts >= backoff_limit) {
    decision.action = WorkerRestartAction::kFailJob;
    decision.reason = absl::StrCat("; runPolicy.backoffLimit is ", backoff_limit,
                                   ", reached after ", slot_restarts, " restarts of slot ", slot);
    return decision;
  }
  decision.reason = absl::StrCat("restarting it (restart ", slot_restarts + 1, " of at most ",
                                 backoff_limit, " for slot ", slot, ")");
  return decision;
}

}  // namespace hptrain::job
