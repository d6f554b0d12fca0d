// `hptrain worker` as the controller runs it in a pod, configured through the environment:
// $HPTRAIN_RESUME is --resume (the command line overriding it), a bad value is refused in one
// line, and the worker says how many libtorch threads it uses and why (--workers-on-host).
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

::testing::AssertionResult Contains(const std::string& text, const std::string& needle) {
  if (text.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << needle << "\" not in: " << text;
}

// Sets an environment variable for the lifetime of the object (children inherit it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

// A one-worker job whose spec.checkpoint.path holds a file that is not a checkpoint: a worker
// that resumes fails naming it, one that does not trains its two steps.
class WorkerResume : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("HPTRAIN_RESUME");
    dir_.Write("ckpt", "this file is not an hptrain checkpoint\n");
    job_ = dir_.Write("job.yaml", SyntheticJob("resume-env", 1,
                                               "  maxSteps: 2\n  checkpoint: {path: " + ckpt_ +
                                                   "}\n"));
    token_ = dir_.Write("token", "secret\n");
  }

  // Runs the worker against a ps of its own (started and stopped here).
  ProcessResult RunWorker(const std::vector<std::string>& extra) {
    const std::string port_file = dir_.path() + "/ps.port";
    std::remove(port_file.c_str());
    const pid_t ps = Spawn({HptrainBinary(), "ps", "--job", job_, "--token-file", token_, "--port",
                            "0", "--port-file", port_file, "--metrics-port", "0", "--linger", "0"},
                           dir_.path() + "/ps.out", dir_.path() + "/ps.err");
    EXPECT_GT(ps, 0);
    std::string ports;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while ((ports = ReadFile(port_file)).empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (ports.empty()) {
      Terminate(ps);
      ADD_FAILURE() << "the ps did not start: " << ReadFile(dir_.path() + "/ps.err");
      return {};
    }
    std::vector<std::string> argv = {HptrainBinary(), "worker", "--job", job_, "--coordinator",
                                     "127.0.0.1:" + ports.substr(0, ports.find(' ')), "--rank",
                                     "0", "--token-file", token_, "--metrics-port", "0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ProcessResult result = RunProcess(argv, 120);
    Terminate(ps);
    return result;
  }

  TempDir dir_;
  const std::string ckpt_ = dir_.path() + "/ckpt";
  std::string job_;
  std::string token_;
};

TEST_F(WorkerResume, EnvironmentVariableResumes) {
  for (const char* value : {"1", "true"}) {
    ScopedEnv resume("HPTRAIN_RESUME", value);
    ProcessResult r = RunWorker({});
    EXPECT_EQ(r.exit_code, 2) << "HPTRAIN_RESUME=" << value << "\n" << r.err;
    EXPECT_TRUE(Contains(r.err, ckpt_ + ": not a checkpoint")) << "HPTRAIN_RESUME=" << value;
  }
}

TEST_F(WorkerResume, CommandLineOverridesTheEnvironment) {
  ScopedEnv resume("HPTRAIN_RESUME", "1");
  ProcessResult r = RunWorker({"--resume=false"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The start-up line: the job's spec.threads (1).
  EXPECT_TRUE(Contains(r.err, "hptrain worker 0: 1 libtorch thread (spec.threads)"));
}

TEST_F(WorkerResume, FalseOrUnsetTrainsFromScratch) {
  {
    ScopedEnv resume("HPTRAIN_RESUME", "0");
    ProcessResult r = RunWorker({});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  // Without the variable, and with spec.threads 0: the host's share of this worker.
  ProcessResult r = RunWorker({"--set", "spec.threads=0", "--workers-on-host", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.err, "over 2 workers on this host)"));
}

TEST(WorkerFlags, BadValuesAreRefusedInOneLine) {
  TempDir dir;
  const std::string job = dir.Write("job.yaml", SyntheticJob("flags", 1, ""));
  {
    ScopedEnv resume("HPTRAIN_RESUME", "maybe");
    ProcessResult r = RunProcess({HptrainBinary(), "worker", "--job", job}, 60);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
    EXPECT_TRUE(Contains(r.err, "$HPTRAIN_RESUME: expected 1, true, 0 or false, got \"maybe\""));
  }
  ProcessResult r = RunProcess({HptrainBinary(), "worker", "--job", job, "--coordinator",
                                "127.0.0.1:1", "--rank", "0", "--workers-on-host", "0"},
                               60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(Contains(r.err, "--workers-on-host must be at least 1, got 0"));
}

TEST(WorkerFlags, HelpNamesTheEnvironmentVariables) {
  ProcessResult r = RunProcess({HptrainBinary(), "worker", "--help"}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "$HPTRAIN_RESUME"));
  EXPECT_TRUE(Contains(r.out, "--workers-on-host"));
  EXPECT_TRUE(Contains(r.out, "[$HPTRAIN_WORKERS_ON_HOST]"));
}

}  // namespace
}  // namespace hptrain::testing
