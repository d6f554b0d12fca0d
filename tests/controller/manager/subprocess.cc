#include "tests/controller/manager/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_split.h"

extern char** environ;

namespace hptrain::manager::testing {

Subprocess::~Subprocess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    Wait(absl::Seconds(10));
  }
  if (out_reader_.joinable()) out_reader_.join();
  if (err_reader_.joinable()) err_reader_.join();
}

absl::Status Subprocess::Start(const std::vector<std::string>& argv,
                               const std::vector<std::string>& unset,
                               const std::vector<std::string>& set) {
  int out[2];
  int err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    return absl::InternalError(std::strerror(errno));
  }
  // Built before fork: the child only calls async-signal-safe functions.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    bool drop = false;
    for (const std::string& u : unset) drop = drop || u == name;
    for (const std::string& s : set) drop = drop || s.substr(0, s.find('=')) == name;
    if (!drop) env_strings.push_back(entry);
  }
  env_strings.insert(env_strings.end(), set.begin(), set.end());
  std::vector<char*> env;
  for (const std::string& e : env_strings) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);

  pid_ = fork();
  if (pid_ < 0) return absl::InternalError(std::strerror(errno));
  if (pid_ == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    // The test runner may block signals in its threads; the child starts with a clean mask.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(args[0], args.data(), env.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  {
    absl::MutexLock lock(&mu_);
    open_streams_ = 2;
  }
  out_reader_ = std::thread([this, fd = out[0]] { Read(fd, /*is_stderr=*/false); });
  err_reader_ = std::thread([this, fd = err[0]] { Read(fd, /*is_stderr=*/true); });
  return absl::OkStatus();
}

void Subprocess::Read(int fd, bool is_stderr) {
  char buffer[4096];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    absl::MutexLock lock(&mu_);
    (is_stderr ? stderr_ : stdout_).append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  absl::MutexLock lock(&mu_);
  --open_streams_;
}

std::optional<std::string> Subprocess::WaitForStderrLine(
    const std::function<bool(const std::string&)>& match, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    bool open;
    std::string text;
    {
      absl::MutexLock lock(&mu_);
      text = stderr_;
      open = open_streams_ > 0;
    }
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      std::string l(line);
      if (match(l)) return l;
    }
    if (!open || absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

void Subprocess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

std::optional<int> Subprocess::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return std::nullopt;
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      if (out_reader_.joinable()) out_reader_.join();
      if (err_reader_.joinable()) err_reader_.join();
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

std::string Subprocess::stdout_text() const {
  absl::MutexLock lock(&mu_);
  return stdout_;
}

std::string Subprocess::stderr_text() const {
  absl::MutexLock lock(&mu_);
  return stderr_;
}

std::optional<int> RunToCompletion(const std::vector<std::string>& argv, std::string* out,
                                   std::string* err, const std::vector<std::string>& unset,
                                   const std::vector<std::string>& set, absl::Duration timeout) {
  Subprocess process;
  if (!process.Start(argv, unset, set).ok()) return std::nullopt;
  std::optional<int> code = process.Wait(timeout);
  if (out != nullptr) *out = process.stdout_text();
  if (err != nullptr) *err = process.stderr_text();
  return code;
}

}  // namespace hptrain::manager::testing
