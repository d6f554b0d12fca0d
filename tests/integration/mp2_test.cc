// MP² (docs/algorithms.md §1) through the real binary: `hptrain mp2 collect` records a held-out
// dataset on which the shipped LeNet-5 predictor beats the zero change (= last value) in replay
// error and in the accuracy of the network that uses its predictions; one epoch of the demo job
// with the shipped predictor stays within 1.0 point of `ps` while pushing far fewer bytes; bad
// inputs (a truncated dataset, a predictor of another history, a corrupt dataset for `train`) are
// refused in one line and leave what exists untouched.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

const char kPredictor[] = "examples/predictors/lenet5-fashion-mnist.mp2p";

bool HaveData() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

// Exit 2 (bad input) and exactly one line of stderr, naming `must_contain`.
void ExpectOneLineError(const ProcessResult& r, const std::string& must_contain) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  std::vector<std::string> lines = Lines(r.err);
  EXPECT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(r.err.find(must_contain), std::string::npos) << r.err;
}

// A held-out dataset: 200 steps of `ps` with another seed than the shipped predictor's data,
// windows of 15 snapshots every 40 rounds.
std::string CollectHeldOut(const TempDir& dir) {
  const std::string path = dir.path() + "/heldout.mp2d";
  ProcessResult r = RunProcess(
      {HptrainBinary(), "mp2", "collect", "examples/fashion-mnist.yaml", "--out", path,
       "--window-every", "40", "--window-length", "15", "--samples", "512", "--quiet", "--set",
       "spec.strategy.type=ps", "--set", "spec.seed=7", "--set", "spec.maxSteps=200"},
      900);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

TEST(Mp2, ShippedPredictorBeatsTheZeroChangeOnHeldOutSnapshots) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets";
  ASSERT_TRUE(FileExists(kPredictor)) << kPredictor;
  TempDir dir;
  const std::string heldout = CollectHeldOut(dir);
  const std::string json = dir.path() + "/eval.json";
  ProcessResult r = RunProcess({HptrainBinary(), "mp2", "eval", "--job",
                                "examples/fashion-mnist.yaml", "--predictor", kPredictor,
                                "--data", heldout, "--eval-samples", "10000", "--output-json", json},
                               900);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::cout << r.out;
  nlohmann::json result = nlohmann::json::parse(ReadFile(json), nullptr, false);
  ASSERT_FALSE(result.is_discarded());
  EXPECT_GE(result["windows"].get<int>(), 4);
  const auto& p = result["predictors"]["predictor"];
  const auto& zero = result["predictors"]["zero"];
  // Lower error of the replayed model and of the one-step predictions, higher accuracy.
  EXPECT_LT(p["mse"].get<double>(), zero["mse"].get<double>());
  EXPECT_LT(p["regression_mse"].get<double>(), zero["regression_mse"].get<double>());
  EXPECT_GT(p["accuracy"].get<double>(), zero["accuracy"].get<double>());
}

struct Outcome {
  double accuracy = 0;      // percent
  double push_per_step = 0;  // bytes each worker sent per step (its pushes), mean
};

TEST(Mp2, OneEpochOfTheDemoJobWithinOnePointOfPs) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets";
  ASSERT_TRUE(FileExists(kPredictor)) << kPredictor;
  TempDir dir;
  auto run = [&](const std::string& tag, const std::vector<std::string>& sets) {
    Outcome o;
    std::vector<std::string> all = {"spec.epochs=1"};
    all.insert(all.end(), sets.begin(), sets.end());
    const DemoRun run = RunDemoJob(dir.path(), tag, all);
    EXPECT_EQ(run.process.exit_code, 0) << tag << ": " << run.process.err;
    nlohmann::json summary = nlohmann::json::parse(run.summary, nullptr, false);
    if (summary.is_discarded()) return o;
    o.accuracy = 100 * summary["final"]["test_accuracy"].get<double>();
    const double steps = summary["steps"].get<double>();
    for (const auto& rank : summary["ranks"]) {
      o.push_per_step += rank["ps_bytes_sent"].get<double>() / steps;
    }
    o.push_per_step /= static_cast<double>(summary["ranks"].size());
    std::cout << tag << ": test accuracy " << o.accuracy << " %, " << o.push_per_step
              << " bytes pushed per worker per step\n";
    return o;
  };
  const Outcome ps = run("ps", {"spec.strategy.type=ps"});
  const Outcome mp2 = run("mp2", {"spec.strategy.type=mp2",
                                  std::string("spec.strategy.predictor=") + kPredictor});
  EXPECT_GT(ps.accuracy, 80.0);
  EXPECT_GE(mp2.accuracy, ps.accuracy - 1.0);
  // §1c: 9434 of 61706 values per step, plus the initial parameters rank 0 sent.
  EXPECT_LT(mp2.push_per_step, 0.2 * ps.push_per_step);
}

TEST(Mp2, BadInputIsRefusedInOneLineAndKeepsWhatExists) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets";
  ASSERT_TRUE(FileExists(kPredictor)) << kPredictor;
  TempDir dir;
  // A dataset cut short: 30 steps, one window.
  const std::string data = dir.path() + "/small.mp2d";
  ProcessResult collected = RunProcess(
      {HptrainBinary(), "mp2", "collect", "examples/fashion-mnist.yaml", "--out", data,
       "--window-every", "20", "--window-length", "8", "--samples", "64", "--quiet", "--set",
       "spec.strategy.type=ps", "--set", "spec.maxSteps=30"},
      600);
  ASSERT_EQ(collected.exit_code, 0) << collected.err;
  const std::string bytes = ReadFile(data);
  ASSERT_GT(bytes.size(), 100u);
  const std::string truncated = dir.path() + "/truncated.mp2d";
  {
    std::ofstream out(truncated, std::ios::binary);
    out << bytes.substr(0, bytes.size() / 2);
  }
  ExpectOneLineError(RunProcess({HptrainBinary(), "mp2", "eval", "--job",
                                 "examples/fashion-mnist.yaml", "--predictor", kPredictor,
                                 "--data", truncated}),
                     truncated);
  // `train` on a corrupt dataset leaves an existing predictor file as it was.
  const std::string out = dir.path() + "/existing.mp2p";
  std::filesystem::copy_file(kPredictor, out);
  ExpectOneLineError(RunProcess({HptrainBinary(), "mp2", "train", "--data", truncated, "--out",
                                 out}),
                     truncated);
  EXPECT_EQ(ReadFile(out), ReadFile(kPredictor));
  // A job whose history is not the predictor's is refused before it trains.
  ProcessResult run = RunProcess({HptrainBinary(), "run", "examples/fashion-mnist.yaml", "--quiet",
                                  "--set", "spec.strategy.type=mp2", "--set",
                                  std::string("spec.strategy.predictor=") + kPredictor, "--set",
                                  "spec.strategy.history=4", "--set", "spec.maxSteps=5"},
                                 300);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("spec.strategy.predictor"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("history"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace hptrain::testing
