#include "runtime/job/worker_process.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace hptrain::job {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

// Two groups: a (2 workers), b (1).
JobSpec TwoGroups() {
  JobSpec spec;
  spec.name = "job";
  spec.global_batch_size = 24;
  WorkerGroupSpec a;
  a.name = "a";
  a.replicas = 2;
  WorkerGroupSpec b;
  b.name = "b";
  b.replicas = 1;
  spec.worker_groups = {a, b};
  return spec;
}

WorkerLaunch Launch() {
  WorkerLaunch launch;
  launch.binary = "/opt/hptrain/bin/hptrain";
  launch.job_file = "/jobs/own.yaml";
  launch.overrides = {"spec.epochs=2", "spec.seed=5"};
  launch.coordinator = "10.0.0.1:4000";
  launch.token_file = "/run/token";
  launch.rendezvous_timeout_s = 7;
  return launch;
}

std::map<std::string, std::string> EnvMap(const WorkerProcess& p) {
  std::map<std::string, std::string> env;
  for (const auto& [key, value] : p.env) {
    EXPECT_TRUE(env.emplace(key, value).second) << key << " set twice";
  }
  return env;
}

TEST(WorkerProcessTest, BuiltinWorkerGetsFlags) {
  JobSpec spec = TwoGroups();
  WorkerLaunch launch = Launch();
  launch.resume = true;
  WorkerProcess p = MakeWorkerProcess(spec, launch, 1, HostPlacement{});
  EXPECT_THAT(p.argv,
              ElementsAre("/opt/hptrain/bin/hptrain", "worker", "--job", "/jobs/own.yaml", "--set",
                          "spec.epochs=2", "--set", "spec.seed=5", "--coordinator", "10.0.0.1:4000",
                          "--rank", "1", "--token-file", "/run/token", "--bind", "127.0.0.1",
                          "--metrics-host", "127.0.0.1", "--metrics-port", "0", "--workers-on-host",
                          "3", "--rendezvous-timeout", "7", "--resume"));
  EXPECT_THAT(p.env, IsEmpty());
  EXPECT_THAT(p.unset_env, IsEmpty());
  EXPECT_EQ(p.working_dir, "");
}

TEST(WorkerProcessTest, BuiltinWorkerBehindAPlacementWithTls) {
  WorkerLaunch launch = Launch();
  launch.overrides.clear();
  launch.placed = true;
  launch.tls_dir = "/run/tls";
  HostPlacement host{{"ip", "netns", "exec", "h2"}, "10.90.0.3"};
  WorkerProcess p = MakeWorkerProcess(TwoGroups(), launch, 2, host);
  EXPECT_THAT(p.argv, ElementsAre("ip", "netns", "exec", "h2", "/opt/hptrain/bin/hptrain", "worker",
                                  "--job", "/jobs/own.yaml", "--coordinator", "10.0.0.1:4000",
                                  "--rank", "2", "--token-file", "/run/token", "--bind",
                                  "10.90.0.3", "--metrics-host", "10.90.0.3", "--metrics-port", "0",
                                  "--workers-on-host", "3", "--node-name", "10.90.0.3", "--tls-dir",
                                  "/run/tls", "--rendezvous-timeout", "7", "--resume=false"));
}

TEST(WorkerProcessTest, TrainerGetsTheEnvironmentOfEachRank) {
  JobSpec spec = TwoGroups();
  spec.trainer.command = {"python3", "train.py"};
  spec.trainer.args = {"--lr", "0.1"};
  WorkerLaunch launch = Launch();
  launch.python_path = "/opt/hptrain/python:/site";
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE(rank);
    WorkerProcess p = MakeWorkerProcess(spec, launch, rank, HostPlacement{});
    EXPECT_THAT(p.argv, ElementsAre("python3", "train.py", "--lr", "0.1"));
    EXPECT_EQ(p.working_dir, "/jobs");
    const std::map<std::string, std::string> want = {
        {"HPTRAIN_JOB", "/jobs/own.yaml"},
        {"HPTRAIN_SET", "spec.epochs=2\nspec.seed=5"},
        {"HPTRAIN_COORDINATOR", "10.0.0.1:4000"},
        {"HPTRAIN_RANK", std::to_string(rank)},
        {"HPTRAIN_GROUP", rank < 2 ? "a" : "b"},
        {"HPTRAIN_LOCAL_RANK", std::to_string(rank)},
        {"HPTRAIN_WORKERS_ON_HOST", "3"},
        {"HPTRAIN_TOKEN_FILE", "/run/token"},
        {"HPTRAIN_BIND_HOST", "127.0.0.1"},
        {"HPTRAIN_METRICS_HOST", "127.0.0.1"},
        {"HPTRAIN_METRICS_PORT", "0"},
        {"HPTRAIN_RENDEZVOUS_TIMEOUT", "7"},
        {"HPTRAIN_RESUME", "0"},
        {"PYTHONPATH", "/opt/hptrain/python:/site"},
    };
    EXPECT_EQ(EnvMap(p), want);
    // What the launcher does not set may not come from the caller's environment either.
    EXPECT_THAT(p.unset_env, Contains("HPTRAIN_NODE_NAME"));
    EXPECT_THAT(p.unset_env, Contains("HPTRAIN_TLS_DIR"));
    EXPECT_THAT(p.unset_env, Contains("HPTRAIN_SET"));
  }
}

TEST(WorkerProcessTest, TrainerBehindAPlacementWithTlsAndResume) {
  JobSpec spec = TwoGroups();
  spec.trainer.command = {"/usr/bin/env", "python3", "train.py"};
  spec.trainer.working_dir = "../src";
  WorkerLaunch launch = Launch();
  launch.overrides.clear();
  launch.placed = true;
  launch.tls_dir = "/run/tls";
  launch.resume = true;
  HostPlacement host{{"ip", "netns", "exec", "h1"}, "10.90.0.2"};
  WorkerProcess p = MakeWorkerProcess(spec, launch, 0, host);
  EXPECT_THAT(p.argv,
              ElementsAre("ip", "netns", "exec", "h1", "/usr/bin/env", "python3", "train.py"));
  EXPECT_EQ(p.working_dir, "/src");
  std::map<std::string, std::string> env = EnvMap(p);
  EXPECT_EQ(env["HPTRAIN_NODE_NAME"], "10.90.0.2");
  EXPECT_EQ(env["HPTRAIN_BIND_HOST"], "10.90.0.2");
  EXPECT_EQ(env["HPTRAIN_METRICS_HOST"], "10.90.0.2");
  EXPECT_EQ(env["HPTRAIN_TLS_DIR"], "/run/tls");
  EXPECT_EQ(env["HPTRAIN_RESUME"], "1");
  EXPECT_EQ(env.count("HPTRAIN_SET"), 0u);  // absent without --set
  EXPECT_EQ(env.count("PYTHONPATH"), 0u);   // no package directory: inherited as is
}

TEST(WorkerProcessTest, RelativeJobFileIsMadeAbsolute) {
  JobSpec spec = TwoGroups();
  spec.trainer.command = {"./train.sh"};
  WorkerLaunch launch = Launch();
  launch.job_file = "jobs/../jobs/own.yaml";
  WorkerProcess p = MakeWorkerProcess(spec, launch, 0, HostPlacement{});
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_EQ(EnvMap(p)["HPTRAIN_JOB"], cwd + "/jobs/own.yaml");
  EXPECT_EQ(p.working_dir, cwd + "/jobs");
  spec.trainer.working_dir = "/abs/dir/";
  EXPECT_EQ(MakeWorkerProcess(spec, launch, 0, HostPlacement{}).working_dir, "/abs/dir");
}

TEST(WorkerProcessTest, PythonPath) {
  const std::string dir = ::testing::TempDir() + "/worker_process_test_python";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/bin");
  const std::string binary = dir + "/bin/hptrain";
  // No package directory beside the binary: what was there.
  EXPECT_EQ(TrainerPythonPath(binary, "", ""), "");
  EXPECT_EQ(TrainerPythonPath(binary, "", "/site"), "/site");
  // The build's package directory, <binary's directory>/../python, first.
  std::filesystem::create_directories(dir + "/python");
  const std::string package = std::filesystem::path(dir + "/python").lexically_normal().string();
  EXPECT_EQ(TrainerPythonPath(binary, "", ""), package);
  EXPECT_EQ(TrainerPythonPath(binary, "", "/site"), package + ":/site");
  // $HPTRAIN_PYTHONPATH wins.
  EXPECT_EQ(TrainerPythonPath(binary, "/pkg", "/site"), "/pkg:/site");
  std::filesystem::remove_all(dir);
}

TEST(WorkerProcessTest, JoinMessagesNameTheWorkers) {
  EXPECT_THAT(MissingRanks({0, 2}, 4), ElementsAre(1, 3));
  EXPECT_THAT(MissingRanks({2, 0, 1}, 3), IsEmpty());
  EXPECT_THAT(MissingRanks({}, 2), ElementsAre(0, 1));
  EXPECT_THAT(NotJoinedMessage({2}, 120), StartsWith("worker 2 did not join the job within 120 s"));
  EXPECT_THAT(NotJoinedMessage({2}, 120), HasSubstr("did the program call hp.init()?"));
  EXPECT_THAT(NotJoinedMessage({1, 3}, 5),
              StartsWith("workers 1, 3 did not join the job within 5 s"));
  std::string exited = ExitedWithoutJoiningMessage("worker-1 (pid 7) exited with status 0");
  EXPECT_THAT(exited, StartsWith("worker-1 (pid 7) exited with status 0 without joining the job"));
  EXPECT_THAT(exited, HasSubstr("hp.init()"));
  EXPECT_THAT(exited, Not(HasSubstr("\n")));
}

}  // namespace
}  // namespace hptrain::job
