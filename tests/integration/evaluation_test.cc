// Evaluations within an epoch (spec.evalEverySteps) through the real binary: the run summary lists
// every evaluation at the steps asked for plus each epoch's end, the console shows the interim
// ones, and evaluating does not change training (the same final model as a run without them).
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

}  // namespace
}  // namespace hptrain::testing
