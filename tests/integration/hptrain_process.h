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
// `cwd` (optional) is the child's working directory.
ProcessResult RunProcess(const std::vector<std::string>& argv, int timeout_s = 600,
                         const std::function<void(pid_t)>& while_running = nullptr,
                         const std::string& cwd = "");

// Starts argv in the background with stdout and stderr appended to the given files; returns its
// pid (-1 if fork failed). Reap it with Terminate().
pid_t Spawn(const std::vector<std::string>& argv, const std::string& stdout_path,
            const std::string& stderr_path);

// SIGTERM, then up to grace_s seconds for it to exit, then SIGKILL; reaps the child. Returns its
// exit status or 128 + signal (-1 if it could not be reaped).
int Terminate(pid_t pid, int grace_s = 10);

// The whole file ("" if it cannot be read), whether a path exists, and the lines of a text
// (without their '\n'; a final line without '\n' counts too).
std::string ReadFile(const std::string& path);
bool FileExists(const std::string& path);
std::vector<std::string> Lines(const std::string& text);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed).
int FreePort();

// Pids of processes whose command line contains every one of `needles`.
std::vector<pid_t> FindProcesses(const std::vector<std::string>& needles);

// A job file for Fashion-MNIST LeNet-5, with `extra` appended under spec (indented 2 spaces),
// and the given worker groups block (YAML lines, already indented under spec).
std::string LeNetJob(const std::string& name, const std::string& groups, const std::string& extra);

// A job file for a small MLP on the synthetic data set (2,048 samples, 256 test samples; no data
// on disk), `replicas` workers in one group, global batch 64, threads 1, with `extra` appended
// under spec (indented 2 spaces).
std::string SyntheticJob(const std::string& name, int replicas, const std::string& extra);

// `hptrain run examples/fashion-mnist.yaml --quiet --output-json DIR/TAG.json` with each of `sets`
// as a --set (run from the source directory, as ctest does; at most 900 s): the process's result
// and the run summary's text ("" when none was written).
struct DemoRun {
  ProcessResult process;
  std::string summary;
};
DemoRun RunDemoJob(const std::string& dir, const std::string& tag,
                   const std::vector<std::string>& sets);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_INTEGRATION_HPTRAIN_PROCESS_H_
