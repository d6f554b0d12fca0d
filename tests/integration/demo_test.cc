// The demo, shortened to one epoch: examples/fashion-mnist.yaml (LeNet-5, 4 workers, SSGD) run
// as the README shows, reaching the accuracy the demo promises after its first epoch; and in
// bf16, within a point of fp32.
#include <cstdio>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

TEST(Demo, OneEpochOfFashionMnistReaches84Percent) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets/fashion-mnist";
  }
  // CTest runs this from the source root, where examples/ is.
  ASSERT_TRUE(std::filesystem::exists("examples/fashion-mnist.yaml"))
      << "run from the repository root (cwd " << std::filesystem::current_path() << ")";
  TempDir dir;
  const std::string json = dir.path() + "/demo.json";
  ProcessResult r = RunProcess({HptrainBinary(), "run", "examples/fashion-mnist.yaml", "--set",
                                "spec.epochs=1", "--output-json", json, "--quiet"},
                               600);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  nlohmann::json summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << "not JSON: " << ReadFile(json);
  EXPECT_EQ(summary["job"], "fashion-mnist-lenet5");
  EXPECT_EQ(summary["workers"], 4);
  EXPECT_EQ(summary["epochs"], 1);
  // 60,000 samples / 128 per step.
  EXPECT_EQ(summary["steps"], 60000 / 128);
  EXPECT_GE(summary["final"]["test_accuracy"].get<double>(), 0.84);
  EXPECT_LE(summary["final"]["test_accuracy"].get<double>(), 1.0);
  ASSERT_EQ(summary["per_epoch"].size(), 1u);
  EXPECT_EQ(summary["per_epoch"][0]["epoch"], 1);
  EXPECT_EQ(summary["per_epoch"][0]["test_accuracy"], summary["final"]["test_accuracy"]);
  ASSERT_EQ(summary["ranks"].size(), 4u);
  for (const auto& rank : summary["ranks"]) {
    EXPECT_GT(rank["bytes_sent"].get<double>(), 0) << "rank " << rank["rank"];
    EXPECT_GT(rank["bytes_received"].get<double>(), 0) << "rank " << rank["rank"];
    EXPECT_EQ(rank["batch_size"], 32);
  }
  EXPECT_GT(summary["samples_per_second"].get<double>(), 0);

  // The summary table on stdout: its header line, and one row per rank.
  EXPECT_NE(r.out.find("rank"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fashion-mnist-lenet5"), std::string::npos) << r.out;
  int rows = 0;
  bool header = false;
  for (const std::string& line : Lines(r.out)) {
    if (line.rfind("rank", 0) == 0) {
      header = true;
      continue;
    }
    if (header && line.find("cpu") != std::string::npos) ++rows;
  }
  EXPECT_TRUE(header) << r.out;
  EXPECT_EQ(rows, 4) << r.out;
}

// spec.precision bf16 on the CPU: the demo's first epoch under autocast ends within one point of
// test accuracy of the same epoch in fp32.
TEST(Demo, Bf16EpochIsWithinOnePointOfFp32) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets/fashion-mnist";
  }
  ASSERT_TRUE(std::filesystem::exists("examples/fashion-mnist.yaml"))
      << "run from the repository root (cwd " << std::filesystem::current_path() << ")";
  TempDir dir;
  double accuracy[2] = {0, 0};
  const char* precisions[2] = {"fp32", "bf16"};
  for (int i = 0; i < 2; ++i) {
    const std::string json = dir.path() + "/" + precisions[i] + ".json";
    ProcessResult r = RunProcess(
        {HptrainBinary(), "run", "examples/fashion-mnist.yaml", "--set", "spec.epochs=1", "--set",
         std::string("spec.precision=") + precisions[i], "--output-json", json, "--quiet"},
        600);
    ASSERT_EQ(r.exit_code, 0) << precisions[i] << ": " << r.err;
    nlohmann::json summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
    ASSERT_FALSE(summary.is_discarded()) << "not JSON: " << ReadFile(json);
    EXPECT_EQ(summary["steps"], 60000 / 128);
    accuracy[i] = summary["final"]["test_accuracy"].get<double>();
  }
  std::printf("one epoch: fp32 test accuracy %.4f, bf16 %.4f\n", accuracy[0], accuracy[1]);
  EXPECT_GE(accuracy[0], 0.84);
  EXPECT_NEAR(accuracy[1], accuracy[0], 0.01) << "fp32 " << accuracy[0] << ", bf16 " << accuracy[1];
}

}  // namespace
}  // namespace hptrain::testing
