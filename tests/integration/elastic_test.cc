// Elastic membership through the real binary (docs/elastic.md):
//   - a planned removal (or a join) at step k ends with the parameters of a run that trained k
//     steps with the old members, then resumed from its checkpoint with the new ones;
//   - SIGKILL of one worker of four: the others keep their processes, the killed one is started
//     again and rejoins, the job completes within half a point of an uninterrupted run.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/train/checkpoint.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

constexpr int kSteps = 48;

// The synthetic MLP with momentum (so the optimizer's state has to move too), 4 worker slots.
std::string ElasticJob(const std::string& name, int replicas, const std::string& checkpoint) {
  return SyntheticJob(name, replicas,
                      "  epochs: 2\n"
                      "  maxSteps: " + std::to_string(kSteps) + "\n"
                      "  elastic: {minReplicas: 2, maxReplicas: 4}\n"
                      "  checkpoint: {path: " + checkpoint + "}\n"
                      "  testing: {slowdown: [40, 40, 40, 40]}\n");
}

void Append(const std::string& path, const std::string& line) {
  std::ofstream out(path, std::ios::app);
  out << line << "\n";
}

nlohmann::json Summary(const std::string& path) {
  nlohmann::json summary = nlohmann::json::parse(ReadFile(path), nullptr, false);
  EXPECT_FALSE(summary.is_discarded()) << path << ": " << ReadFile(path);
  return summary;
}

// Largest |a - b| over the largest |b|.
double RelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// A run of the elastic job that appends `command` to its control file once every worker runs;
// returns the first membership change of its summary (the one `command` caused).
struct ChangedRun {
  ProcessResult process;
  nlohmann::json summary;
  int64_t step = -1;  // the step the new epoch began at
};

ChangedRun RunWithChange(const TempDir& dir, const std::string& job, int replicas,
                         const std::vector<std::string>& sets, const std::string& command) {
  const std::string control = dir.Write("control-" + std::to_string(replicas), "");
  const std::string json = dir.path() + "/changed.json";
  std::vector<std::string> argv = {HptrainBinary(), "run",  job,     "--quiet",
                                   "--control",     control, "--output-json", json};
  for (const auto& set : sets) argv.insert(argv.end(), {"--set", set});
  bool sent = false;
  std::chrono::steady_clock::time_point all_started;
  ChangedRun run;
  run.process = RunProcess(argv, 300, [&](pid_t) {
    if (sent) return;
    if (all_started == std::chrono::steady_clock::time_point()) {
      if (FindProcesses({job, "worker", "--rank " + std::to_string(replicas - 1)}).empty()) return;
      all_started = std::chrono::steady_clock::now();
    }
    // A moment for training to get going, so that the change falls inside the run.
    if (std::chrono::steady_clock::now() - all_started < std::chrono::seconds(1)) return;
    Append(control, command);
    sent = true;
  });
  if (run.process.exit_code != 0) return run;
  run.summary = Summary(json);
  const auto& changes = run.summary["membership_changes"];
  if (changes.is_array() && !changes.empty()) run.step = changes[0]["effective_step"].get<int64_t>();
  return run;
}

// The reference: `before` workers train `step` steps (their final checkpoint records where they
// stopped), then `after` workers resume from that checkpoint to the end. Returns the parameters.
std::vector<float> ReferenceParameters(const TempDir& dir, const std::string& job, int before,
                                       int after, int64_t step,
                                       const std::vector<std::string>& sets) {
  const std::string checkpoint = dir.path() + "/reference.ckpt";
  std::vector<std::string> first = {HptrainBinary(), "run", job, "--quiet",
                                    "--set", "spec.workers.replicas=" + std::to_string(before),
                                    "--set", "spec.maxSteps=" + std::to_string(step),
                                    "--set", "spec.checkpoint.path=" + checkpoint};
  std::vector<std::string> second = {HptrainBinary(), "run", job, "--quiet", "--resume",
                                     "--set", "spec.workers.replicas=" + std::to_string(after),
                                     "--set", "spec.checkpoint.path=" + checkpoint};
  for (const auto& set : sets) {
    first.insert(first.end(), {"--set", set});
    second.insert(second.end(), {"--set", set});
  }
  ProcessResult a = RunProcess(first, 300);
  EXPECT_EQ(a.exit_code, 0) << a.err;
  auto stopped = train::LoadCheckpoint(checkpoint);
  EXPECT_TRUE(stopped.ok()) << stopped.status();
  if (!stopped.ok()) return {};
  EXPECT_EQ(stopped->step, step);
  ProcessResult b = RunProcess(second, 300);
  EXPECT_EQ(b.exit_code, 0) << b.err;
  auto final_state = train::LoadCheckpoint(checkpoint);
  EXPECT_TRUE(final_state.ok()) << final_state.status();
  if (!final_state.ok()) return {};
  EXPECT_EQ(final_state->step, kSteps);
  return final_state->sections["params"];
}

struct ExactnessCase {
  std::string name;
  std::string strategy;
  bool join;  // 3 workers, one joins; else 4 workers, slot 3 removed
};

void PrintTo(const ExactnessCase& c, std::ostream* out) { *out << c.name; }

class ElasticExactness : public ::testing::TestWithParam<ExactnessCase> {};

TEST_P(ElasticExactness, AChangeAtStepKIsACheckpointAndAResume) {
  const ExactnessCase& c = GetParam();
  TempDir dir;
  const std::string changed_ckpt = dir.path() + "/changed.ckpt";
  const int before = c.join ? 3 : 4;
  const int after = c.join ? 4 : 3;
  const std::string job = dir.Write("job.yaml", ElasticJob("exact", before, changed_ckpt));
  const std::vector<std::string> sets = {"spec.strategy.type=" + c.strategy,
                                         "spec.optimizer.momentum=0.9"};
  ChangedRun changed = RunWithChange(dir, job, before, sets, c.join ? "add" : "remove 3 at 16");
  ASSERT_EQ(changed.process.exit_code, 0) << changed.process.err;
  ASSERT_GT(changed.step, 0) << changed.summary.dump();
  ASSERT_LT(changed.step, kSteps) << "the change came after the run's last step";
  const auto& change = changed.summary["membership_changes"][0];
  EXPECT_EQ(change["reason"], c.join ? "joined" : "removed");
  EXPECT_EQ(change["members"].size(), static_cast<size_t>(after));
  auto changed_state = train::LoadCheckpoint(changed_ckpt);
  ASSERT_TRUE(changed_state.ok()) << changed_state.status();
  EXPECT_EQ(changed_state->step, kSteps);

  std::vector<float> reference = ReferenceParameters(dir, job, before, after, changed.step, sets);
  const std::vector<float>& params = changed_state->sections["params"];
  ASSERT_EQ(params.size(), reference.size());
  const double relative = RelativeDifference(params, reference);
  std::printf("%s: change at step %lld, largest relative difference %.3g\n", c.name.c_str(),
              static_cast<long long>(changed.step), relative);
  EXPECT_LE(relative, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(
    Planned, ElasticExactness,
    ::testing::Values(ExactnessCase{"SsgdRemoval", "ssgd", false},
                      ExactnessCase{"SsgdJoin", "ssgd", true},
                      ExactnessCase{"PsRemoval", "ps", false},
                      ExactnessCase{"PsJoin", "ps", true}),
    [](const ::testing::TestParamInfo<ExactnessCase>& info) { return info.param.name; });

// Pids of the workers of `job` by slot.
std::map<int, pid_t> WorkerPids(const std::string& job, int slots) {
  std::map<int, pid_t> pids;
  for (int slot = 0; slot < slots; ++slot) {
    std::vector<pid_t> found = FindProcesses({job, "worker", "--rank " + std::to_string(slot)});
    if (found.size() == 1) pids[slot] = found[0];
  }
  return pids;
}

double TestAccuracy(const nlohmann::json& summary) {
  return summary["final"]["test_accuracy"].get<double>();
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class ElasticKill : public ::testing::TestWithParam<std::string> {};

TEST_P(ElasticKill, OneWorkerKilledMidStepIsReplacedAloneAndTheJobCompletes) {
  const std::string strategy = GetParam();
  TempDir dir;
  // Long enough, with a learning rate that decays to 0 at the end, and a test set large enough
  // (half a point is 10 samples), that the accuracy says more than the trajectory's noise.
  const std::vector<std::string> sets = {"spec.strategy.type=" + strategy,
                                         "spec.maxSteps=320",
                                         "spec.epochs=10",
                                         "spec.checkpoint.intervalSteps=20",
                                         "spec.dataset.synthetic.testSamples=2048",
                                         "spec.testing.slowdown=[20, 20, 20, 20]",
                                         "spec.optimizer.schedule.type=cosine"};
  auto run = [&](const std::string& tag, const std::function<void(pid_t)>& poll) {
    const std::string job =
        dir.Write(tag + ".yaml", ElasticJob("kill-" + tag, 4, dir.path() + "/" + tag + ".ckpt"));
    std::vector<std::string> argv = {HptrainBinary(), "run", job, "--quiet", "--output-json",
                                     dir.path() + "/" + tag + ".json"};
    for (const auto& set : sets) argv.insert(argv.end(), {"--set", set});
    ProcessResult result = RunProcess(argv, 180, poll);
    return std::make_pair(result, job);
  };
  auto [plain, plain_job] = run("plain", std::function<void(pid_t)>());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;

  const std::string job = dir.path() + "/killed.yaml";
  std::map<int, pid_t> before;
  pid_t killed = -1, replacement = -1;
  double killed_at = 0;
  bool others_kept = true;
  const std::string ckpt = dir.path() + "/killed.ckpt";
  auto [result, killed_job] = run("killed", [&](pid_t) {
    if (killed < 0) {
      // Mid-run: once the checkpoint of step 20 exists, while the workers train on.
      if (!FileExists(ckpt)) return;
      std::map<int, pid_t> pids = WorkerPids(job, 4);
      if (pids.size() < 4) return;
      before = pids;
      killed = pids[1];
      killed_at = Now();
      kill(killed, SIGKILL);
      return;
    }
    std::map<int, pid_t> now = WorkerPids(job, 4);
    if (now.count(1) && now[1] != killed) replacement = now[1];
    for (int slot : {0, 2, 3}) {
      if (now.count(slot) && now[slot] != before[slot]) others_kept = false;
    }
  });
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_GT(killed, 0) << "never saw four workers";
  EXPECT_GT(replacement, 0) << "slot 1 was not started again";
  EXPECT_TRUE(others_kept) << "a surviving worker's process changed";
  EXPECT_EQ(result.err.find("restarting the gang"), std::string::npos) << result.err;

  nlohmann::json summary = Summary(dir.path() + "/killed.json");
  nlohmann::json plain_summary = Summary(dir.path() + "/plain.json");
  ASSERT_TRUE(summary["worker_restarts"].is_array()) << summary.dump();
  EXPECT_EQ(summary["worker_restarts"][1], 1);
  bool lost = false, rejoined = false;
  double lost_at = 0;
  for (const auto& change : summary["membership_changes"]) {
    if (change["reason"] == "lost" && change["slots"][0] == 1) {
      lost = true;
      lost_at = change["unix_seconds"].get<double>();
    }
    if (lost && change["reason"] == "joined" && change["slots"][0] == 1) rejoined = true;
  }
  EXPECT_TRUE(lost) << summary["membership_changes"].dump();
  EXPECT_TRUE(rejoined) << summary["membership_changes"].dump();
  EXPECT_EQ(summary["steps"], 320);
  const double accuracy = TestAccuracy(summary), plain_accuracy = TestAccuracy(plain_summary);
  EXPECT_NEAR(accuracy, plain_accuracy, 0.005);

  // The time from the kill to training again with 3 workers: the survivors' regroup lines.
  double regroup = 0;
  for (const std::string& line : Lines(result.err)) {
    const auto at = line.find("unplanned change, ");
    if (at == std::string::npos) continue;
    regroup = std::max(regroup, std::stod(line.substr(at + 18)));
  }
  std::printf("%s: killed slot 1 at %.3f; loss noticed after %.2f s; survivors training again "
              "after a %.2f s regroup; accuracy %.4f vs %.4f uninterrupted\n",
              strategy.c_str(), killed_at, lost_at - killed_at, regroup, accuracy,
              plain_accuracy);
}

INSTANTIATE_TEST_SUITE_P(Strategies, ElasticKill, ::testing::Values("ssgd", "hps"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace hptrain::testing
