// A child process for the tests of the hptrain-controller binary: started with fork/exec, its
// stdout and stderr collected by a reader thread, signalled and waited for with deadlines.
//
// Thread-safety: the accessors are thread-safe; Start/Signal/Wait are for the test's thread.
#ifndef HPTRAIN_TESTS_CONTROLLER_MANAGER_SUBPROCESS_H_
#define HPTRAIN_TESTS_CONTROLLER_MANAGER_SUBPROCESS_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hptrain::manager::testing {

class Subprocess {
 public:
  Subprocess() = default;
  // Kills (SIGKILL) and reaps a child still running.
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // Runs argv[0] (a path) with `argv`; the environment is the test's minus `unset`, plus `set`
  // ("NAME=value" entries).
  absl::Status Start(const std::vector<std::string>& argv,
                     const std::vector<std::string>& unset = {},
                     const std::vector<std::string>& set = {});

  // Waits until a stderr line satisfies `match` and returns it; nullopt on timeout or exit.
  std::optional<std::string> WaitForStderrLine(const std::function<bool(const std::string&)>& match,
                                               absl::Duration timeout);

  void Signal(int signal);
  // Waits for the child to exit; its exit code (128 + n for a signal n), or nullopt on timeout.
  std::optional<int> Wait(absl::Duration timeout);

  std::string stdout_text() const;
  std::string stderr_text() const;

 private:
  void Read(int fd, bool is_stderr);

  pid_t pid_ = -1;
  std::thread out_reader_;
  std::thread err_reader_;
  mutable absl::Mutex mu_;
  std::string stdout_ ABSL_GUARDED_BY(mu_);
  std::string stderr_ ABSL_GUARDED_BY(mu_);
  int open_streams_ ABSL_GUARDED_BY(mu_) = 0;
};

// Runs argv to completion (at most `timeout`) with the environment changes of Start; returns
// the exit code and fills the outputs (either may be null).
std::optional<int> RunToCompletion(const std::vector<std::string>& argv, std::string* out,
                                   std::string* err, const std::vector<std::string>& unset = {},
                                   const std::vector<std::string>& set = {},
                                   absl::Duration timeout = absl::Seconds(10));

}  // namespace hptrain::manager::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_MANAGER_SUBPROCESS_H_
