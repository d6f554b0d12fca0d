// Supervisor: starts the processes of a local run (`hptrain run`: one `hptrain ps`, N
// `hptrain worker`) and watches them until the run is over, so that no failure goes unnoticed and
// no process outlives the run.
//
// The run, as Wait() drives it:
//   1. Spawn() forks and execs each child. Every child leads its own process group, so a
//      terminal's Ctrl-C reaches only the launcher, which then stops the children in a known order
//      and reports "interrupted" instead of N racing "killed by SIGINT" failures; signals are sent
//      to the whole group, so helpers a child forks are stopped with it. Each child also asks the
//      kernel for SIGTERM when its parent dies (PR_SET_PDEATHSIG), so killing the launcher with
//      SIGKILL does not orphan the run. A child starts with default signal dispositions, an empty
//      signal mask, stdin on /dev/null (a background process group reading the terminal would stop
//      on SIGTTIN), stdout/stderr inherited unless redirected to a file, and no other descriptor
//      of the launcher's.
//   2. Wait() reaps children as they exit. A child that exits non-zero or dies by a signal fails
//      the run: the first such child is reported, and every other child is stopped (step 4) —
//      unless WaitOptions::absorb_failure takes the failure on (an elastic job's worker, which the
//      launcher replaces on its own); an absorbed child counts as done for step 3. Children may
//      be spawned while Wait() runs (from its callbacks): they are watched like the first ones.
//   3. When every kMustSucceed child has exited 0 (or been absorbed) the run has succeeded;
//      kService children (the parameter server) are then stopped (step 4). A service that exits
//      0 on its own before that is fine; one that fails on its own fails the run like any child.
//   4. Stopping: SIGTERM (and SIGCONT, for a stopped child) to each remaining child's process
//      group, up to `grace_period` for them to exit, then SIGKILL, then reap. Every child is
//      reaped before Wait() returns: no zombies.
//   Interruption (SIGINT/SIGTERM to the launcher, after InstallInterruptHandlers()), the deadline
//   and an error from the periodic callback also lead to step 4. A second interrupt during the
//   grace period skips straight to SIGKILL.
//
// Threading: a Supervisor is not thread-safe; Spawn() and Wait() belong to one thread, and that
// thread must outlive the children, because Linux sends the parent-death signal when the thread
// that forked exits, not the process. Wait() reaps only the pids it spawned (waitpid per pid,
// never waitpid(-1)), so it coexists with other code in the process that runs subprocesses.
#ifndef HPTRAIN_RUNTIME_JOB_SUPERVISOR_H_
#define HPTRAIN_RUNTIME_JOB_SUPERVISOR_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hptrain::job {

enum class ChildRole {
  kMustSucceed,  // the run succeeds only when it exits 0 (workers)
  kService,      // runs until the kMustSucceed children are done, then gets SIGTERM (the ps)
};

struct ChildSpec {
  std::string name;               // shown in messages: "worker-2", "ps-0"
  std::vector<std::string> argv;  // argv[0]: a path, or a name looked up in $PATH
  // Added to (or replacing in) the launcher's environment, in order.
  std::vector<std::pair<std::string, std::string>> env;
  // Inherited variables of these names are left out (before `env` applies), so that a value left
  // in the caller's environment cannot reach the child.
  std::vector<std::string> unset_env;
  // Empty: the launcher's. Otherwise the child changes into this directory before the exec, and a
  // relative argv[0] with a '/' is found from it (NotFound from Spawn() when it does not exist).
  std::string working_dir;
  ChildRole role = ChildRole::kMustSucceed;
  // Empty: inherited from the launcher. Otherwise the file is created or truncated (mode 0666 minus
  // umask); stdout and stderr naming the same path share one open file, so lines interleave.
  std::string stdout_path;
  std::string stderr_path;
};

// What became of one child. Until it is reaped, `exited` and `signaled` are both false.
struct ChildStatus {
  std::string name;
  pid_t pid = -1;
  ChildRole role = ChildRole::kMustSucceed;
  bool exited = false;    // ended by exit(); see exit_code
  int exit_code = 0;      // -1: reaped by someone else (SIGCHLD ignored), status unknown
  bool signaled = false;  // ended by a signal; see term_signal
  int term_signal = 0;
  bool core_dumped = false;
  bool stopped_by_supervisor = false;  // it was sent SIGTERM by step 4
  bool killed_after_grace = false;     // it ignored SIGTERM for the grace period and got SIGKILL

  bool Succeeded() const { return exited && exit_code == 0; }
  // "worker-2 (pid 1234) was killed by signal 9 (SIGKILL)", "ps-0 (pid 99) exited with status 2",
  // "worker-0 (pid 7) is still running".
  std::string Describe() const;
};

enum class RunOutcome {
  kSucceeded,         // every kMustSucceed child exited 0
  kFailed,            // a child failed, or the periodic callback returned an error
  kInterrupted,       // SIGINT/SIGTERM reached the launcher (InstallInterruptHandlers)
  kDeadlineExceeded,  // WaitOptions::timeout passed
};

// "succeeded", "failed", "interrupted", "deadline exceeded".
const char* RunOutcomeName(RunOutcome outcome);

struct RunResult {
  RunOutcome outcome = RunOutcome::kSucceeded;
  // One line on what ended the run; empty on success. The first failed child's Describe(),
  // "interrupted by signal 2 (SIGINT)", "deadline of 30s exceeded", or "progress callback: ...".
  std::string first_failure;
  int interrupt_signal = 0;           // the signal behind kInterrupted
  std::vector<ChildStatus> children;  // in Spawn() order, all reaped

  bool ok() const { return outcome == RunOutcome::kSucceeded; }
  // The launcher's process exit code: 0 succeeded, 1 failed, 128 + signal when interrupted (130
  // for Ctrl-C), 124 past the deadline (as timeout(1)).
  int ExitCode() const;
};

struct WaitOptions {
  absl::Duration grace_period = absl::Seconds(5);     // SIGTERM → SIGKILL in step 4
  absl::Duration timeout = absl::InfiniteDuration();  // for the whole run, from Wait()'s start
  // Called on Wait()'s thread about every `callback_interval` while children run (not during step
  // 4), e.g. to read workers' progress and redraw a progress bar. Returning an error stops the run
  // with kFailed and "progress callback: <message>". May be empty.
  std::function<absl::Status()> periodic_callback;
  absl::Duration callback_interval = absl::Milliseconds(200);
  // Called on Wait()'s thread once for each child that exits 0 on its own (not stopped by step 4),
  // as soon as it is reaped, e.g. to check that a worker did its part before it left. Returning an
  // error fails the run (kFailed) with the error's message as first_failure, then step 4. May be
  // empty.
  std::function<absl::Status(const ChildStatus&)> exit_check;
  // Called once when a child's failure ends the wait, before the others are stopped (while they
  // can still be asked what they saw, e.g. the failing worker's report to the coordinator).
  std::function<void()> before_stop;
  // Called on Wait()'s thread once for each child that fails on its own (exits non-zero or dies
  // by a signal, not stopped by step 4), as soon as it is reaped. Returning true absorbs the
  // failure: the run goes on and the child counts as done for step 3 (the callback may Spawn() a
  // replacement). Returning false, or leaving it empty, fails the run as step 2 says.
  std::function<bool(const ChildStatus&)> absorb_failure;
};

class Supervisor {
 public:
  Supervisor();
  // Stops (step 4, default grace period) and reaps any children still running, e.g. when the caller
  // returns early after a failed Spawn(). Blocks up to the grace period.
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts a child as described in step 1 and returns its pid once it has exec'd. Blocks only until
  // the exec succeeds or fails. Errors, naming the child and the program or file: InvalidArgument
  // for an empty name or argv or a bad environment variable name; NotFound when argv[0] does not
  // exist (or is not in $PATH) or a redirect file's directory does not exist; PermissionDenied when
  // it is not executable; Internal when execve() rejects it (e.g. ENOEXEC) or fork fails;
  // FailedPrecondition once Wait() has returned (during Wait(), from its callbacks, it may be
  // called). A failed Spawn() leaves no process behind.
  absl::StatusOr<pid_t> Spawn(const ChildSpec& spec);
  absl::StatusOr<pid_t> Spawn(const std::string& name, const std::vector<std::string>& argv,
                              const std::vector<std::pair<std::string, std::string>>& env = {},
                              ChildRole role = ChildRole::kMustSucceed);

  // Sends `signo` to the process group of the running child `pid` (as step 4 does). Errors:
  // NotFound when `pid` is not a child of this Supervisor or has been reaped. Does not block.
  absl::Status Signal(pid_t pid, int signo);
  // Whether `pid` is a child of this Supervisor that has not been reaped yet.
  bool IsRunning(pid_t pid) const;

  // Runs steps 2-4 and returns when every child has been reaped. Call once. With no children it
  // returns kSucceeded at once. Blocks up to `options.timeout` plus the grace period.
  RunResult Wait(const WaitOptions& options = {});

  // Installs process-wide SIGINT and SIGTERM handlers that make a running Wait() (on any
  // Supervisor) stop its children and return kInterrupted; a signal that arrives before Wait() is
  // kept for it, so every later Wait() returns kInterrupted until UninstallInterruptHandlers().
  // From then on these signals no longer end the process by themselves. Idempotent. Call it and
  // UninstallInterruptHandlers() from one thread (main, at start-up and shut-down): they are not
  // thread-safe with each other. Errors: Internal if the self-pipe or sigaction() fails.
  static absl::Status InstallInterruptHandlers();
  // Restores the dispositions InstallInterruptHandlers() replaced and forgets a pending interrupt.
  static void UninstallInterruptHandlers();

 private:
  struct Child {
    ChildStatus status;
    int pidfd = -1;  // readable once the child has exited; -1 where pidfd_open is unavailable
    bool reaped = false;
    bool exit_checked = false;  // WaitOptions::exit_check has seen it
    bool failure_checked = false;  // a failure on its own has been classified (Wait())
    bool absorbed = false;         // WaitOptions::absorb_failure took its failure on
  };

  bool AllReaped() const;
  bool AllMustSucceedDone() const;
  // Sleeps until a child exits, an interrupt arrives or `until` passes, whichever comes first.
  void WaitForEvents(absl::Time until) const;
  void ReapExited();
  void RecordExit(size_t index, std::optional<int> wait_status);  // nullopt: status lost
  void SignalGroup(Child& child, int signo);
  void StopAll(absl::Duration grace_period);
  RunResult MakeResult(RunOutcome outcome, std::string first_failure, int interrupt_signal) const;

  std::vector<Child> children_;
  int first_failed_ = -1;  // index of the first child that failed on its own
  bool waited_ = false;    // Wait() has returned
};

// "SIGKILL" for 9, "SIGTERM" for 15, ...; "signal N" for one it does not know.
std::string SignalName(int signo);

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_SUPERVISOR_H_
