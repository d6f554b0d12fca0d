// Node topology and strategy `hierarchical` through the real binary (docs/algorithms.md §2):
// the nodes from spec.topology and from the placement's hosts (published through the
// coordinator) give the same run; one node is ssgd exactly; bad input fails with the field; the
// demo job's accuracy against ssgd.
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

struct JobRun {
  int exit_code = -1;
  std::string err;
  nlohmann::json summary;
};

// 4 synthetic-MLP workers, 2 epochs of 32 steps (maxSteps 40 ends inside the second epoch).
JobRun RunJob(const std::string& name, const std::string& extra,
              const std::vector<std::string>& more_args = {}) {
  TempDir dir;
  const std::string job =
      dir.Write("job.yaml", SyntheticJob(name, 4, "  epochs: 2\n  maxSteps: 40\n" + extra));
  const std::string json = dir.path() + "/summary.json";
  std::vector<std::string> argv = {HptrainBinary(), "run", job, "--quiet", "--output-json", json};
  argv.insert(argv.end(), more_args.begin(), more_args.end());
  ProcessResult r = RunProcess(argv, 300);
  JobRun run;
  run.exit_code = r.exit_code;
  run.err = r.err;
  if (r.exit_code == 0) run.summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
  return run;
}

// spec.strategy through --set (SyntheticJob writes strategy ssgd).
std::vector<std::string> Strategy(const std::string& type, int interval) {
  std::vector<std::string> args = {"--set", "spec.strategy.type=" + type};
  if (interval != 0) {
    args.insert(args.end(), {"--set", "spec.strategy.interval=" + std::to_string(interval)});
  }
  return args;
}

TEST(Hierarchical, OneNodeRunIsSsgdExactly) {
  JobRun ssgd = RunJob("ssgd-one-node", "");
  JobRun h = RunJob("hierarchical-one-node", "  topology: {workersPerNode: 4}\n",
                    Strategy("hierarchical", 5));
  ASSERT_EQ(ssgd.exit_code, 0) << ssgd.err;
  ASSERT_EQ(h.exit_code, 0) << h.err;
  EXPECT_EQ(h.summary["strategy"], "hierarchical");
  EXPECT_EQ(h.summary["steps"], 40);
  EXPECT_EQ(h.summary["final"]["test_loss"], ssgd.summary["final"]["test_loss"]);
  EXPECT_EQ(h.summary["final"]["test_accuracy"], ssgd.summary["final"]["test_accuracy"]);
}

TEST(Hierarchical, PlacementHostsAreTheNodes) {
  // Two "hosts" on the loopback: the workers publish their address as their node's name.
  TempDir dir;
  const std::string placement = dir.Write("placement.yaml",
                                          "ps: {address: 127.0.0.1}\n"
                                          "workers:\n"
                                          "  - {address: 127.0.0.1}\n  - {address: 127.0.0.1}\n"
                                          "  - {address: 127.0.0.2}\n  - {address: 127.0.0.2}\n");
  std::vector<std::string> args = Strategy("hierarchical", 8);
  JobRun by_spec = RunJob("hierarchical-spec", "  topology: {workersPerNode: 2}\n", args);
  args.insert(args.end(), {"--placement", placement});
  JobRun by_host = RunJob("hierarchical-hosts", "", args);
  ASSERT_EQ(by_spec.exit_code, 0) << by_spec.err;
  ASSERT_EQ(by_host.exit_code, 0) << by_host.err;
  // The same grouping gives the same run, bit for bit.
  EXPECT_EQ(by_host.summary["final"]["test_loss"], by_spec.summary["final"]["test_loss"]);
  EXPECT_EQ(by_host.summary["final"]["train_loss"], by_spec.summary["final"]["train_loss"]);
  // Non-leaders exchange inside their node only: every step's intra-node all-reduce, but no
  // share of the global syncs' leader ring, so they send less than the leaders.
  const auto& ranks = by_spec.summary["ranks"];
  ASSERT_EQ(ranks.size(), 4u);
  int64_t sent[4] = {0, 0, 0, 0};
  for (const auto& r : ranks) sent[r["rank"].get<int>()] = r["bytes_sent"].get<int64_t>();
  EXPECT_GT(sent[0], sent[1]);
  EXPECT_GT(sent[2], sent[3]);
}

TEST(Hierarchical, SsgdOverTheHierarchicalAllReduceMatchesFlatSsgd) {
  JobRun flat = RunJob("ssgd-flat", "");
  JobRun hier =
      RunJob("ssgd-hier", "  topology: {nodes: [1, 3]}\n  communicator: {hierarchical: true}\n");
  ASSERT_EQ(flat.exit_code, 0) << flat.err;
  ASSERT_EQ(hier.exit_code, 0) << hier.err;
  const double a = flat.summary["final"]["test_loss"].get<double>();
  const double b = hier.summary["final"]["test_loss"].get<double>();
  EXPECT_NEAR(b, a, 1e-4 * (1 + a));
}

TEST(Hierarchical, AveragingTheOptimizerStateChangesTheRunWithMomentum) {
  std::vector<std::string> args = Strategy("hierarchical", 4);
  args.insert(args.end(), {"--set", "spec.optimizer.momentum=0.9"});
  JobRun local = RunJob("momentum-local", "  topology: {workersPerNode: 2}\n", args);
  args.insert(args.end(), {"--set", "spec.strategy.averageOptimizerState=true"});
  JobRun averaged = RunJob("momentum-averaged", "  topology: {workersPerNode: 2}\n", args);
  ASSERT_EQ(local.exit_code, 0) << local.err;
  ASSERT_EQ(averaged.exit_code, 0) << averaged.err;
  // The momenta of the two nodes differ between syncs; averaging them changes the trajectory.
  EXPECT_NE(averaged.summary["final"]["train_loss"], local.summary["final"]["train_loss"]);
}

TEST(Hierarchical, BadInputNamesTheField) {
  struct Case {
    std::string extra;
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", Strategy("hierarchical", 0), "spec.strategy.type: strategy hierarchical needs"},
      {"  topology: {workersPerNode: 2}\n",
       {"--set", "spec.strategy.interval=0", "--set", "spec.strategy.type=hierarchical"},
       "spec.strategy.interval"},
      {"  topology: {workersPerNode: 2}\n",
       {"--set", "spec.strategy.type=hierarchical", "--set", "spec.strategy.warmupSteps=-1"},
       "spec.strategy.warmupSteps: must be >= 0, got -1"},
      {"  topology: {nodes: [3]}\n", {}, "spec.topology.nodes: the nodes hold 3 workers"},
      {"  topology: {nodes: [2, 0, 2]}\n", {}, "spec.topology.nodes[1]"},
  };
  for (const Case& c : cases) {
    JobRun r = RunJob("bad-topology", c.extra, c.args);
    EXPECT_NE(r.exit_code, 0) << c.message;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.message << " not in: " << r.err;
  }
}

// Acceptance (docs/algorithms.md §2g): two epochs of the demo job (4 workers) as 2 nodes × 2
// workers with one global sync per epoch (K′ = −1) and the default K′ ramp-up (the first half
// epoch synchronous); the test accuracy is within 1.0 point of ssgd's. The cosine schedule, as
// gossip's comparison runs it, ends at a small learning rate, so one run stands for the setting
// (seeds 42, 1, 2 gave gaps of 0.46, 0.42, 0.47 points; without the ramp-up 0.63, 2.33, 1.27).
TEST(Hierarchical, TwoEpochAccuracyAgainstSsgd) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets/fashion-mnist";
  }
  TempDir dir;
  auto accuracy = [&](const std::string& tag, const std::vector<std::string>& sets) {
    const std::string json = dir.path() + "/" + tag + ".json";
    std::vector<std::string> argv = {HptrainBinary(), "run", "examples/fashion-mnist.yaml",
                                     "--quiet", "--output-json", json,
                                     "--set", "spec.epochs=2",
                                     "--set", "spec.optimizer.schedule.type=cosine"};
    for (const auto& set : sets) argv.insert(argv.end(), {"--set", set});
    ProcessResult r = RunProcess(argv, 900);
    EXPECT_EQ(r.exit_code, 0) << tag << ": " << r.err;
    if (r.exit_code != 0) return 0.0;
    nlohmann::json summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
    if (summary.is_discarded()) return 0.0;
    const double a = 100 * summary["final"]["test_accuracy"].get<double>();
    std::cout << tag << ": test accuracy " << a << " %\n";
    return a;
  };
  const double ssgd = accuracy("ssgd", {});
  const double hierarchical =
      accuracy("hierarchical", {"spec.strategy.type=hierarchical", "spec.topology.workersPerNode=2",
                                "spec.strategy.interval=-1"});
  EXPECT_GT(ssgd, 80.0);
  EXPECT_GE(hierarchical, ssgd - 1.0);
}

}  // namespace
}  // namespace hptrain::testing
