// spec.trainer under `hptrain run`: the user's program starts once per worker, in place of
// `hptrain worker`, with the HPTRAIN_* environment of the contract (runtime/job/worker_process.h),
// in the job file's directory or spec.trainer.workingDir, behind the placement's prefix; and what
// the user sees when it fails: a program that exits 1 (its last lines in the run's output, the
// run failed or restarted per spec.runPolicy), one that never joins the job (named after the
// rendezvous timeout), one that exits 0 without joining.
//
// The programs are shell scripts written here. A script cannot call hp.init(), so the successful
// one records what it was given and then becomes `hptrain worker` of an equivalent built-in job:
// the real worker reads the same HPTRAIN_* variables, joins the job and trains it, and the run
// ends with its summary as any other.
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

// The job's settings both the program's job and the built-in one share (the ps reads the
// former, the built-in worker the latter).
std::string JobText(const std::string& name, const std::string& head, const std::string& extra) {
  return "apiVersion: hptrain.io/v1alpha1\n"
         "kind: TrainingJob\n"
         "metadata:\n"
         "  name: " +
         name +
         "\n"
         "spec:\n" +
         head +
         "  strategy: {type: ssgd}\n"
         "  optimizer: {type: sgd, lr: 0.1}\n"
         "  globalBatchSize: 64\n"
         "  maxSteps: 3\n"
         "  threads: 1\n"
         "  workers: {replicas: 2}\n" +
         extra;
}

// A job whose workers run `command` (a YAML list).
std::string TrainerJob(const std::string& name, const std::string& trainer,
                       const std::string& extra = "") {
  return JobText(name, "  trainer: " + trainer + "\n", extra);
}

std::string BuiltinJob(const std::string& name) {
  return JobText(name,
                 "  model: {name: mlp, hidden: [16]}\n"
                 "  dataset: {name: synthetic, synthetic: {samples: 512, testSamples: 64}}\n",
                 "");
}

std::string WriteScript(const TempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir.Write(name, "#!/bin/sh\n" + body);
  chmod(path.c_str(), 0755);
  return path;
}

std::string RealPath(const std::string& path) {
  char buffer[PATH_MAX];
  return realpath(path.c_str(), buffer) != nullptr ? std::string(buffer) : path;
}

// The NUL-separated output of `env -0` as a map.
std::map<std::string, std::string> ParseEnv(const std::string& text) {
  std::map<std::string, std::string> env;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    const std::string entry = text.substr(start, end - start);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
    start = end + 1;
  }
  return env;
}

std::string LastLine(const std::string& text) {
  std::vector<std::string> lines = Lines(text);
  return lines.empty() ? "" : lines.back();
}

// Sets an environment variable for the life of a test, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::string old_;
  bool had_ = false;
};

TEST(Trainer, EachWorkerRunsTheProgramWithTheContractsEnvironment) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/jobs");
  const std::string builtin = dir.Write("builtin.yaml", BuiltinJob("trainer-env"));
  // Records its arguments, environment and directory, then becomes the built-in worker.
  const std::string script =
      WriteScript(dir, "record.sh",
                  "out=" + dir.path() +
                      "\n"
                      "printf '%s\\n' \"$@\" > \"$out/args.$HPTRAIN_RANK\"\n"
                      "env -0 > \"$out/env.$HPTRAIN_RANK\"\n"
                      "pwd -P > \"$out/cwd.$HPTRAIN_RANK\"\n"
                      "cat \"$HPTRAIN_TOKEN_FILE\" > \"$out/token.$HPTRAIN_RANK\"\n"
                      "exec " +
                      HptrainBinary() + " worker --job " + builtin + "\n");
  dir.Write("jobs/own.yaml",
            TrainerJob("trainer-env", "{command: [/bin/sh, " + script + "], args: [a b, c]}"));
  // Each worker behind its host's prefix, which marks its environment.
  const std::string placement =
      dir.Write("placement.yaml",
                "ps: {address: 127.0.0.1}\n"
                "workers:\n"
                "  - {exec: [env, PLACED_ON=host-0], address: 127.0.0.1}\n"
                "  - {exec: [env, PLACED_ON=host-1], address: 127.0.0.1}\n");
  ScopedEnv package("HPTRAIN_PYTHONPATH", "/opt/hptrain-python");
  ScopedEnv inherited("PYTHONPATH", "/site");
  // From the temporary directory, with a relative job path: HPTRAIN_JOB must still name it.
  ProcessResult r = RunProcess(
      {HptrainBinary(), "run", "jobs/own.yaml", "--quiet", "--set", "spec.seed=9", "--set",
       "spec.evalEverySteps=0", "--placement", placement, "--output-json", "summary.json"},
      300, nullptr, dir.path());
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "stderr:\n" << r.err;
  // The built-in worker the script became trained the job: the summary is the usual one.
  EXPECT_NE(ReadFile(dir.path() + "/summary.json").find("trainer-env"), std::string::npos);

  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string suffix = "." + std::to_string(rank);
    EXPECT_EQ(ReadFile(dir.path() + "/args" + suffix), "a b\nc\n");
    EXPECT_EQ(ReadFile(dir.path() + "/cwd" + suffix), RealPath(dir.path() + "/jobs") + "\n");
    std::map<std::string, std::string> env = ParseEnv(ReadFile(dir.path() + "/env" + suffix));
    EXPECT_EQ(env["HPTRAIN_JOB"], RealPath(dir.path()) + "/jobs/own.yaml");
    EXPECT_EQ(env["HPTRAIN_SET"], "spec.seed=9\nspec.evalEverySteps=0");
    EXPECT_EQ(env["HPTRAIN_RANK"], std::to_string(rank));
    EXPECT_EQ(env["HPTRAIN_LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(env["HPTRAIN_GROUP"], "worker");
    EXPECT_EQ(env["HPTRAIN_WORKERS_ON_HOST"], "2");
    EXPECT_TRUE(std::regex_match(env["HPTRAIN_COORDINATOR"], std::regex("127\\.0\\.0\\.1:[0-9]+")))
        << env["HPTRAIN_COORDINATOR"];
    EXPECT_NE(ReadFile(dir.path() + "/token" + suffix), "") << "the token file is readable";
    EXPECT_EQ(env["HPTRAIN_BIND_HOST"], "127.0.0.1");
    EXPECT_EQ(env["HPTRAIN_METRICS_HOST"], "127.0.0.1");
    EXPECT_EQ(env["HPTRAIN_METRICS_PORT"], "0");
    EXPECT_EQ(env["HPTRAIN_NODE_NAME"], "127.0.0.1");  // the placement's host
    EXPECT_EQ(env["HPTRAIN_RENDEZVOUS_TIMEOUT"], "120");
    EXPECT_EQ(env["HPTRAIN_RESUME"], "0");
    EXPECT_EQ(env.count("HPTRAIN_TLS_DIR"), 0u);  // no spec.security.tls
    EXPECT_EQ(env["PYTHONPATH"], "/opt/hptrain-python:/site");
    EXPECT_EQ(env["PLACED_ON"], "host-" + std::to_string(rank));
  }
  // Both workers got the same coordinator and token.
  std::map<std::string, std::string> env0 = ParseEnv(ReadFile(dir.path() + "/env.0"));
  std::map<std::string, std::string> env1 = ParseEnv(ReadFile(dir.path() + "/env.1"));
  EXPECT_EQ(env0["HPTRAIN_COORDINATOR"], env1["HPTRAIN_COORDINATOR"]);
  EXPECT_EQ(env0["HPTRAIN_TOKEN_FILE"], env1["HPTRAIN_TOKEN_FILE"]);
  EXPECT_EQ(ReadFile(dir.path() + "/token.0"), ReadFile(dir.path() + "/token.1"));
}

TEST(Trainer, ProgramThatExitsOneFailsTheRunWithItsLastLines) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/src");
  // Relative to the working directory, which is relative to the job file's.
  WriteScript(dir, "src/train.sh",
              "if [ \"$HPTRAIN_RANK\" = 1 ]; then\n"
              "  echo \"rank 1: loading the data\" >&2\n"
              "  echo \"rank 1: loss is nan at step 3, giving up\" >&2\n"
              "  exit 1\n"
              "fi\n"
              "exec sleep 60\n");
  const std::string job =
      dir.Write("own.yaml", TrainerJob("trainer-fails", "{command: [./train.sh], workingDir: src}",
                                       "  runPolicy: {restartPolicy: Never}\n"));
  ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 120);
  EXPECT_EQ(r.exit_code, 1) << "stdout:\n" << r.out << "stderr:\n" << r.err;
  EXPECT_NE(r.err.find("rank 1: loss is nan at step 3, giving up"), std::string::npos) << r.err;
  const std::string last = LastLine(r.err);
  EXPECT_TRUE(std::regex_search(last, std::regex("^hptrain run: worker-1 \\(pid [0-9]+\\) exited "
                                                 "with status 1.*restartPolicy is Never$")))
      << last;
}

TEST(Trainer, ProgramThatExitsOneRestartsTheGangPerRunPolicy) {
  TempDir dir;
  const std::string script = WriteScript(dir, "train.sh",
                                         "echo \"rank $HPTRAIN_RANK resume=$HPTRAIN_RESUME "
                                         "set=${HPTRAIN_SET-none}\" >&2\n"
                                         "[ \"$HPTRAIN_RANK\" = 0 ] && exit 1\n"
                                         "exec sleep 60\n");
  const std::string checkpoint = dir.path() + "/own.ckpt";
  const std::string job = dir.Write(
      "own.yaml", TrainerJob("trainer-restarts", "{command: [" + script + "]}",
                             "  checkpoint: {path: " + checkpoint +
                                 "}\n"
                                 "  runPolicy: {restartPolicy: OnFailure, backoffLimit: 1}\n"));
  // Not the run's (it has no --set): must not reach the program.
  ScopedEnv stale("HPTRAIN_SET", "spec.epochs=99");
  ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 120);
  EXPECT_EQ(r.exit_code, 1) << "stdout:\n" << r.out << "stderr:\n" << r.err;
  // The first gang, then the restarted one, which resumes (from the start: no checkpoint yet).
  EXPECT_NE(r.err.find("rank 0 resume=0 set=none"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("restarting the gang from the start (no checkpoint yet) (restart 1 of at "
                       "most 1)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("rank 0 resume=1 set=none"), std::string::npos) << r.err;
  const std::string last = LastLine(r.err);
  EXPECT_TRUE(std::regex_search(
      last, std::regex("^hptrain run: worker-0 \\(pid [0-9]+\\) exited with status 1.*"
                       "backoffLimit is 1, reached after 1 gang restarts$")))
      << last;
}

TEST(Trainer, ProgramsThatNeverJoinAreNamedAfterTheRendezvousTimeout) {
  TempDir dir;
  const std::string script = WriteScript(dir, "idle.sh", "exec sleep 60\n");
  const std::string job =
      dir.Write("own.yaml", TrainerJob("trainer-idle", "{command: [" + script + "]}",
                                       "  runPolicy: {restartPolicy: Never}\n"));
  ProcessResult r =
      RunProcess({HptrainBinary(), "run", job, "--quiet", "--rendezvous-timeout", "2"}, 120);
  EXPECT_EQ(r.exit_code, 1) << "stdout:\n" << r.out << "stderr:\n" << r.err;
  EXPECT_EQ(LastLine(r.err),
            "hptrain run: workers 0, 1 did not join the job within 2 s (never registered with the "
            "coordinator): did the program call hp.init()?; runPolicy.restartPolicy is Never")
      << r.err;
}

TEST(Trainer, TheWorkerThatDoesNotJoinIsNamed) {
  TempDir dir;
  const std::string builtin = dir.Write("builtin.yaml", BuiltinJob("trainer-half"));
  // Rank 0 joins (as the built-in worker, waiting long enough for its peer); rank 1 never does.
  const std::string script = WriteScript(dir, "half.sh",
                                         "if [ \"$HPTRAIN_RANK\" = 0 ]; then\n"
                                         "  export HPTRAIN_RENDEZVOUS_TIMEOUT=120\n"
                                         "  exec " +
                                             HptrainBinary() + " worker --job " + builtin +
                                             "\n"
                                             "fi\n"
                                             "exec sleep 60\n");
  const std::string job =
      dir.Write("own.yaml", TrainerJob("trainer-half", "{command: [" + script + "]}",
                                       "  runPolicy: {restartPolicy: Never}\n"));
  // HPTRAIN_RENDEZVOUS_TIMEOUT configures `hptrain run` as --rendezvous-timeout does.
  ScopedEnv timeout("HPTRAIN_RENDEZVOUS_TIMEOUT", "15");
  ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 120);
  EXPECT_EQ(r.exit_code, 1) << "stdout:\n" << r.out << "stderr:\n" << r.err;
  // Rank 1 for sure; rank 0 too only if it could not even register within 15 s.
  EXPECT_TRUE(std::regex_match(LastLine(r.err),
                               std::regex("hptrain run: (worker 1|workers 0, 1) did not join the "
                                          "job within 15 s .*hp\\.init\\(\\)\\?.*")))
      << r.err;
}

TEST(Trainer, ProgramThatExitsZeroWithoutJoiningFailsTheRun) {
  TempDir dir;
  const std::string script = WriteScript(dir, "quick.sh",
                                         "[ \"$HPTRAIN_RANK\" = 0 ] && exit 0\n"
                                         "exec sleep 60\n");
  const std::string job =
      dir.Write("own.yaml", TrainerJob("trainer-quick", "{command: [" + script + "]}",
                                       "  runPolicy: {restartPolicy: Never}\n"));
  ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 120);
  EXPECT_EQ(r.exit_code, 1) << "stdout:\n" << r.out << "stderr:\n" << r.err;
  EXPECT_TRUE(std::regex_match(
      LastLine(r.err),
      std::regex("hptrain run: worker-0 \\(pid [0-9]+\\) exited with status 0 without joining the "
                 "job .*hp\\.init\\(\\)\\?; runPolicy\\.restartPolicy is Never")))
      << r.err;
}

TEST(Trainer, BadInputIsOneLineAndNothingStarts) {
  TempDir dir;
  const std::string both =
      dir.Write("both.yaml", JobText("trainer-both",
                                     "  trainer: {command: [python3, train.py]}\n"
                                     "  model: {name: lenet5}\n",
                                     ""));
  ProcessResult r = RunProcess({HptrainBinary(), "run", both}, 60);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("spec.model: cannot be combined with spec.trainer"), std::string::npos)
      << r.err;

  const std::string nowhere = dir.Write(
      "nowhere.yaml", TrainerJob("trainer-nowhere", "{command: [./t.sh], workingDir: missing}"));
  r = RunProcess({HptrainBinary(), "run", nowhere}, 60);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("spec.trainer.workingDir: " + dir.path() + "/missing is not a directory"),
            std::string::npos)
      << r.err;

  r = RunProcess({HptrainBinary(), "run", nowhere, "--rendezvous-timeout", "0"}, 60);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--rendezvous-timeout must be at least 1 second"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace hptrain::testing
