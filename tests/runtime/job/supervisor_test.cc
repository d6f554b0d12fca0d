#include "runtime/job/supervisor.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hptrain::job {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Fields of /proc/PID/stat after the parenthesised command name: state, ppid, pgrp.
struct ProcStat {
  char state = '?';
  pid_t ppid = 0;
  pid_t pgrp = 0;
};

bool ReadProcStat(pid_t pid, ProcStat* out) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return false;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream rest(line.substr(paren + 1));
  return static_cast<bool>(rest >> out->state >> out->ppid >> out->pgrp);
}

// Every process (zombies included) whose parent is this test process.
std::vector<pid_t> ChildrenOfThisProcess() {
  std::vector<pid_t> children;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return children;
  while (dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    ProcStat stat;
    if (pid > 0 && ReadProcStat(pid, &stat) && stat.ppid == ::getpid()) children.push_back(pid);
  }
  ::closedir(proc);
  return children;
}

// True once `pid` is gone or a zombie (a re-parented one waits for init to reap it).
bool EventuallyDead(pid_t pid) {
  for (int i = 0; i < 300; ++i) {
    ProcStat stat;
    if (!ReadProcStat(pid, &stat) || stat.state == 'Z') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

const ChildStatus& Child(const RunResult& result, const std::string& name) {
  for (const ChildStatus& c : result.children) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << "no child " << name;
  static const ChildStatus kNone;
  return kNone;
}

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "supervisor_test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    Supervisor::UninstallInterruptHandlers();
    EXPECT_THAT(ChildrenOfThisProcess(), IsEmpty()) << "zombie or orphaned child left behind";
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  // A shell command that creates `ready` once it has set up, so a test acts only after that.
  std::vector<std::string> Sh(const std::string& script) { return {"/bin/sh", "-c", script}; }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  static void WaitForFile(const std::string& path) {
    for (int i = 0; i < 500 && ::access(path.c_str(), F_OK) != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  std::string dir_;
};

TEST_F(SupervisorTest, AllChildrenSucceed) {
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn("worker-0", {"/bin/true"}).ok());
  ASSERT_TRUE(supervisor.Spawn("worker-1", {"true"}).ok());  // looked up in $PATH
  const RunResult result = supervisor.Wait();
  EXPECT_EQ(result.outcome, RunOutcome::kSucceeded);
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(result.ExitCode(), 0);
  EXPECT_EQ(result.first_failure, "");
  ASSERT_EQ(result.children.size(), 2u);
  for (const ChildStatus& c : result.children) {
    EXPECT_TRUE(c.Succeeded()) << c.Describe();
    EXPECT_FALSE(c.stopped_by_supervisor);
  }
}

TEST_F(SupervisorTest, WaitWithNoChildrenSucceeds) {
  Supervisor supervisor;
  EXPECT_EQ(supervisor.Wait().outcome, RunOutcome::kSucceeded);
}

TEST_F(SupervisorTest, NonZeroExitFailsRunAndTerminatesOthers) {
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn("worker-0", {"/bin/sleep", "30"}).ok());
  auto failing = supervisor.Spawn("worker-1", {"/bin/false"});
  ASSERT_TRUE(failing.ok());
  const auto start = std::chrono::steady_clock::now();
  const RunResult result = supervisor.Wait();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));

  EXPECT_EQ(result.outcome, RunOutcome::kFailed);
  EXPECT_EQ(result.ExitCode(), 1);
  EXPECT_EQ(result.first_failure,
            absl::StrCat("worker-1 (pid ", *failing, ") exited with status 1"));
  const ChildStatus& sleeper = Child(result, "worker-0");
  EXPECT_TRUE(sleeper.stopped_by_supervisor);
  EXPECT_TRUE(sleeper.signaled);
  EXPECT_EQ(sleeper.term_signal, SIGTERM);
  EXPECT_FALSE(sleeper.killed_after_grace);
}

TEST_F(SupervisorTest, ChildKilledFromOutsideNamesSignalAndOthersAreReaped) {
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn("ps-0", {"/bin/sleep", "30"}, {}, ChildRole::kService).ok());
  ASSERT_TRUE(supervisor.Spawn("worker-0", {"/bin/sleep", "30"}).ok());
  auto victim = supervisor.Spawn("worker-1", {"/bin/sleep", "30"});
  ASSERT_TRUE(victim.ok());

  WaitOptions options;
  options.callback_interval = absl::Milliseconds(20);
  options.periodic_callback = [&] {
    ::kill(*victim, SIGKILL);  // the OOM killer, say
    return absl::OkStatus();
  };
  const RunResult result = supervisor.Wait(options);

  EXPECT_EQ(result.outcome, RunOutcome::kFailed);
  EXPECT_EQ(result.first_failure,
            absl::StrCat("worker-1 (pid ", *victim, ") was killed by signal 9 (SIGKILL)"));
  for (const char* name : {"ps-0", "worker-0"}) {
    const ChildStatus& c = Child(result, name);
    EXPECT_TRUE(c.stopped_by_supervisor) << name;
    EXPECT_EQ(c.term_signal, SIGTERM) << c.Describe();
  }
  EXPECT_FALSE(Child(result, "worker-1").stopped_by_supervisor);
}

TEST_F(SupervisorTest, ServiceStoppedOnceMustSucceedChildrenFinish) {
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn("ps-0", {"/bin/sleep", "30"}, {}, ChildRole::kService).ok());
  ASSERT_TRUE(supervisor.Spawn("worker-0", Sh("sleep 0.1")).ok());
  ASSERT_TRUE(supervisor.Spawn("worker-1", {"/bin/true"}).ok());
  const auto start = std::chrono::steady_clock::now();
  const RunResult result = supervisor.Wait();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));

  EXPECT_EQ(result.outcome, RunOutcome::kSucceeded) << result.first_failure;
  const ChildStatus& ps = Child(result, "ps-0");
  EXPECT_TRUE(ps.stopped_by_supervisor);
  EXPECT_EQ(ps.term_signal, SIGTERM);
  EXPECT_TRUE(Child(result, "worker-0").Succeeded());
}

TEST_F(SupervisorTest, ServiceThatFailsOnItsOwnFailsRun) {
  Supervisor supervisor;
  auto ps = supervisor.Spawn("ps-0", Sh("exit 2"), {}, ChildRole::kService);
  ASSERT_TRUE(ps.ok());
  ASSERT_TRUE(supervisor.Spawn("worker-0", {"/bin/sleep", "30"}).ok());
  const RunResult result = supervisor.Wait();
  EXPECT_EQ(result.outcome, RunOutcome::kFailed);
  EXPECT_EQ(result.first_failure, absl::StrCat("ps-0 (pid ", *ps, ") exited with status 2"));
}

TEST_F(SupervisorTest, ServiceThatExitsZeroEarlyIsFine) {
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn("ps-0", {"/bin/true"}, {}, ChildRole::kService).ok());
  ASSERT_TRUE(supervisor.Spawn("worker-0", Sh("sleep 0.1")).ok());
  const RunResult result = supervisor.Wait();
  EXPECT_EQ(result.outcome, RunOutcome::kSucceeded) << result.first_failure;
  EXPECT_FALSE(Child(result, "ps-0").stopped_by_supervisor);
}

TEST_F(SupervisorTest, SigintWhileWaitingInterruptsAndStopsAllChildren) {
  ASSERT_TRUE(Supervisor::InstallInterruptHandlers().ok());
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn("ps-0", {"/bin/sleep", "30"}, {}, ChildRole::kService).ok());
  ASSERT_TRUE(supervisor.Spawn("worker-0", {"/bin/sleep", "30"}).ok());
  ASSERT_TRUE(supervisor.Spawn("worker-1", {"/bin/sleep", "30"}).ok());
  std::thread ctrl_c([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ::kill(::getpid(), SIGINT);
  });
  const RunResult result = supervisor.Wait();
  ctrl_c.join();

  EXPECT_EQ(result.outcome, RunOutcome::kInterrupted);
  EXPECT_EQ(result.ExitCode(), 130);
  EXPECT_EQ(result.interrupt_signal, SIGINT);
  EXPECT_EQ(result.first_failure, "interrupted by signal 2 (SIGINT)");
  for (const ChildStatus& c : result.children) {
    EXPECT_TRUE(c.stopped_by_supervisor) << c.name;
    EXPECT_EQ(c.term_signal, SIGTERM) << c.Describe();
  }
}

TEST_F(SupervisorTest, InterruptBeforeWaitIsKeptForWait) {
  ASSERT_TRUE(Supervisor::InstallInterruptHandlers().ok());
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn("worker-0", {"/bin/sleep", "30"}).ok());
  ::raise(SIGTERM);
  const RunResult result = supervisor.Wait();
  EXPECT_EQ(result.outcome, RunOutcome::kInterrupted);
  EXPECT_EQ(result.ExitCode(), 128 + SIGTERM);
}

TEST_F(SupervisorTest, ChildIgnoringSigtermIsKilledAfterGracePeriod) {
  Supervisor supervisor;
  auto stubborn = supervisor.Spawn(
      "worker-0", Sh(absl::StrCat("trap '' TERM; touch ", Path("ready"), "; exec sleep 30")));
  ASSERT_TRUE(stubborn.ok());
  ASSERT_TRUE(supervisor
                  .Spawn("worker-1", Sh(absl::StrCat("while [ ! -e ", Path("ready"),
                                                     " ]; do sleep 0.01; done; exit 3")))
                  .ok());
  WaitOptions options;
  options.grace_period = absl::Milliseconds(200);
  const RunResult result = supervisor.Wait(options);

  EXPECT_EQ(result.outcome, RunOutcome::kFailed);
  EXPECT_THAT(result.first_failure, HasSubstr("worker-1"));
  EXPECT_THAT(result.first_failure, HasSubstr("exited with status 3"));
  const ChildStatus& c = Child(result, "worker-0");
  EXPECT_TRUE(c.killed_after_grace);
  EXPECT_EQ(c.term_signal, SIGKILL);
}

TEST_F(SupervisorTest, SecondInterruptSkipsGracePeriod) {
  ASSERT_TRUE(Supervisor::InstallInterruptHandlers().ok());
  Supervisor supervisor;
  ASSERT_TRUE(supervisor
                  .Spawn("worker-0",
                         Sh(absl::StrCat("trap '' TERM; touch ", Path("ready"), "; exec sleep 30")))
                  .ok());
  const std::string ready = Path("ready");
  std::thread ctrl_c_twice([ready] {
    WaitForFile(ready);
    ::kill(::getpid(), SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::kill(::getpid(), SIGINT);
  });
  WaitOptions options;
  options.grace_period = absl::Seconds(30);
  const auto start = std::chrono::steady_clock::now();
  const RunResult result = supervisor.Wait(options);
  ctrl_c_twice.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(result.outcome, RunOutcome::kInterrupted);
  EXPECT_TRUE(result.children[0].killed_after_grace);
}

TEST_F(SupervisorTest, DeadlineStopsRun) {
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn("worker-0", {"/bin/sleep", "30"}).ok());
  WaitOptions options;
  options.timeout = absl::Milliseconds(150);
  const RunResult result = supervisor.Wait(options);
  EXPECT_EQ(result.outcome, RunOutcome::kDeadlineExceeded);
  EXPECT_EQ(result.ExitCode(), 124);
  EXPECT_EQ(result.first_failure, "deadline of 150ms exceeded");
}

TEST_F(SupervisorTest, PeriodicCallbackRunsAndItsErrorStopsRun) {
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn("worker-0", {"/bin/sleep", "30"}).ok());
  int calls = 0;
  WaitOptions options;
  options.callback_interval = absl::Milliseconds(10);
  options.periodic_callback = [&]() -> absl::Status {
    if (++calls == 3) return absl::DataLossError("worker-0 stopped reporting");
    return absl::OkStatus();
  };
  const RunResult result = supervisor.Wait(options);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(result.outcome, RunOutcome::kFailed);
  EXPECT_EQ(result.first_failure, "progress callback: worker-0 stopped reporting");
}

TEST_F(SupervisorTest, StopSignalsReachTheChildsWholeProcessGroup) {
  Supervisor supervisor;
  auto shell = supervisor.Spawn("worker-0",
                                Sh(absl::StrCat("sleep 30 & echo $! > ", Path("pid.tmp"), "; mv ",
                                                Path("pid.tmp"), " ", Path("pid"), "; wait")));
  ASSERT_TRUE(shell.ok());
  WaitForFile(Path("pid"));
  std::ifstream in(Path("pid"));
  pid_t grandchild = 0;
  ASSERT_TRUE(in >> grandchild);
  ProcStat stat;
  ASSERT_TRUE(ReadProcStat(grandchild, &stat));
  EXPECT_EQ(stat.pgrp, *shell) << "each child leads its own process group";

  WaitOptions options;
  options.timeout = absl::Milliseconds(10);
  EXPECT_EQ(supervisor.Wait(options).outcome, RunOutcome::kDeadlineExceeded);
  EXPECT_TRUE(EventuallyDead(grandchild));
}

TEST_F(SupervisorTest, ChildIsTerminatedWhenLauncherDies) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t launcher = ::fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {  // a launcher that dies by SIGKILL, running no destructors
    ::close(pipe_fds[0]);
    Supervisor supervisor;
    auto pid = supervisor.Spawn("worker-0", {"/bin/sleep", "30"});
    const pid_t value = pid.ok() ? *pid : -1;
    (void)!::write(pipe_fds[1], &value, sizeof(value));
    ::raise(SIGKILL);
  }
  ::close(pipe_fds[1]);
  pid_t worker = -1;
  ASSERT_EQ(::read(pipe_fds[0], &worker, sizeof(worker)), static_cast<ssize_t>(sizeof(worker)));
  ::close(pipe_fds[0]);
  ASSERT_GT(worker, 0);
  int wait_status = 0;
  ASSERT_EQ(::waitpid(launcher, &wait_status, 0), launcher);
  EXPECT_TRUE(EventuallyDead(worker)) << "worker outlived its launcher";
}

TEST_F(SupervisorTest, ChildStartsWithDefaultSignalDispositions) {
  struct sigaction ignore = {}, old = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGTERM, &ignore, &old), 0);
  Supervisor supervisor;
  auto spawned = supervisor.Spawn("worker-0", {"/bin/sleep", "30"});
  ::sigaction(SIGTERM, &old, nullptr);
  ASSERT_TRUE(spawned.ok());
  WaitOptions options;
  options.timeout = absl::Milliseconds(10);
  const RunResult result = supervisor.Wait(options);
  EXPECT_EQ(result.children[0].term_signal, SIGTERM);
  EXPECT_FALSE(result.children[0].killed_after_grace);
}

TEST_F(SupervisorTest, EnvironmentAdditionsAndOutputRedirection) {
  ChildSpec spec;
  spec.name = "worker-0";
  spec.argv = Sh("echo \"out $HPTRAIN_TEST_VAR $HOME\"; echo err >&2; read x || echo eof");
  spec.env = {{"HPTRAIN_TEST_VAR", "hello"}, {"HOME", "/nowhere"}};
  spec.stdout_path = Path("log");
  spec.stderr_path = Path("log");
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn(spec).ok());
  EXPECT_EQ(supervisor.Wait().outcome, RunOutcome::kSucceeded);
  std::ifstream in(Path("log"));
  std::stringstream log;
  log << in.rdbuf();
  EXPECT_EQ(log.str(), "out hello /nowhere\nerr\neof\n");
}

TEST_F(SupervisorTest, UnsetVariablesAreLeftOutOfTheInheritedEnvironment) {
  ASSERT_EQ(::setenv("HPTRAIN_TEST_STALE", "stale", 1), 0);
  ASSERT_EQ(::setenv("HPTRAIN_TEST_KEPT", "kept", 1), 0);
  ASSERT_EQ(::setenv("HPTRAIN_TEST_REPLACED", "old", 1), 0);
  ChildSpec spec;
  spec.name = "worker-0";
  spec.argv = Sh("echo \"[${HPTRAIN_TEST_STALE-unset}] [$HPTRAIN_TEST_KEPT] "
                 "[$HPTRAIN_TEST_REPLACED]\"");
  spec.unset_env = {"HPTRAIN_TEST_STALE", "HPTRAIN_TEST_REPLACED", "HPTRAIN_TEST_KEP"};
  spec.env = {{"HPTRAIN_TEST_REPLACED", "new"}};
  spec.stdout_path = Path("log");
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn(spec).ok());
  EXPECT_EQ(supervisor.Wait().outcome, RunOutcome::kSucceeded);
  ::unsetenv("HPTRAIN_TEST_STALE");
  ::unsetenv("HPTRAIN_TEST_KEPT");
  ::unsetenv("HPTRAIN_TEST_REPLACED");
  std::ifstream in(Path("log"));
  std::stringstream log;
  log << in.rdbuf();
  // Whole names only: HPTRAIN_TEST_KEP does not take HPTRAIN_TEST_KEPT with it.
  EXPECT_EQ(log.str(), "[unset] [kept] [new]\n");
}

TEST_F(SupervisorTest, WorkingDirectory) {
  ASSERT_EQ(::mkdir(Path("work").c_str(), 0755), 0);
  std::ofstream(Path("work/run.sh")) << "#!/bin/sh\npwd > " << Path("pwd") << "\n";
  ASSERT_EQ(::chmod(Path("work/run.sh").c_str(), 0755), 0);
  ChildSpec spec;
  spec.name = "worker-0";
  spec.argv = {"./run.sh"};  // found from the working directory
  spec.working_dir = Path("work");
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn(spec).ok());
  EXPECT_EQ(supervisor.Wait().outcome, RunOutcome::kSucceeded);
  std::ifstream in(Path("pwd"));
  std::string pwd;
  std::getline(in, pwd);
  char real[PATH_MAX];
  ASSERT_NE(::realpath(Path("work").c_str(), real), nullptr);
  EXPECT_EQ(pwd, real);

  Supervisor another;
  spec.working_dir = Path("no-such-dir");
  spec.argv = {"/bin/true"};
  auto status = another.Spawn(spec).status();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("no-such-dir"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("worker-0"));
  EXPECT_EQ(another.Wait().outcome, RunOutcome::kSucceeded);
}

TEST_F(SupervisorTest, ExitCheckTurnsAnExitZeroIntoTheRunsFailure) {
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn("ps-0", {"/bin/sleep", "30"}, {}, ChildRole::kService).ok());
  ASSERT_TRUE(supervisor.Spawn("worker-0", {"/bin/true"}).ok());
  ASSERT_TRUE(supervisor.Spawn("worker-1", {"/bin/sleep", "30"}).ok());
  std::vector<std::string> checked;
  WaitOptions options;
  options.grace_period = absl::Seconds(2);
  options.exit_check = [&](const ChildStatus& child) -> absl::Status {
    checked.push_back(child.name);
    return absl::FailedPreconditionError(absl::StrCat(child.Describe(), " too early"));
  };
  const RunResult result = supervisor.Wait(options);
  EXPECT_EQ(result.outcome, RunOutcome::kFailed);
  EXPECT_THAT(result.first_failure, ::testing::MatchesRegex("worker-0 \\(pid [0-9]+\\) exited "
                                                            "with status 0 too early"));
  EXPECT_EQ(result.ExitCode(), 1);
  // Only the child that exited on its own was checked; the others were stopped.
  EXPECT_THAT(checked, ::testing::ElementsAre("worker-0"));
  EXPECT_TRUE(Child(result, "worker-1").stopped_by_supervisor);
  EXPECT_TRUE(Child(result, "ps-0").stopped_by_supervisor);
}

TEST_F(SupervisorTest, ExitCheckThatPassesLetsTheRunSucceed) {
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn("worker-0", {"/bin/true"}).ok());
  ASSERT_TRUE(supervisor.Spawn("worker-1", {"/bin/false"}).ok());
  int calls = 0;
  WaitOptions options;
  options.exit_check = [&](const ChildStatus&) {
    ++calls;
    return absl::OkStatus();
  };
  const RunResult result = supervisor.Wait(options);
  // A failing child fails the run as always; the check sees only exits 0.
  EXPECT_EQ(result.outcome, RunOutcome::kFailed);
  EXPECT_THAT(result.first_failure, HasSubstr("worker-1"));
  EXPECT_LE(calls, 1);

  Supervisor fine;
  ASSERT_TRUE(fine.Spawn("worker-0", {"/bin/true"}).ok());
  calls = 0;
  EXPECT_TRUE(fine.Wait(options).ok());
  EXPECT_EQ(calls, 1);
}

TEST_F(SupervisorTest, SpawnErrorsNameTheChildAndLeaveNothingBehind) {
  Supervisor supervisor;
  auto missing = supervisor.Spawn("worker-3", {dir_ + "/no-such-program"});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("worker-3"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("no-such-program"));

  EXPECT_TRUE(absl::IsNotFound(supervisor.Spawn("w", {"no-such-program-in-path"}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(supervisor.Spawn("w", {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(supervisor.Spawn("", {"/bin/true"}).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(supervisor.Spawn("w", {"/bin/true"}, {{"A=B", "c"}}).status()));

  ChildSpec bad_log;
  bad_log.name = "worker-4";
  bad_log.argv = {"/bin/true"};
  bad_log.stdout_path = dir_ + "/missing-dir/log";
  auto status = supervisor.Spawn(bad_log).status();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("missing-dir/log"));

  EXPECT_THAT(ChildrenOfThisProcess(), IsEmpty());
  EXPECT_EQ(supervisor.Wait().outcome, RunOutcome::kSucceeded);
}

TEST_F(SupervisorTest, ExecFailureIsReportedFromTheChild) {
  // Executable bit but no valid format: only execve() itself can tell.
  const std::string path = Path("not-a-program");
  std::ofstream(path) << "\x7f"
                         "ELF garbage";
  ASSERT_EQ(::chmod(path.c_str(), 0755), 0);
  Supervisor supervisor;
  auto status = supervisor.Spawn("worker-0", {path}).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("execve"));
  EXPECT_THAT(ChildrenOfThisProcess(), IsEmpty());
}

// An elastic job's worker: its failure is absorbed, a replacement is spawned while Wait() runs,
// and the run succeeds once the replacement and the others exit 0.
TEST_F(SupervisorTest, AbsorbedFailureGoesOnAndAReplacementSpawnedDuringWaitCounts) {
  Supervisor supervisor;
  ASSERT_TRUE(supervisor.Spawn("ps-0", {"/bin/sleep", "30"}, {}, ChildRole::kService).ok());
  auto failing = supervisor.Spawn("worker-0", Sh("exit 3"));
  ASSERT_TRUE(failing.ok());
  // worker-1 outlives worker-0's failure: it waits for the replacement's file.
  auto survivor = supervisor.Spawn(
      "worker-1", Sh("while [ ! -e '" + Path("replaced") + "' ]; do sleep 0.01; done"));
  ASSERT_TRUE(survivor.ok());
  std::vector<std::string> absorbed;
  pid_t replacement = -1;
  WaitOptions options;
  options.grace_period = absl::Seconds(2);
  options.absorb_failure = [&](const ChildStatus& child) {
    absorbed.push_back(child.Describe());
    EXPECT_TRUE(supervisor.IsRunning(*survivor));
    auto pid = supervisor.Spawn("worker-0", Sh("touch '" + Path("replaced") + "'"));
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (pid.ok()) replacement = *pid;
    return true;
  };
  const RunResult result = supervisor.Wait(options);
  EXPECT_EQ(result.outcome, RunOutcome::kSucceeded) << result.first_failure;
  ASSERT_EQ(absorbed.size(), 1u);
  EXPECT_EQ(absorbed[0], absl::StrCat("worker-0 (pid ", *failing, ") exited with status 3"));
  ASSERT_EQ(result.children.size(), 4u);
  EXPECT_EQ(result.children[3].pid, replacement);
  EXPECT_TRUE(result.children[3].Succeeded());
  // The survivor was never stopped: it exited 0 on its own, same pid throughout.
  EXPECT_EQ(result.children[2].pid, *survivor);
  EXPECT_TRUE(result.children[2].Succeeded());
  EXPECT_FALSE(result.children[2].stopped_by_supervisor);
  EXPECT_TRUE(Child(result, "ps-0").stopped_by_supervisor);
  EXPECT_FALSE(supervisor.Spawn("late", {"/bin/true"}).ok());  // after Wait() returned
}

TEST_F(SupervisorTest, FailureNotAbsorbedFailsTheRunAndSignalReachesAChild) {
  Supervisor supervisor;
  auto ps = supervisor.Spawn("ps-0", {"/bin/sleep", "30"}, {}, ChildRole::kService);
  ASSERT_TRUE(ps.ok());
  auto worker = supervisor.Spawn("worker-0", {"/bin/sleep", "30"});
  ASSERT_TRUE(worker.ok());
  EXPECT_TRUE(supervisor.IsRunning(*worker));
  EXPECT_TRUE(absl::IsNotFound(supervisor.Signal(::getpid(), SIGKILL)));
  int calls = 0;
  WaitOptions options;
  options.grace_period = absl::Seconds(2);
  options.callback_interval = absl::Milliseconds(10);
  options.periodic_callback = [&]() -> absl::Status {
    if (++calls == 1) return supervisor.Signal(*ps, SIGKILL);  // as `kill SLOT` does
    return absl::OkStatus();
  };
  options.absorb_failure = [&](const ChildStatus& child) { return child.name != "ps-0"; };
  const RunResult result = supervisor.Wait(options);
  EXPECT_EQ(result.outcome, RunOutcome::kFailed);
  EXPECT_EQ(result.first_failure,
            absl::StrCat("ps-0 (pid ", *ps, ") was killed by signal 9 (SIGKILL)"));
  EXPECT_TRUE(Child(result, "worker-0").stopped_by_supervisor);
  EXPECT_FALSE(supervisor.IsRunning(*worker));
  EXPECT_TRUE(absl::IsNotFound(supervisor.Signal(*worker, SIGKILL)));
}

TEST_F(SupervisorTest, DestructorStopsChildrenStillRunning) {
  {
    Supervisor supervisor;
    ASSERT_TRUE(supervisor.Spawn("worker-0", {"/bin/sleep", "30"}).ok());
  }
  EXPECT_THAT(ChildrenOfThisProcess(), IsEmpty());
}

TEST(ChildStatusTest, DescribeNamesExitStatusAndSignal) {
  ChildStatus killed;
  killed.name = "worker-2";
  killed.pid = 1234;
  killed.signaled = true;
  killed.term_signal = 9;
  EXPECT_EQ(killed.Describe(), "worker-2 (pid 1234) was killed by signal 9 (SIGKILL)");
  killed.term_signal = SIGSEGV;
  killed.core_dumped = true;
  EXPECT_EQ(killed.Describe(),
            "worker-2 (pid 1234) was killed by signal 11 (SIGSEGV) (core dumped)");

  ChildStatus exited;
  exited.name = "ps-0";
  exited.pid = 99;
  exited.exited = true;
  exited.exit_code = 2;
  EXPECT_EQ(exited.Describe(), "ps-0 (pid 99) exited with status 2");
  exited.exited = false;
  EXPECT_EQ(exited.Describe(), "ps-0 (pid 99) is still running");
}

TEST(ChildStatusTest, SignalNames) {
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGINT), "SIGINT");
  EXPECT_EQ(SignalName(0), "signal 0");
}

TEST(RunResultTest, ExitCodes) {
  RunResult result;
  EXPECT_EQ(result.ExitCode(), 0);
  result.outcome = RunOutcome::kFailed;
  EXPECT_EQ(result.ExitCode(), 1);
  result.outcome = RunOutcome::kInterrupted;
  result.interrupt_signal = SIGINT;
  EXPECT_EQ(result.ExitCode(), 130);
  result.outcome = RunOutcome::kDeadlineExceeded;
  EXPECT_EQ(result.ExitCode(), 124);
  EXPECT_STREQ(RunOutcomeName(RunOutcome::kInterrupted), "interrupted");
}

}  // namespace
}  // namespace hptrain::job
