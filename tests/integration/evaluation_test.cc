// Evaluations within an epoch (spec.evalEverySteps) through the real binary: the run summary lists
// every evaluation at the steps asked for plus each epoch's end, the console shows the interim
// ones, and evaluating does not change training (the same final model as a run without them).
// gossip's evaluations also report the spread of the workers' own accuracies; ssgd's do not.
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

using ::testing::HasSubstr;

// 2,048 samples at global batch 64: 32 steps per epoch.
constexpr int kStepsPerEpoch = 32;

nlohmann::json RunJob(const TempDir& dir, const std::string& name, const std::string& extra,
                      std::string* console) {
  const std::string job = dir.Write(name + ".yaml", SyntheticJob(name, 2, "  epochs: 2\n" + extra));
  const std::string json = dir.path() + "/" + name + ".json";
  ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--output-json", json}, 600);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (console != nullptr) *console = r.out;
  return nlohmann::json::parse(ReadFile(json));
}

TEST(Evaluation, EveryNStepsAndAtEpochEndsWithoutChangingTraining) {
  TempDir dir;
  std::string console;
  const nlohmann::json every = RunJob(dir, "every10", "  evalEverySteps: 10\n", &console);
  const nlohmann::json plain = RunJob(dir, "plain", "", nullptr);

  // Global steps 10, 20, 30, then the epoch's end at 32; 40, 50, 60, then 64.
  const std::vector<int64_t> expected = {10, 20, 30, 32, 40, 50, 60, 64};
  const nlohmann::json& evaluations = every.at("evaluations");
  ASSERT_EQ(evaluations.size(), expected.size()) << evaluations.dump();
  double previous_elapsed = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const nlohmann::json& e = evaluations[i];
    EXPECT_EQ(e.at("step").get<int64_t>(), expected[i]);
    EXPECT_DOUBLE_EQ(e.at("epochs").get<double>(),
                     static_cast<double>(expected[i]) / kStepsPerEpoch);
    const double accuracy = e.at("test_accuracy").get<double>();
    EXPECT_GE(accuracy, 0.0);
    EXPECT_LE(accuracy, 1.0);
    EXPECT_TRUE(std::isfinite(e.at("test_loss").get<double>()));
    EXPECT_GE(e.at("elapsed_seconds").get<double>(), previous_elapsed);
    previous_elapsed = e.at("elapsed_seconds").get<double>();
  }
  // The epoch ends are the per-epoch results.
  ASSERT_EQ(every.at("per_epoch").size(), 2u);
  EXPECT_EQ(evaluations[3].at("test_accuracy"), every["per_epoch"][0].at("test_accuracy"));
  EXPECT_EQ(evaluations[7].at("test_accuracy"), every["per_epoch"][1].at("test_accuracy"));

  // Training is the same with or without them: the runs end with the same model.
  EXPECT_EQ(every["final"].at("test_loss"), plain["final"].at("test_loss"));
  EXPECT_EQ(every["final"].at("train_loss"), plain["final"].at("train_loss"));
  EXPECT_EQ(every.at("steps"), plain.at("steps"));
  // Without evalEverySteps only the epoch ends are evaluated.
  ASSERT_EQ(plain.at("evaluations").size(), 2u);
  EXPECT_EQ(plain["evaluations"][0].at("step"), kStepsPerEpoch);

  // The console shows each interim evaluation on a line of its own.
  EXPECT_THAT(console, HasSubstr("step 10 (epoch 0.31): test_loss "));
  EXPECT_THAT(console, HasSubstr("step 50 (epoch 1.56): test_loss "));
}

// Runs the 2-epoch synthetic job with `replicas` workers and the `--set` overrides; returns the
// summary and the console.
nlohmann::json RunWithSets(const TempDir& dir, const std::string& name, int replicas,
                           const std::vector<std::string>& sets, std::string* console) {
  const std::string job = dir.Write(
      name + ".yaml", SyntheticJob(name, replicas, "  epochs: 2\n  evalEverySteps: 16\n"));
  const std::string json = dir.path() + "/" + name + ".json";
  std::vector<std::string> argv = {HptrainBinary(), "run", job, "--output-json", json};
  for (const std::string& set : sets) argv.insert(argv.end(), {"--set", set});
  ProcessResult r = RunProcess(argv, 600);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (console != nullptr) *console = r.out;
  return nlohmann::json::parse(ReadFile(json), nullptr, false);
}

// Checks one "worker_test_accuracy" spread of `workers` ranks; returns its per-rank list.
std::vector<double> CheckSpread(const nlohmann::json& spread, size_t workers,
                                const std::string& where) {
  EXPECT_TRUE(spread.is_object()) << where << ": " << spread.dump();
  if (!spread.is_object()) return {};
  const std::vector<double> ranks = spread.at("ranks").get<std::vector<double>>();
  EXPECT_EQ(ranks.size(), workers) << where;
  const double low = spread.at("min").get<double>();
  const double high = spread.at("max").get<double>();
  const double mean = spread.at("mean").get<double>();
  EXPECT_LE(low, mean) << where;
  EXPECT_LE(mean, high) << where;
  double sum = 0;
  for (double a : ranks) {
    EXPECT_GE(a, low) << where;
    EXPECT_LE(a, high) << where;
    sum += a;
  }
  if (!ranks.empty()) EXPECT_NEAR(mean, sum / static_cast<double>(ranks.size()), 1e-12) << where;
  EXPECT_GE(low, 0.0) << where;
  EXPECT_LE(high, 1.0) << where;
  return ranks;
}

// gossip keeps a model per worker between evaluations: every evaluation also reports the spread
// of the workers' own accuracies (min <= mean <= max), in the summary and on the console. With
// no exchange at all (theta out of reach, no forced exchange) the workers train independent
// models on their shards, whose accuracies differ. ssgd's workers hold one model: no spread.
TEST(Evaluation, GossipReportsTheSpreadOfTheWorkersOwnAccuracies) {
  TempDir dir;
  std::string console;
  const nlohmann::json gossip = RunWithSets(
      dir, "gossip", 3, {"spec.strategy.type=gossip", "spec.strategy.threshold=0.001"}, &console);
  ASSERT_FALSE(gossip.is_discarded());
  CheckSpread(gossip["final"]["worker_test_accuracy"], 3, "final");
  ASSERT_EQ(gossip.at("per_epoch").size(), 2u);
  for (const auto& e : gossip["per_epoch"]) CheckSpread(e["worker_test_accuracy"], 3, "epoch");
  // Steps 16, 32 (epoch end), 48, 64 (epoch end).
  ASSERT_EQ(gossip.at("evaluations").size(), 4u);
  for (const auto& e : gossip["evaluations"]) {
    CheckSpread(e["worker_test_accuracy"], 3, "evaluation at step " + e["step"].dump());
  }
  EXPECT_EQ(gossip["final"]["worker_test_accuracy"],
            gossip["per_epoch"][1]["worker_test_accuracy"]);
  EXPECT_THAT(console, HasSubstr("step 16 (epoch 0.50): test_loss "));
  EXPECT_THAT(console, ::testing::ContainsRegex("epoch 2/2 done in [^\n]* test_accuracy "
                                                "[0-9.]+% worker_accuracy min [0-9.]+% mean "
                                                "[0-9.]+% max [0-9.]+%"));

  const nlohmann::json independent =
      RunWithSets(dir, "independent", 3,
                  {"spec.strategy.type=gossip", "spec.strategy.threshold=1e300",
                   "spec.strategy.maxInterval=0"},
                  nullptr);
  ASSERT_FALSE(independent.is_discarded());
  for (const auto& e : independent.at("evaluations")) {
    const std::vector<double> ranks = CheckSpread(e["worker_test_accuracy"], 3, "independent");
    ASSERT_EQ(ranks.size(), 3u);
    EXPECT_FALSE(ranks[0] == ranks[1] && ranks[1] == ranks[2])
        << "step " << e["step"] << ": " << e["worker_test_accuracy"].dump();
  }
  // Without exchanges nothing travels between the workers but the evaluations' collectives,
  // far less than the pairwise-averaging run's models.
  EXPECT_LT(independent["ranks"][0]["bytes_sent"].get<double>(),
            gossip["ranks"][0]["bytes_sent"].get<double>());

  std::string ssgd_console;
  const nlohmann::json ssgd = RunWithSets(dir, "ssgd", 3, {}, &ssgd_console);
  ASSERT_FALSE(ssgd.is_discarded());
  EXPECT_THAT(ssgd.dump(), ::testing::Not(HasSubstr("worker_test_accuracy")));
  EXPECT_THAT(ssgd_console, ::testing::Not(HasSubstr("worker_accuracy")));
}

}  // namespace
}  // namespace hptrain::testing
