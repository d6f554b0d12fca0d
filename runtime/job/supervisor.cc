#include "runtime/job/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status.h"

extern char** environ;

namespace hptrain::job {
namespace {

// Where pidfds are unavailable (kernels before 5.3) Wait() falls back to polling at this period.
constexpr absl::Duration kFallbackPollPeriod = absl::Milliseconds(20);

// Interrupt state shared by the signal handler and every Supervisor: a signal handler can only
// touch lock-free atomics and write(2), so it bumps a counter and wakes poll() through a pipe.
std::atomic<int> g_interrupt_count{0};
std::atomic<int> g_interrupt_signal{0};
int g_interrupt_pipe[2] = {-1, -1};
bool g_handlers_installed = false;
struct sigaction g_old_sigint;
struct sigaction g_old_sigterm;

void OnInterrupt(int signo) {
  const int saved_errno = errno;
  int expected = 0;
  g_interrupt_signal.compare_exchange_strong(expected, signo);
  g_interrupt_count.fetch_add(1);
  if (g_interrupt_pipe[1] >= 0) {
    const char byte = 1;
    (void)!::write(g_interrupt_pipe[1], &byte, 1);  // a full pipe already wakes the reader
  }
  errno = saved_errno;
}

void DrainInterruptPipe() {
  if (g_interrupt_pipe[0] < 0) return;
  char buffer[64];
  while (::read(g_interrupt_pipe[0], buffer, sizeof(buffer)) > 0) {
  }
}

// What a child that fails between fork() and a successful execve() writes to the parent.
struct ExecFailure {
  const char* stage;  // a string literal, so the pointer is valid in the parent (same image)
  int error;
};

// `working_dir` (empty: the launcher's) is where the child will run, which a relative path names
// a program from.
absl::StatusOr<std::string> ResolveProgram(const std::string& program,
                                           const std::string& working_dir) {
  auto executable = [](const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    const std::string path = program.front() == '/' || working_dir.empty()
                                 ? program
                                 : absl::StrCat(working_dir, "/", program);
    if (executable(path)) return path;
    if (::access(path.c_str(), F_OK) != 0) return HPTRAIN_ERRNO(absl::StrCat("program ", path));
    return absl::PermissionDeniedError(absl::StrCat("program ", path, " is not executable"));
  }
  const char* path_env = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", program);
    if (executable(candidate)) return candidate;
  }
  return absl::NotFoundError(absl::StrCat("program ", program, " not found in $PATH"));
}

absl::StatusOr<std::vector<std::string>> BuildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& additions,
    const std::vector<std::string>& unset) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const absl::string_view text(*entry);
    const absl::string_view name = text.substr(0, text.find('='));
    if (std::find(unset.begin(), unset.end(), name) == unset.end()) env.emplace_back(text);
  }
  for (const auto& [key, value] : additions) {
    if (key.empty() || key.find('=') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("bad environment variable name '", key, "'"));
    }
    const std::string prefix = key + "=";
    auto it = std::find_if(env.begin(), env.end(), [&](const std::string& e) {
      return e.compare(0, prefix.size(), prefix) == 0;
    });
    if (it != env.end()) {
      *it = prefix + value;
    } else {
      env.push_back(prefix + value);
    }
  }
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Owns the descriptors Spawn() opens in the parent; all are O_CLOEXEC.
struct SpawnFds {
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int report[2] = {-1, -1};
  ~SpawnFds() {
    for (int fd : {stdin_fd, stdout_fd, stderr_fd, report[0], report[1]}) {
      if (fd >= 0 && fd != stdout_fd) ::close(fd);
    }
    if (stdout_fd >= 0) ::close(stdout_fd);  // stderr_fd may alias it; close it once
  }
};

absl::StatusOr<int> OpenOutput(const std::string& path, const char* which) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return HPTRAIN_ERRNO(absl::StrCat("open ", which, " file ", path));
  return fd;
}

// Runs in the child between fork() and execve(): only async-signal-safe calls, no allocation (the
// parent may be multi-threaded, and another thread may have held the malloc lock at fork time).
[[noreturn]] void ExecChild(const char* program, char* const argv[], char* const envp[],
                            const char* working_dir, const SpawnFds& fds, pid_t parent) {
  auto fail = [&](const char* stage) {
    const ExecFailure failure{stage, errno};
    (void)!::write(fds.report[1], &failure, sizeof(failure));
    ::_exit(127);
  };
  // Start from default signal dispositions and an empty mask whatever the launcher uses: exec keeps
  // ignored signals ignored and the mask as is. Signals are blocked until the mask is reset here.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);  // EINVAL for some: fine
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  ::setpgid(0, 0);
  if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) fail("prctl(PR_SET_PDEATHSIG)");
  // The parent may have died before prctl: then we were re-parented and no signal will come.
  if (::getppid() != parent) ::_exit(128 + SIGTERM);

  const int targets[3] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
  const int sources[3] = {fds.stdin_fd, fds.stdout_fd, fds.stderr_fd};
  for (int i = 0; i < 3; ++i) {
    if (sources[i] < 0) continue;
    if (sources[i] == targets[i]) {
      if (::fcntl(targets[i], F_SETFD, 0) != 0) fail("fcntl");  // dup2 onto itself keeps CLOEXEC
    } else if (::dup2(sources[i], targets[i]) < 0) {
      fail("dup2");
    }
  }
  // Descriptors the launcher opened without O_CLOEXEC (sockets, other children's pipes) must not
  // leak into the child, where they would hold connections and pipes open. Best effort
  // (Linux 5.11).
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);

  if (working_dir != nullptr && ::chdir(working_dir) != 0) fail("chdir");
  ::execve(program, argv, envp);
  fail("execve");
  ::_exit(127);  // not reached
}

// Prepares everything the child needs (after fork() it may not allocate), forks, and returns once
// the child has exec'd the program, or its error once it has failed to and been reaped.
absl::StatusOr<pid_t> ForkExec(const ChildSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("empty argv");
  if (!spec.working_dir.empty()) {
    struct stat st;
    if (::stat(spec.working_dir.c_str(), &st) != 0) {
      return HPTRAIN_ERRNO(absl::StrCat("working directory ", spec.working_dir));
    }
    if (!S_ISDIR(st.st_mode)) {
      return absl::NotFoundError(
          absl::StrCat("working directory ", spec.working_dir, " is not a directory"));
    }
  }
  HPTRAIN_ASSIGN_OR_RETURN(const std::string program,
                           ResolveProgram(spec.argv[0], spec.working_dir));
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<char*> argv = CStrings(argv_strings);
  HPTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> env_strings,
                           BuildEnvironment(spec.env, spec.unset_env));
  std::vector<char*> envp = CStrings(env_strings);

  SpawnFds fds;
  fds.stdin_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fds.stdin_fd < 0) return HPTRAIN_ERRNO("open /dev/null");
  if (!spec.stdout_path.empty()) {
    HPTRAIN_ASSIGN_OR_RETURN(fds.stdout_fd, OpenOutput(spec.stdout_path, "stdout"));
  }
  if (!spec.stderr_path.empty()) {
    if (spec.stderr_path == spec.stdout_path) {
      fds.stderr_fd = fds.stdout_fd;
    } else {
      HPTRAIN_ASSIGN_OR_RETURN(fds.stderr_fd, OpenOutput(spec.stderr_path, "stderr"));
    }
  }
  if (::pipe2(fds.report, O_CLOEXEC) != 0) return HPTRAIN_ERRNO("pipe2");

  // With every signal blocked across fork(), the launcher's handlers (InstallInterruptHandlers)
  // cannot run in the child before ExecChild() has reset them; the child unblocks them itself.
  sigset_t all_signals;
  sigset_t old_mask;
  sigfillset(&all_signals);
  ::pthread_sigmask(SIG_SETMASK, &all_signals, &old_mask);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ExecChild(program.c_str(), argv.data(), envp.data(),
              spec.working_dir.empty() ? nullptr : spec.working_dir.c_str(), fds, parent);
  }
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) return ErrnoStatus(fork_errno, "fork", __FILE__, __LINE__);

  // Both sides set the group, so a signal sent right after Spawn() returns reaches the group
  // whichever ran first. EACCES here means the child already exec'd: it set the group itself.
  ::setpgid(pid, pid);
  ::close(fds.report[1]);
  fds.report[1] = -1;
  ExecFailure failure{};
  ssize_t n;
  do {
    n = ::read(fds.report[0], &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof(failure))) {  // the child has _exit()ed
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    const std::string subject = std::string(failure.stage) == "chdir" ? spec.working_dir : program;
    return ErrnoStatus(failure.error, absl::StrCat(failure.stage, " ", subject), __FILE__,
                       __LINE__);
  }
  return pid;  // n == 0: the report pipe closed on exec, so the child runs the program
}

}  // namespace

std::string SignalName(int signo) {
  switch (signo) {
#define HPTRAIN_SIGNAL_CASE(name) \
  case name:                      \
    return #name;
    HPTRAIN_SIGNAL_CASE(SIGHUP)
    HPTRAIN_SIGNAL_CASE(SIGINT)
    HPTRAIN_SIGNAL_CASE(SIGQUIT)
    HPTRAIN_SIGNAL_CASE(SIGILL)
    HPTRAIN_SIGNAL_CASE(SIGTRAP)
    HPTRAIN_SIGNAL_CASE(SIGABRT)
    HPTRAIN_SIGNAL_CASE(SIGBUS)
    HPTRAIN_SIGNAL_CASE(SIGFPE)
    HPTRAIN_SIGNAL_CASE(SIGKILL)
    HPTRAIN_SIGNAL_CASE(SIGUSR1)
    HPTRAIN_SIGNAL_CASE(SIGSEGV)
    HPTRAIN_SIGNAL_CASE(SIGUSR2)
    HPTRAIN_SIGNAL_CASE(SIGPIPE)
    HPTRAIN_SIGNAL_CASE(SIGALRM)
    HPTRAIN_SIGNAL_CASE(SIGTERM)
    HPTRAIN_SIGNAL_CASE(SIGCHLD)
    HPTRAIN_SIGNAL_CASE(SIGCONT)
    HPTRAIN_SIGNAL_CASE(SIGSTOP)
    HPTRAIN_SIGNAL_CASE(SIGTSTP)
    HPTRAIN_SIGNAL_CASE(SIGTTIN)
    HPTRAIN_SIGNAL_CASE(SIGTTOU)
    HPTRAIN_SIGNAL_CASE(SIGURG)
    HPTRAIN_SIGNAL_CASE(SIGXCPU)
    HPTRAIN_SIGNAL_CASE(SIGXFSZ)
    HPTRAIN_SIGNAL_CASE(SIGVTALRM)
    HPTRAIN_SIGNAL_CASE(SIGPROF)
    HPTRAIN_SIGNAL_CASE(SIGWINCH)
    HPTRAIN_SIGNAL_CASE(SIGIO)
    HPTRAIN_SIGNAL_CASE(SIGPWR)
    HPTRAIN_SIGNAL_CASE(SIGSYS)
#undef HPTRAIN_SIGNAL_CASE
    default:
      return absl::StrCat("signal ", signo);
  }
}

std::string ChildStatus::Describe() const {
  const std::string who = absl::StrCat(name, " (pid ", pid, ")");
  if (signaled) {
    return absl::StrCat(who, " was killed by signal ", term_signal, " (", SignalName(term_signal),
                        ")", core_dumped ? " (core dumped)" : "");
  }
  if (exited && exit_code < 0) return absl::StrCat(who, " was reaped elsewhere; status unknown");
  if (exited) return absl::StrCat(who, " exited with status ", exit_code);
  return absl::StrCat(who, " is still running");
}

const char* RunOutcomeName(RunOutcome outcome) {
  switch (outcome) {
    case RunOutcome::kSucceeded:
      return "succeeded";
    case RunOutcome::kFailed:
      return "failed";
    case RunOutcome::kInterrupted:
      return "interrupted";
    case RunOutcome::kDeadlineExceeded:
      return "deadline exceeded";
  }
  return "unknown";
}

int RunResult::ExitCode() const {
  switch (outcome) {
    case RunOutcome::kSucceeded:
      return 0;
    case RunOutcome::kFailed:
      return 1;
    case RunOutcome::kInterrupted:
      return 128 + (interrupt_signal > 0 ? interrupt_signal : SIGINT);
    case RunOutcome::kDeadlineExceeded:
      return 124;
  }
  return 1;
}

Supervisor::Supervisor() = default;

Supervisor::~Supervisor() {
  if (!AllReaped()) StopAll(WaitOptions().grace_period);
  for (Child& child : children_) {
    if (child.pidfd >= 0) ::close(child.pidfd);
  }
}

absl::StatusOr<pid_t> Supervisor::Spawn(const std::string& name,
                                        const std::vector<std::string>& argv,
                                        const std::vector<std::pair<std::string, std::string>>& env,
                                        ChildRole role) {
  ChildSpec spec;
  spec.name = name;
  spec.argv = argv;
  spec.env = env;
  spec.role = role;
  return Spawn(spec);
}

absl::StatusOr<pid_t> Supervisor::Spawn(const ChildSpec& spec) {
  if (waited_) return absl::FailedPreconditionError("Spawn() after Wait()");
  if (spec.name.empty()) return absl::InvalidArgumentError("spawn: empty child name");
  auto pid = ForkExec(spec);
  if (!pid.ok()) return Annotate(pid.status(), absl::StrCat("spawn ", spec.name));
  Child child;
  child.status.name = spec.name;
  child.status.pid = *pid;
  child.status.role = spec.role;
  // The raw syscall: glibc 2.36's <sys/pidfd.h> lacks extern "C", and older glibcs lack the
  // wrapper. pidfds are always close-on-exec. -1 (ENOSYS) before Linux 5.3: Wait() then polls.
  child.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, *pid, 0));
  children_.push_back(std::move(child));
  return *pid;
}

bool Supervisor::AllReaped() const {
  return std::all_of(children_.begin(), children_.end(), [](const Child& c) { return c.reaped; });
}

bool Supervisor::AllMustSucceedDone() const {
  return std::all_of(children_.begin(), children_.end(), [](const Child& c) {
    return c.status.role != ChildRole::kMustSucceed || c.absorbed ||
           (c.reaped && c.status.Succeeded());
  });
}

absl::Status Supervisor::Signal(pid_t pid, int signo) {
  for (Child& child : children_) {
    if (child.status.pid != pid || child.reaped) continue;
    SignalGroup(child, signo);
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("pid ", pid, " is not a running child"));
}

bool Supervisor::IsRunning(pid_t pid) const {
  return std::any_of(children_.begin(), children_.end(),
                     [&](const Child& c) { return c.status.pid == pid && !c.reaped; });
}

void Supervisor::RecordExit(size_t index, std::optional<int> wait_status) {
  Child& child = children_[index];
  child.reaped = true;
  if (child.pidfd >= 0) {
    ::close(child.pidfd);
    child.pidfd = -1;
  }
  ChildStatus& s = child.status;
  if (wait_status && WIFEXITED(*wait_status)) {
    s.exited = true;
    s.exit_code = WEXITSTATUS(*wait_status);
  } else if (wait_status && WIFSIGNALED(*wait_status)) {
    s.signaled = true;
    s.term_signal = WTERMSIG(*wait_status);
    s.core_dumped = WCOREDUMP(*wait_status);
  } else {  // ECHILD: someone else reaped it (SIGCHLD ignored, or a waitpid(-1) elsewhere)
    s.exited = true;
    s.exit_code = -1;
  }
}

void Supervisor::ReapExited() {
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i].reaped) continue;
    int wait_status = 0;
    pid_t r;
    do {
      r = ::waitpid(children_[i].status.pid, &wait_status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == children_[i].status.pid) {
      RecordExit(i, wait_status);
    } else if (r < 0 && errno == ECHILD) {
      RecordExit(i, std::nullopt);
    }
  }
}

// Children are watched through pidfds rather than SIGCHLD (a handler or signalfd/sigtimedwait with
// the signal blocked): SIGCHLD dispositions and masks are process-wide and would interfere with
// other code in the launcher that runs subprocesses; a pidfd concerns one child only.
void Supervisor::WaitForEvents(absl::Time until) const {
  std::vector<pollfd> fds;
  bool need_polling = false;
  if (g_interrupt_pipe[0] >= 0) fds.push_back({g_interrupt_pipe[0], POLLIN, 0});
  for (const Child& child : children_) {
    if (child.reaped) continue;
    if (child.pidfd >= 0) {
      fds.push_back({child.pidfd, POLLIN, 0});
    } else {
      need_polling = true;
    }
  }
  absl::Duration wait = until - absl::Now();
  if (need_polling) wait = std::min(wait, kFallbackPollPeriod);
  int timeout_ms = -1;
  if (wait != absl::InfiniteDuration()) {
    timeout_ms = static_cast<int>(std::clamp<int64_t>(
        absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1))), 0, INT_MAX));
  }
  // EINTR (a signal ran its handler on this thread) just returns early; the caller re-checks.
  ::poll(fds.data(), fds.size(), timeout_ms);
  DrainInterruptPipe();
}

void Supervisor::SignalGroup(Child& child, int signo) {
  // The group dies with its leader only once all members are gone; a child that left its group
  // (setsid) is still signalled directly.
  if (::kill(-child.status.pid, signo) != 0) ::kill(child.status.pid, signo);
}

void Supervisor::StopAll(absl::Duration grace_period) {
  for (Child& child : children_) {
    if (child.reaped) continue;
    child.status.stopped_by_supervisor = true;
    SignalGroup(child, SIGTERM);
    SignalGroup(child, SIGCONT);  // a stopped (SIGSTOP) child acts on SIGTERM only once continued
  }
  const absl::Time grace_deadline = absl::Now() + grace_period;
  const int interrupts_before = g_interrupt_count.load();
  for (;;) {
    ReapExited();
    if (AllReaped() || absl::Now() >= grace_deadline) break;
    if (g_interrupt_count.load() != interrupts_before) break;  // a second Ctrl-C: no more grace
    WaitForEvents(grace_deadline);
  }
  for (Child& child : children_) {
    if (child.reaped) continue;
    child.status.killed_after_grace = true;
    SignalGroup(child, SIGKILL);
  }
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i].reaped) continue;
    int wait_status = 0;
    pid_t r;
    do {
      r = ::waitpid(children_[i].status.pid, &wait_status, 0);  // SIGKILL cannot be ignored
    } while (r < 0 && errno == EINTR);
    RecordExit(i, r == children_[i].status.pid ? std::optional<int>(wait_status) : std::nullopt);
  }
}

RunResult Supervisor::MakeResult(RunOutcome outcome, std::string first_failure,
                                 int interrupt_signal) const {
  RunResult result;
  result.outcome = outcome;
  result.first_failure = std::move(first_failure);
  result.interrupt_signal = interrupt_signal;
  for (const Child& child : children_) result.children.push_back(child.status);
  return result;
}

RunResult Supervisor::Wait(const WaitOptions& options) {
  struct MarkWaited {
    bool* waited;
    ~MarkWaited() { *waited = true; }
  } mark_waited{&waited_};
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options.timeout;
  absl::Time next_callback =
      options.periodic_callback ? start + options.callback_interval : absl::InfiniteFuture();
  for (;;) {
    ReapExited();
    // By index, with a copy of the status: a callback may Spawn() and so grow children_.
    for (size_t i = 0; first_failed_ < 0 && i < children_.size(); ++i) {
      if (!children_[i].reaped || children_[i].failure_checked) continue;
      children_[i].failure_checked = true;
      const ChildStatus status = children_[i].status;
      if (status.stopped_by_supervisor || status.Succeeded()) continue;
      if (options.absorb_failure && options.absorb_failure(status)) {
        children_[i].absorbed = true;
      } else {
        first_failed_ = static_cast<int>(i);
      }
    }
    if (first_failed_ < 0 && options.exit_check) {
      for (size_t i = 0; i < children_.size(); ++i) {
        if (!children_[i].reaped || children_[i].exit_checked || !children_[i].status.Succeeded()) {
          continue;
        }
        children_[i].exit_checked = true;
        const ChildStatus status = children_[i].status;
        if (absl::Status checked = options.exit_check(status); !checked.ok()) {
          StopAll(options.grace_period);
          return MakeResult(RunOutcome::kFailed, std::string(checked.message()), 0);
        }
      }
    }
    if (first_failed_ >= 0) {
      std::string failure = children_[first_failed_].status.Describe();
      if (options.before_stop) options.before_stop();
      StopAll(options.grace_period);
      return MakeResult(RunOutcome::kFailed, std::move(failure), 0);
    }
    if (AllMustSucceedDone()) {
      StopAll(options.grace_period);  // only services are left
      return MakeResult(RunOutcome::kSucceeded, "", 0);
    }
    if (g_interrupt_count.load() > 0) {
      const int signo = g_interrupt_signal.load();
      StopAll(options.grace_period);
      return MakeResult(RunOutcome::kInterrupted,
                        absl::StrCat("interrupted by signal ", signo, " (", SignalName(signo), ")"),
                        signo);
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      StopAll(options.grace_period);
      return MakeResult(
          RunOutcome::kDeadlineExceeded,
          absl::StrCat("deadline of ", absl::FormatDuration(options.timeout), " exceeded"), 0);
    }
    if (now >= next_callback) {
      absl::Status status = options.periodic_callback();
      next_callback = absl::Now() + options.callback_interval;
      if (!status.ok()) {
        StopAll(options.grace_period);
        return MakeResult(RunOutcome::kFailed,
                          absl::StrCat("progress callback: ", status.message()), 0);
      }
      continue;  // the callback may have taken a while: re-check children first
    }
    WaitForEvents(std::min(deadline, next_callback));
  }
}

absl::Status Supervisor::InstallInterruptHandlers() {
  if (g_handlers_installed) return absl::OkStatus();
  if (g_interrupt_pipe[0] < 0 && ::pipe2(g_interrupt_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return HPTRAIN_ERRNO("interrupt self-pipe");
  }
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (::sigaction(SIGINT, &action, &g_old_sigint) != 0) return HPTRAIN_ERRNO("sigaction(SIGINT)");
  if (::sigaction(SIGTERM, &action, &g_old_sigterm) != 0) {
    absl::Status status = HPTRAIN_ERRNO("sigaction(SIGTERM)");
    ::sigaction(SIGINT, &g_old_sigint, nullptr);
    return status;
  }
  g_handlers_installed = true;
  return absl::OkStatus();
}

void Supervisor::UninstallInterruptHandlers() {
  if (g_handlers_installed) {
    ::sigaction(SIGINT, &g_old_sigint, nullptr);
    ::sigaction(SIGTERM, &g_old_sigterm, nullptr);
    g_handlers_installed = false;
  }
  DrainInterruptPipe();
  g_interrupt_count.store(0);
  g_interrupt_signal.store(0);
}

}  // namespace hptrain::job
