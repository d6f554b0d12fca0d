// Strategy auto through the real binary (two workers, the synthetic MLP, 12 steps, a probe of 4):
// the run summary names what it picked and the figures why, rank 0 logs it once, and the bytes
// agree with the pick; picking fp32, its run is ssgd's to the last digit of the losses. Which
// pick a real clock leads to is not asserted: with compressAbove set out of reach the pick is
// fp32 whatever the clocks say, and then every step is ssgd's ring.
#include <iostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

constexpr int kSteps = 12;
constexpr double kMlpParams = 784 * 64 + 64 + 64 * 10 + 10;  // the synthetic job's MLP

struct Outcome {
  std::string decision;
  std::string err;
  double bytes_per_step = 0;  // rank 0's
  double test_loss = -1;      // final
  double train_loss = -1;
};

// The job with strategy auto (probe of 4 steps) and `sets`; plain ssgd when `ssgd`.
Outcome RunJob(const TempDir& dir, const std::string& tag, const std::vector<std::string>& sets,
               bool ssgd = false) {
  const std::string job = dir.Write(
      tag + ".yaml",
      SyntheticJob("auto-" + tag, 2, "  epochs: 1\n  maxSteps: " + std::to_string(kSteps) + "\n"));
  const std::string json = dir.path() + "/" + tag + ".json";
  std::vector<std::string> argv = {HptrainBinary(), "run", job, "--quiet", "--output-json", json};
  if (!ssgd) {
    for (const char* set : {"spec.strategy.type=auto", "spec.strategy.probeSteps=4"}) {
      argv.push_back("--set");
      argv.push_back(set);
    }
  }
  for (const auto& s : sets) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  ProcessResult r = RunProcess(argv, 300);
  Outcome o;
  o.err = r.err;
  EXPECT_EQ(r.exit_code, 0) << tag << ": " << r.err;
  if (r.exit_code != 0) return o;
  nlohmann::json summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
  EXPECT_FALSE(summary.is_discarded()) << ReadFile(json);
  if (summary.is_discarded()) return o;
  EXPECT_EQ(summary["strategy"], ssgd ? "ssgd" : "auto");
  o.test_loss = summary["final"]["test_loss"].get<double>();
  o.train_loss = summary["final"]["train_loss"].get<double>();
  EXPECT_EQ(summary["steps"], kSteps);
  if (summary.contains("strategy_decision")) o.decision = summary["strategy_decision"];
  for (const auto& rank : summary["ranks"]) {
    if (rank["rank"] == 0) o.bytes_per_step = rank["bytes_sent"].get<double>() / kSteps;
  }
  return o;
}

TEST(Auto, SummaryNamesThePickAndTheFigures) {
  TempDir dir;
  // Compress only when exposed communication exceeds a million times compute: never.
  const Outcome dense = RunJob(dir, "dense", {"spec.strategy.compressAbove=1000000"});
  EXPECT_EQ(dense.decision.rfind("picked fp32 (ssgd's all-reduce): exposed communication ", 0), 0u)
      << dense.decision;
  EXPECT_NE(dense.decision.find("the least over 2 ranks in each step; communication "),
            std::string::npos)
      << dense.decision;
  EXPECT_NE(dense.decision.find("steps 1-3) <= 100000000 %"), std::string::npos) << dense.decision;
  // One log line, from rank 0.
  const std::string line = "strategy auto: " + dense.decision;
  const size_t first = dense.err.find(line);
  EXPECT_NE(first, std::string::npos) << dense.err;
  EXPECT_EQ(dense.err.find(line, first + 1), std::string::npos) << dense.err;
  // ssgd's ring with two workers: 4P per step (plus the probe's times and the epoch's
  // evaluation all-reduces, a few bytes).
  EXPECT_NEAR(dense.bytes_per_step, 4 * kMlpParams, 0.01 * 4 * kMlpParams);
  // And the model is ssgd's, bit for bit: the same final losses, to the last digit.
  const Outcome ssgd = RunJob(dir, "ssgd", {}, /*ssgd=*/true);
  EXPECT_EQ(ssgd.decision, "");
  EXPECT_EQ(dense.test_loss, ssgd.test_loss);
  EXPECT_EQ(dense.train_loss, ssgd.train_loss);

  // The default threshold: either pick, named, and the bytes to match.
  const Outcome def = RunJob(dir, "default", {});
  std::cout << "default threshold: " << def.decision << "\n";
  const bool fp32 = def.decision.rfind("picked fp32 (ssgd's all-reduce): ", 0) == 0;
  const bool q8 = def.decision.rfind("picked quantized 8 bits: ", 0) == 0;
  EXPECT_TRUE(fp32 || q8) << def.decision;
  if (fp32) EXPECT_NEAR(def.bytes_per_step, dense.bytes_per_step, 0.01 * dense.bytes_per_step);
  if (q8) EXPECT_LT(def.bytes_per_step, 0.6 * dense.bytes_per_step);
}

}  // namespace
}  // namespace hptrain::testing
