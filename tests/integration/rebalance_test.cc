// H-PS allocation moves work, never the math: a run whose workers are slowed down (1, 1, 2, 4) x 4
// and rebalanced while it trains ends with the parameters of the same run without rebalancing.
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/train/checkpoint.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

TEST(Rebalance, SlowedWorkersRebalancedEndWithTheParametersOfTheFixedAllocation) {
  // Relative speeds (1, 1, 0.5, 0.25), each factor x 4: the emulation stretches compute to f x
  // its CPU time, which holds only while the workers' CPU demand (Σ 1/f cores) fits the machine.
  TempDir dir;
  const std::string common =
      "  globalBatchSize: 256\n  epochs: 1\n  maxSteps: 50\n  seed: 11\n  threads: 1\n"
      "  testing: {slowdown: [4, 4, 8, 16]}\n";  // (1, 1, 2, 4) x 4: see above
  const std::string groups = "    - {name: cpu, replicas: 4}\n";
  std::string fixed = dir.Write(
      "fixed.yaml", LeNetJob("rebalance-off", groups,
                             common + "  checkpoint: {path: " + dir.path() + "/fixed.ckpt}\n"));
  std::string moving = dir.Write(
      "moving.yaml",
      LeNetJob("rebalance-on", groups,
               common + "  checkpoint: {path: " + dir.path() + "/moving.ckpt}\n" +
                   "  rebalance: {enabled: true, intervalSteps: 3, hysteresis: 0.05}\n"));
  // A small step size keeps 50 steps of early training from amplifying float summation-order
  // differences (which any two allocations have) beyond 1e-5.
  const std::vector<std::string> calm = {"--set", "spec.optimizer.lr=0.01", "--set",
                                         "spec.optimizer.momentum=0"};
  std::vector<std::string> run_fixed = {HptrainBinary(), "run", fixed, "--quiet"};
  run_fixed.insert(run_fixed.end(), calm.begin(), calm.end());
  ProcessResult a = RunProcess(run_fixed);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  std::vector<std::string> run_moving = {HptrainBinary(), "run", moving, "--quiet",
                                         "--output-json", dir.path() + "/moving.json"};
  run_moving.insert(run_moving.end(), calm.begin(), calm.end());
  ProcessResult b = RunProcess(run_moving);
  ASSERT_EQ(b.exit_code, 0) << b.err;

  // The allocation really moved: the 4x slower worker ends with a smaller share than worker 0.
  std::ifstream in(dir.path() + "/moving.json");
  nlohmann::json summary = nlohmann::json::parse(in);
  std::vector<int> final_batch;
  for (const auto& r : summary["ranks"]) final_batch.push_back(r["batch_size"].get<int>());
  ASSERT_EQ(final_batch.size(), 4u);
  std::cout << "final allocation " << final_batch[0] << " " << final_batch[1] << " "
            << final_batch[2] << " " << final_batch[3] << "\n";
  EXPECT_EQ(final_batch[0] + final_batch[1] + final_batch[2] + final_batch[3], 256);
  EXPECT_LT(final_batch[3], final_batch[0]);
  EXPECT_LT(final_batch[3], 64);

  // The timeline carries each rank's steps and compute time, never going back.
  const auto& timeline = summary["timeline"];
  ASSERT_FALSE(timeline.empty());
  for (size_t i = 1; i < timeline.size(); ++i) {
    for (size_t r = 0; r < 4; ++r) {
      EXPECT_GE(timeline[i]["rank_steps"][r].get<int64_t>(),
                timeline[i - 1]["rank_steps"][r].get<int64_t>());
      EXPECT_GE(timeline[i]["compute_seconds"][r].get<double>(),
                timeline[i - 1]["compute_seconds"][r].get<double>());
    }
  }
  for (const auto& r : timeline.back()["rank_steps"]) EXPECT_LE(r.get<int64_t>(), 50);

  auto ca = train::LoadCheckpoint(dir.path() + "/fixed.ckpt");
  auto cb = train::LoadCheckpoint(dir.path() + "/moving.ckpt");
  ASSERT_TRUE(ca.ok()) << ca.status();
  ASSERT_TRUE(cb.ok()) << cb.status();
  EXPECT_EQ(ca->step, 50);
  EXPECT_EQ(cb->step, 50);
  const std::vector<float>& pa = ca->sections["params"];
  const std::vector<float>& pb = cb->sections["params"];
  ASSERT_EQ(pa.size(), pb.size());
  double worst = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(pa[i]) - pb[i]) /
                                std::max(std::abs(static_cast<double>(pa[i])), 1e-2));
  }
  std::cout << "max relative difference " << worst << "\n";
  EXPECT_LE(worst, 1e-5);
}

}  // namespace
}  // namespace hptrain::testing
