// Helpers for integration tests that run the real `hptrain` binary as a user would: temporary
// directories, job files, and running a command with its output captured.
#ifndef HPTRAIN_TESTS_INTEGRATION_HPTRAIN_PROCESS_H_
#define HPTRAIN_TESTS_INTEGRATION_HPTRAIN_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace hptrain::testing {

// build/bin/hptrain (from $HPTRAIN_BIN, set by CTest).
std::string HptrainBinary();

// A fresh directory under $TMPDIR, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& contents) const;

 private:
  std::string path_;
};

struct ProcessResult {
  int exit_code = -1;     // exit status, or 128 + signal
  std::string out;        // stdout
  std::string err;        // stderr
};

// Runs argv to completion (bounded by timeout_s, then SIGKILL), capturing stdout and stderr.
// `while_running` (optional) is called about every 50 ms with the child's pid.
ProcessResult RunProcess(const std::vector<std::string>& argv, int timeout_s = 600,
                  const std::function<void(pid_t)>& while_running = nullptr);

// Pids of processes whose command line contains every one of `needles`.
std::vector<pid_t> FindProcesses(const std::vector<std::string>& needles);

// A job file for Fashion-MNIST LeNet-5, with `extra` appended under spec (indented 2 spaces),
// and the given worker groups block (YAML lines, already indented under spec).
std::string LeNetJob(const std::string& name, const std::string& groups, const std::string& extra);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_INTEGRATION_HPTRAIN_PROCESS_H_
