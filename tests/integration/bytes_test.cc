// SSGD byte accounting through the real binary: with a ring all-reduce every rank sends
// 2(N-1)/N of the gradient each step, so bytes_sent / steps in the run summary is
// 2(N-1)/N x 4P for LeNet-5's P = 61,706 float32 parameters (plus the end-of-epoch evaluation
// and loss all-reduces, a few bytes).
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

constexpr double kLeNetParams = 61706;
constexpr int kSteps = 30;

void CheckBytes(int workers) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets/fashion-mnist";
  }
  TempDir dir;
  const std::string job = dir.Write(
      "job.yaml",
      LeNetJob("bytes-" + std::to_string(workers),
               "    - {name: cpu, replicas: " + std::to_string(workers) + "}\n",
               "  globalBatchSize: 64\n  epochs: 1\n  maxSteps: 30\n  threads: 1\n"));
  const std::string json = dir.path() + "/summary.json";
  ProcessResult r =
      RunProcess({HptrainBinary(), "run", job, "--quiet", "--output-json", json}, 600);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << "not JSON: " << ReadFile(json);
  EXPECT_EQ(summary["strategy"], "ssgd");
  EXPECT_EQ(summary["workers"], workers);
  ASSERT_EQ(summary["steps"], kSteps);
  ASSERT_TRUE(summary["ranks"].is_array());
  ASSERT_EQ(summary["ranks"].size(), static_cast<size_t>(workers));

  const double expected = 2.0 * (workers - 1) / workers * 4 * kLeNetParams;
  std::vector<bool> seen(workers, false);
  for (const auto& rank : summary["ranks"]) {
    const int id = rank["rank"].get<int>();
    ASSERT_GE(id, 0);
    ASSERT_LT(id, workers);
    seen[id] = true;
    const double sent = rank["bytes_sent"].get<double>() / kSteps;
    const double received = rank["bytes_received"].get<double>() / kSteps;
    EXPECT_NEAR(sent, expected, 0.01 * expected) << "rank " << id << " bytes_sent per step";
    // In a ring every byte sent is received by the next rank.
    EXPECT_NEAR(received, expected, 0.01 * expected) << "rank " << id << " bytes_received per step";
    EXPECT_EQ(rank["batch_size"], 64 / workers);
  }
  for (int i = 0; i < workers; ++i) EXPECT_TRUE(seen[i]) << "rank " << i << " missing";
}

TEST(Bytes, FourWorkersSendTheRingAllReduceVolume) { CheckBytes(4); }

TEST(Bytes, TwoWorkersSendTheRingAllReduceVolume) { CheckBytes(2); }

}  // namespace
}  // namespace hptrain::testing
