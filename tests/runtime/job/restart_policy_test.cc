// spec.runPolicy under `hptrain run` (runtime/job/restart_policy.h): which failures restart the
// gang, and when the backoff limit ends the run.
#include "runtime/job/restart_policy.h"

#include "gtest/gtest.h"

namespace hptrain::job {
namespace {

// A failed run whose first failure is a worker that exited `code`, or died of `signo`.
RunResult FailedBy(int code, int signo = 0) {
  RunResult result;
  result.outcome = RunOutcome::kFailed;
  ChildStatus ps;
  ps.name = "ps-0";
  ps.pid = 10;
  ps.role = ChildRole::kMustSucceed;
  ps.signaled = true;
  ps.term_signal = 15;
  ps.stopped_by_supervisor = true;
  ChildStatus worker;
  worker.name = "worker-1";
  worker.pid = 12;
  if (signo != 0) {
    worker.signaled = true;
    worker.term_signal = signo;
  } else {
    worker.exited = true;
    worker.exit_code = code;
  }
  result.children = {ps, worker};
  result.first_failure = worker.Describe();
  return result;
}

TEST(RestartPolicy, ExitCodeRestartsRuntimeFailuresAndSignalsButNotBadInputOrInterruption) {
  EXPECT_EQ(FailedChildExitCode(FailedBy(1)), 1);
  EXPECT_EQ(FailedChildExitCode(FailedBy(0, 9)), 137);
  EXPECT_TRUE(DecideRestart("ExitCode", 3, 0, FailedBy(1)).restart);
  EXPECT_TRUE(DecideRestart("ExitCode", 3, 0, FailedBy(0, 9)).restart);
  const RestartDecision bad_input = DecideRestart("ExitCode", 3, 0, FailedBy(2));
  EXPECT_FALSE(bad_input.restart);
  EXPECT_NE(bad_input.reason.find("exit code 2 means bad input"), std::string::npos)
      << bad_input.reason;
  EXPECT_FALSE(DecideRestart("ExitCode", 3, 0, FailedBy(130)).restart);
}

TEST(RestartPolicy, OnFailureRestartsEveryFailureNeverNone) {
  EXPECT_TRUE(DecideRestart("OnFailure", 3, 0, FailedBy(2)).restart);
  EXPECT_TRUE(DecideRestart("OnFailure", 3, 2, FailedBy(1)).restart);
  const RestartDecision never = DecideRestart("Never", 3, 0, FailedBy(1));
  EXPECT_FALSE(never.restart);
  EXPECT_EQ(never.reason, "; runPolicy.restartPolicy is Never");
}

TEST(RestartPolicy, BackoffLimitCountsRestarts) {
  const RestartDecision exhausted = DecideRestart("OnFailure", 2, 2, FailedBy(1));
  EXPECT_FALSE(exhausted.restart);
  EXPECT_EQ(exhausted.reason, "; runPolicy.backoffLimit is 2, reached after 2 gang restarts");
  EXPECT_FALSE(DecideRestart("OnFailure", 0, 0, FailedBy(1)).restart);
}

TEST(RestartPolicy, SuccessInterruptionAndDeadlineAreNeverRestarted) {
  RunResult result;
  result.outcome = RunOutcome::kSucceeded;
  EXPECT_FALSE(DecideRestart("OnFailure", 3, 0, result).restart);
  result.outcome = RunOutcome::kInterrupted;
  EXPECT_FALSE(DecideRestart("OnFailure", 3, 0, result).restart);
  result.outcome = RunOutcome::kDeadlineExceeded;
  const RestartDecision deadline = DecideRestart("OnFailure", 3, 0, result);
  EXPECT_FALSE(deadline.restart);
  EXPECT_TRUE(deadline.reason.empty());
}

// An elastic job's worker is restarted alone (DecideWorkerRestart), its restarts counted per slot.
TEST(WorkerRestartPolicy, OnFailureAndExitCodeRestartTheSlotUntilItsBackoffLimit) {
  for (const char* policy : {"OnFailure", "ExitCode"}) {
    for (int exit_code : {1, 137, 143}) {
      const WorkerRestartDecision first = DecideWorkerRestart(policy, 3, 2, 0, exit_code);
      EXPECT_EQ(first.action, WorkerRestartAction::kRestart) << policy << " " << exit_code;
      EXPECT_EQ(first.reason, "restarting it (restart 1 of at most 3 for slot 2)");
    }
    EXPECT_EQ(DecideWorkerRestart(policy, 3, 2, 2, 1).action, WorkerRestartAction::kRestart);
    const WorkerRestartDecision exhausted = DecideWorkerRestart(policy, 3, 2, 3, 1);
    EXPECT_EQ(exhausted.action, WorkerRestartAction::kFailJob) << policy;
    EXPECT_EQ(exhausted.reason,
              "; runPolicy.backoffLimit is 3, reached after 3 restarts of slot 2");
    EXPECT_EQ(DecideWorkerRestart(policy, 0, 0, 0, 1).action, WorkerRestartAction::kFailJob);
  }
}

TEST(WorkerRestartPolicy, ExitCodeFailsTheJobOnBadInputOrInterruptionOnFailureRestarts) {
  for (int exit_code : {2, 130}) {
    const WorkerRestartDecision permanent = DecideWorkerRestart("ExitCode", 3, 1, 0, exit_code);
    EXPECT_EQ(permanent.action, WorkerRestartAction::kFailJob) << exit_code;
    EXPECT_NE(permanent.reason.find("runPolicy.restartPolicy is ExitCode"), std::string::npos)
        << permanent.reason;
    EXPECT_EQ(DecideWorkerRestart("OnFailure", 3, 1, 0, exit_code).action,
              WorkerRestartAction::kRestart);
  }
  EXPECT_NE(DecideWorkerRestart("ExitCode", 3, 1, 0, 2).reason.find("exit code 2 means bad input"),
            std::string::npos);
}

TEST(WorkerRestartPolicy, NeverLeavesTheSlotEmptyAndTheJobGoesOn) {
  for (int exit_code : {1, 2, 137}) {
    const WorkerRestartDecision decision = DecideWorkerRestart("Never", 3, 4, 0, exit_code);
    EXPECT_EQ(decision.action, WorkerRestartAction::kLeave) << exit_code;
    EXPECT_EQ(decision.reason, "runPolicy.restartPolicy is Never: the job goes on without slot 4");
  }
}

}  // namespace
}  // namespace hptrain::job
