// gossip (docs/algorithms.md §4) through the real binary: workers exchange models pairwise over
// Gloo's point-to-point channels, with no all-reduce between evaluations. A short run on
// synthetic data in every variant, a BatchNorm model, and the demo job's accuracy against ssgd.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

bool HaveData() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

// Runs `hptrain run` on `job` with `sets`; returns the run summary (null on failure).
nlohmann::json RunJob(TempDir& dir, const std::string& tag, const std::string& job,
                      const std::vector<std::string>& sets, int timeout_s) {
  const std::string json = dir.path() + "/" + tag + ".json";
  std::vector<std::string> argv = {HptrainBinary(), "run", job, "--quiet", "--output-json", json};
  for (const auto& set : sets) argv.insert(argv.end(), {"--set", set});
  ProcessResult r = RunProcess(argv, timeout_s);
  EXPECT_EQ(r.exit_code, 0) << tag << ": " << r.err;
  if (r.exit_code != 0) return nullptr;
  nlohmann::json summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
  return summary.is_discarded() ? nlohmann::json() : summary;
}

// Every variant runs to the end on 4 workers; the models travel (bytes and exchanges counted)
// and the evaluated average model is finite.
TEST(Gossip, EveryVariantRunsOnSyntheticData) {
  TempDir dir;
  for (const std::string& variant : {"pairwise", "push", "easgd"}) {
    nlohmann::json summary = RunJob(
        dir, variant, "examples/synthetic-mlp.yaml",
        {"spec.workers.replicas=4", "spec.strategy.type=gossip", "spec.strategy.variant=" + variant,
         "spec.strategy.threshold=0.001", "spec.maxSteps=24"},
        300);
    ASSERT_FALSE(summary.is_null()) << variant;
    ASSERT_EQ(summary["ranks"].size(), 4u) << variant;
    int64_t exchanges = 0;
    for (const auto& rank : summary["ranks"]) {
      EXPECT_GT(rank["bytes_sent"].get<double>(), 0) << variant;
      exchanges += rank.at("exchanges").get<int64_t>();  // the run summary's count per worker
    }
    EXPECT_GT(exchanges, 0) << variant;
    const double accuracy = summary["final"]["test_accuracy"].get<double>();
    EXPECT_GE(accuracy, 0.0) << variant;
    EXPECT_LE(accuracy, 1.0) << variant;
  }
}

// A BatchNorm model: its buffers are averaged with the models before every evaluation.
TEST(Gossip, BatchNormModelTrains) {
  std::vector<std::string> argv = {HptrainBinary(),
                                   "run",
                                   "examples/synthetic-mlp.yaml",
                                   "--quiet",
                                   "--set",
                                   "spec.model.name=resnet20",
                                   "--set",
                                   "spec.model.hidden=[]",
                                   "--set",
                                   "spec.dataset.synthetic.shape=[3,32,32]",
                                   "--set",
                                   "spec.maxSteps=6",
                                   "--set",
                                   "spec.strategy.type=gossip",
                                   "--set",
                                   "spec.strategy.period=1"};
  ProcessResult r = RunProcess(argv, 300);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// Acceptance: two epochs of the demo job (4 workers, as multistep_test.cc runs it); the average
// model's test accuracy is within 1.5 points of ssgd's.
TEST(Gossip, TwoEpochAccuracyAgainstSsgd) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets";
  TempDir dir;
  const std::vector<std::string> common = {"spec.epochs=2", "spec.optimizer.schedule.type=cosine"};
  auto accuracy = [&](const std::string& tag, std::vector<std::string> sets) {
    sets.insert(sets.end(), common.begin(), common.end());
    nlohmann::json summary = RunJob(dir, tag, "examples/fashion-mnist.yaml", sets, 900);
    if (summary.is_null()) return 0.0;
    const double a = 100 * summary["final"]["test_accuracy"].get<double>();
    std::cout << tag << ": test accuracy " << a << " %\n";
    return a;
  };
  const double ssgd = accuracy("ssgd", {});
  const double gossip = accuracy("gossip", {"spec.strategy.type=gossip"});
  EXPECT_GT(ssgd, 80.0);
  EXPECT_GE(gossip, ssgd - 1.5);
}

// The default trigger (§4g self-calibration, on without a threshold or a period): after the
// first 200 steps every worker logs the θ it calibrated, once, positive and finite, from
// exchanges requested every targetInterval steps (so fewer than the window's steps), and the
// run finishes; with calibrate: true and an explicit threshold the job is refused before it
// starts, naming the field.
TEST(Gossip, CalibrateLogsEachWorkersThresholdOnce) {
  TempDir dir;
  const std::string json = dir.path() + "/calibrate.json";
  ProcessResult r = RunProcess(
      {HptrainBinary(), "run", "examples/synthetic-mlp.yaml", "--quiet", "--output-json", json,
       "--set", "spec.strategy.type=gossip", "--set", "spec.strategy.targetInterval=4", "--set",
       "spec.epochs=7"},  // 224 steps of 32 per epoch
      300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string prefix = "gossip: calibrated threshold \u03b8 = ";
  int lines = 0;
  std::vector<double> logged;
  for (size_t at = r.err.find(prefix); at != std::string::npos;
       at = r.err.find(prefix, at + 1)) {
    ++lines;
    const char* text = r.err.c_str() + at + prefix.size();
    char* end = nullptr;
    const double theta = std::strtod(text, &end);
    logged.push_back(theta);
    EXPECT_GT(theta, 0.0) << r.err;
    EXPECT_TRUE(std::isfinite(theta)) << r.err;
    long firings = 0;
    ASSERT_EQ(std::sscanf(end, " from %ld exchanges", &firings), 1) << r.err;
    EXPECT_GE(firings, 1) << r.err;
    EXPECT_LE(firings, 200 / 4) << r.err;  // never one per step of the window
    EXPECT_NE(r.err.find("an exchange requested every 4 steps over the first 2", at),
              std::string::npos)
        << r.err;
  }
  EXPECT_EQ(lines, 2) << r.err;  // one per worker
  // The run summary has each worker's calibrated θ (the log prints 6 significant digits).
  nlohmann::json summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  ASSERT_EQ(summary["ranks"].size(), 2u);
  for (const auto& rank : summary["ranks"]) {
    const double theta = rank.at("threshold").get<double>();
    bool found = false;
    for (double l : logged) found = found || std::fabs(theta - l) <= 1e-5 * l;
    EXPECT_TRUE(found) << "rank " << rank["rank"] << ": " << theta << "\n" << r.err;
  }
  // An explicit threshold: no calibration, and that θ in the run summary.
  r = RunProcess({HptrainBinary(), "run", "examples/synthetic-mlp.yaml", "--quiet",
                  "--output-json", json, "--set", "spec.strategy.type=gossip", "--set",
                  "spec.strategy.threshold=0.05", "--set", "spec.epochs=7"},
                 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find(prefix), std::string::npos) << r.err;
  summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  for (const auto& rank : summary["ranks"]) EXPECT_EQ(rank.at("threshold").get<double>(), 0.05);

  r = RunProcess({HptrainBinary(), "run", "examples/synthetic-mlp.yaml", "--quiet", "--set",
                  "spec.strategy.type=gossip", "--set", "spec.strategy.calibrate=true", "--set",
                  "spec.strategy.threshold=0.05"},
                 60);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("spec.strategy.threshold: cannot be set with spec.strategy.calibrate"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace hptrain::testing
