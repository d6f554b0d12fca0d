// The elastic launcher's workers (runtime/job/elastic_workers.h) under a real Supervisor with shell
// children standing in for workers, and a recording stand-in for the coordinator's
// ChangeMembership: a failed worker is reported lost and restarted alone while the others keep
// their processes, the control file's lines act, and runPolicy decides what a failure costs.
#include "runtime/job/elastic_workers.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hptrain::job {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

struct Change {
  MembershipChangeKind kind;
  int slot;
  int64_t at_step;
  std::string reason;
};

class ElasticWorkersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "elastic_workers_test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  void Append(const std::string& text) {
    std::ofstream out(Path("control"), std::ios::app);
    out << text;
  }

  // An ElasticWorkers over `supervisor` whose workers run `script` (a shell command) and whose
  // membership changes land in changes_ (failing for slot `refuse_slot`).
  ElasticWorkers Make(Supervisor& supervisor, ElasticWorkersOptions options,
                      const std::string& script, int refuse_slot = -1) {
    auto control = ControlFile::Open(Path("control"));
    EXPECT_TRUE(control.ok()) << control.status();
    ElasticWorkers workers(std::move(options), *std::move(control), log_);
    workers.BeginGang(
        &supervisor,
        [&supervisor, script](int slot) {
          return supervisor.Spawn(absl::StrCat("worker-", slot), {"/bin/sh", "-c", script});
        },
        [this, refuse_slot](MembershipChangeKind kind, int slot, int64_t at_step,
                            const std::string& reason) -> absl::Status {
          if (slot == refuse_slot) {
            return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " is not a member"));
          }
          changes_.push_back({kind, slot, at_step, reason});
          return absl::OkStatus();
        });
    return workers;
  }

  std::string dir_;
  std::ostringstream log_;
  std::vector<Change> changes_;
};

ElasticWorkersOptions Options(const std::string& policy = "OnFailure", int backoff_limit = 3) {
  ElasticWorkersOptions options;
  options.slots = 4;
  options.min_members = 2;
  options.join_timeout_seconds = 30;
  options.restart_policy = policy;
  options.backoff_limit = backoff_limit;
  return options;
}

// The launcher's scenario: `kill 1` in the control file; worker-1 dies by SIGKILL, is reported
// lost and restarted in slot 1; worker-0 keeps its process; the run ends when every member's
// worker exited 0.
TEST_F(ElasticWorkersTest, KilledWorkerIsReportedLostAndRestartedAloneOthersKeepTheirPids) {
  Supervisor supervisor;
  auto ps = supervisor.Spawn("ps-0", {"/bin/sleep", "30"}, {}, ChildRole::kService);
  ASSERT_TRUE(ps.ok());
  ElasticWorkers workers =
      Make(supervisor, Options(), "while [ ! -e '" + Path("finish") + "' ]; do sleep 0.01; done");
  ASSERT_TRUE(workers.StartWorker(0).ok());
  ASSERT_TRUE(workers.StartWorker(1).ok());
  EXPECT_THAT(workers.RunningSlots(), ElementsAre(0, 1));
  Append("kill 1\n");
  WaitOptions wait;
  wait.grace_period = absl::Seconds(2);
  wait.callback_interval = absl::Milliseconds(10);
  wait.periodic_callback = [&]() -> absl::Status {
    if (absl::Status polled = workers.Poll({0, 1}, 0.0); !polled.ok()) return polled;
    if (workers.restarts()[1] == 1) std::ofstream(Path("finish")) << "";
    return absl::OkStatus();
  };
  wait.absorb_failure = [&](const ChildStatus& child) { return workers.AbsorbFailure(child); };
  wait.exit_check = [&](const ChildStatus& child) {
    workers.Exited(child);
    return absl::OkStatus();
  };
  const RunResult result = supervisor.Wait(wait);
  ASSERT_EQ(result.outcome, RunOutcome::kSucceeded) << result.first_failure << "\n" << log_.str();
  ASSERT_EQ(result.children.size(), 4u);  // ps-0, worker-0, worker-1, worker-1 again
  const ChildStatus& survivor = result.children[1];
  const ChildStatus& killed = result.children[2];
  const ChildStatus& restarted = result.children[3];
  EXPECT_EQ(survivor.name, "worker-0");
  EXPECT_TRUE(survivor.Succeeded());
  EXPECT_FALSE(survivor.stopped_by_supervisor);  // one process from start to end
  EXPECT_EQ(killed.name, "worker-1");
  EXPECT_TRUE(killed.signaled);
  EXPECT_EQ(killed.term_signal, SIGKILL);
  EXPECT_EQ(restarted.name, "worker-1");
  EXPECT_NE(restarted.pid, killed.pid);
  EXPECT_TRUE(restarted.Succeeded());
  ASSERT_EQ(changes_.size(), 1u);
  EXPECT_EQ(changes_[0].kind, MembershipChangeKind::kLost);
  EXPECT_EQ(changes_[0].slot, 1);
  EXPECT_EQ(changes_[0].reason, "killed by signal 9");
  EXPECT_THAT(workers.restarts(), ElementsAre(0, 1, 0, 0));
  EXPECT_TRUE(workers.Finished({0, 1}, 2));
  EXPECT_FALSE(workers.Finished({0, 1}, 1));  // the coordinator has not counted both done
  EXPECT_TRUE(workers.fatal_reason().empty());
  EXPECT_THAT(log_.str(), HasSubstr(absl::StrCat("killed worker-1 (pid ", killed.pid, ")")));
  EXPECT_THAT(log_.str(),
              HasSubstr(absl::StrCat("worker-1 (pid ", killed.pid,
                                     ") was killed by signal 9 (SIGKILL); the job goes on without "
                                     "slot 1, restarting it (restart 1 of at most 3 for slot 1)")));
}

// Without Wait(): failures handed to AbsorbFailure() as the Supervisor would.
ChildStatus Failed(const std::string& name, pid_t pid, int exit_code) {
  ChildStatus status;
  status.name = name;
  status.pid = pid;
  status.exited = true;
  status.exit_code = exit_code;
  return status;
}

TEST_F(ElasticWorkersTest, RunPolicyDecidesEachFailureAndTheBackoffLimitCountsPerSlot) {
  Supervisor supervisor;
  ElasticWorkers workers = Make(supervisor, Options("OnFailure", 1), "sleep 30");
  auto ps = supervisor.Spawn("ps-0", {"/bin/sleep", "30"}, {}, ChildRole::kService);
  ASSERT_TRUE(ps.ok());
  ASSERT_TRUE(workers.StartWorker(0).ok());
  ASSERT_TRUE(workers.StartWorker(1).ok());
  EXPECT_FALSE(workers.AbsorbFailure(Failed("ps-0", *ps, 1)));  // the gang's failure
  EXPECT_TRUE(workers.fatal_reason().empty());
  // A pid the slot does not run (an earlier worker of it) is not this gang's.
  EXPECT_FALSE(workers.AbsorbFailure(Failed("worker-0", *ps, 1)));
  EXPECT_TRUE(changes_.empty());

  const pid_t first = *workers.PidOf(0);
  ASSERT_TRUE(workers.AbsorbFailure(Failed("worker-0", first, 1)));
  ASSERT_EQ(changes_.size(), 1u);
  EXPECT_EQ(changes_[0].kind, MembershipChangeKind::kLost);
  EXPECT_EQ(changes_[0].slot, 0);
  EXPECT_EQ(changes_[0].reason, "exit 1");
  ASSERT_TRUE(workers.PidOf(0).has_value());
  EXPECT_NE(*workers.PidOf(0), first);
  EXPECT_TRUE(supervisor.IsRunning(*workers.PidOf(0)));
  // Slot 1 has a budget of its own.
  ChildStatus killed = Failed("worker-1", *workers.PidOf(1), 0);
  killed.exited = false;
  killed.signaled = true;
  killed.term_signal = SIGKILL;
  ASSERT_TRUE(workers.AbsorbFailure(killed));
  EXPECT_EQ(changes_.back().reason, "killed by signal 9");
  EXPECT_THAT(workers.restarts(), ElementsAre(1, 1, 0, 0));
  // Slot 0's second failure is past its backoffLimit of 1: the job fails, nobody is restarted.
  const pid_t second = *workers.PidOf(0);
  EXPECT_FALSE(workers.AbsorbFailure(Failed("worker-0", second, 1)));
  EXPECT_EQ(workers.fatal_reason(),
            "; runPolicy.backoffLimit is 1, reached after 1 restarts of slot 0");
  EXPECT_EQ(*workers.PidOf(0), second);
  EXPECT_EQ(changes_.size(), 2u);
}

TEST_F(ElasticWorkersTest, NeverLeavesTheSlotAndExitCodeFailsTheJobOnBadInput) {
  Supervisor supervisor;
  ElasticWorkers never = Make(supervisor, Options("Never"), "sleep 30");
  ASSERT_TRUE(never.StartWorker(1).ok());
  const pid_t pid = *never.PidOf(1);
  ASSERT_TRUE(never.AbsorbFailure(Failed("worker-1", pid, 1)));
  ASSERT_EQ(changes_.size(), 1u);  // still reported lost: the others go on without it at once
  EXPECT_EQ(changes_[0].kind, MembershipChangeKind::kLost);
  EXPECT_EQ(*never.PidOf(1), pid);  // not restarted
  EXPECT_THAT(never.restarts(), ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(log_.str(), HasSubstr("exited with status 1; runPolicy.restartPolicy is Never: the "
                                    "job goes on without slot 1"));

  ElasticWorkers exit_code = Make(supervisor, Options("ExitCode"), "sleep 30");
  ASSERT_TRUE(exit_code.StartWorker(0).ok());
  EXPECT_FALSE(exit_code.AbsorbFailure(Failed("worker-0", *exit_code.PidOf(0), 2)));
  EXPECT_THAT(exit_code.fatal_reason(), HasSubstr("exit code 2 means bad input"));
  EXPECT_EQ(changes_.size(), 1u);
}

TEST_F(ElasticWorkersTest, ControlFileAddsRemovesAndKillsAndWarnsOfBadLines) {
  Supervisor supervisor;
  ElasticWorkers workers = Make(supervisor, Options(), "sleep 30", /*refuse_slot=*/3);
  ASSERT_TRUE(workers.StartWorker(0).ok());
  ASSERT_TRUE(workers.StartWorker(1).ok());
  Append("add\nremove 1 at 20\nremove 3\nkill 3\nbogus 7\n# a comment\n\nadd\nadd\n");
  ASSERT_TRUE(workers.Poll({0, 1}, 0.0).ok());
  EXPECT_THAT(workers.RunningSlots(), ElementsAre(0, 1, 2, 3));
  ASSERT_EQ(changes_.size(), 1u);
  EXPECT_EQ(changes_[0].kind, MembershipChangeKind::kRemove);
  EXPECT_EQ(changes_[0].slot, 1);
  EXPECT_EQ(changes_[0].at_step, 20);
  EXPECT_EQ(changes_[0].reason, "control file");
  const std::string log = log_.str();
  EXPECT_THAT(log, HasSubstr("control file: started worker-2 (pid "));
  EXPECT_THAT(log, HasSubstr("control file: slot 1 leaves the job at step 20"));
  EXPECT_THAT(log, HasSubstr("control file: remove 3: slot 3 is not a member"));
  EXPECT_THAT(log, HasSubstr("control file: kill 3: slot 3 has no running worker"));
  EXPECT_THAT(log, HasSubstr("control file " + Path("control") +
                             ": ignoring 'bogus 7': unknown command 'bogus'"));
  EXPECT_THAT(log, HasSubstr("control file: started worker-3 (pid "));
  EXPECT_THAT(log, HasSubstr("control file: add: every slot 0..3 has a worker"));
  EXPECT_THAT(log, Not(HasSubstr("comment")));
  // One line per message.
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 7);
  // kill: the slot's worker gets SIGKILL (reaped by Wait(), which this test does not run).
  const pid_t victim = *workers.PidOf(2);
  Append("kill 2\n");
  ASSERT_TRUE(workers.Poll({0, 1, 2}, 0.0).ok());
  EXPECT_THAT(log_.str(), HasSubstr(absl::StrCat("killed worker-2 (pid ", victim, ")")));
  int status = 0;
  ASSERT_EQ(::waitpid(victim, &status, 0), victim);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST_F(ElasticWorkersTest, TooFewMembersForLongerThanTheJoinTimeoutFailsThePoll) {
  Supervisor supervisor;
  ElasticWorkers workers = Make(supervisor, Options(), "sleep 30");
  EXPECT_TRUE(workers.Poll({0, 1}, 0.0).ok());
  EXPECT_TRUE(workers.Poll({1}, 5.0).ok());
  EXPECT_TRUE(workers.Poll({1}, 35.0).ok());  // 30 s: not longer than joinTimeoutSeconds
  const absl::Status status = workers.Poll({1}, 36.0);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_EQ(status.message(),
            "the job had 1 member (fewer than spec.elastic.minReplicas, 2) for 31 s "
            "(spec.elastic.joinTimeoutSeconds is 30)");
  EXPECT_TRUE(workers.Poll({1, 2}, 37.0).ok());
  EXPECT_TRUE(workers.Poll({}, 60.0).ok());  // a new shortage starts its own count
}

}  // namespace
}  // namespace hptrain::job
