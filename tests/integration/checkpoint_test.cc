// Checkpoints through the real binary: a run killed after a checkpoint and resumed with --resume
// ends with exactly (bitwise) the parameters of an uninterrupted run, having trained only the
// steps after the checkpoint; a corrupt checkpoint is bad input.
#include <signal.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/train/checkpoint.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

constexpr int kWorkers = 4;
constexpr int kSteps = 40;
constexpr int kInterval = 10;
constexpr double kLeNetParams = 61706;

std::string ResumeJob(const std::string& name, const std::string& checkpoint) {
  return LeNetJob(name, "    - {name: cpu, replicas: 4}\n",
                  "  globalBatchSize: 64\n"
                  "  epochs: 1\n"
                  "  maxSteps: 40\n"
                  "  seed: 11\n"
                  "  threads: 1\n"
                  "  checkpoint: {path: " + checkpoint + ", intervalSteps: 10}\n"
                  "  testing: {slowdown: [20, 20, 20, 20]}\n");
}

TEST(Checkpoint, KilledRunResumesToTheSameParametersBitwise) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets/fashion-mnist";
  }
  TempDir dir;
  const std::string ckpt_a = dir.path() + "/a.ckpt";
  const std::string ckpt_b = dir.path() + "/b.ckpt";
  const std::string job_a = dir.Write("a.yaml", ResumeJob("resume-a", ckpt_a));
  const std::string job_b = dir.Write("b.yaml", ResumeJob("resume-b", ckpt_b));

  // A: uninterrupted.
  ProcessResult a = RunProcess({HptrainBinary(), "run", job_a, "--quiet"}, 600);
  ASSERT_EQ(a.exit_code, 0) << a.err;

  // B: SIGKILL one worker once a checkpoint in [10, 40) exists.
  int64_t step_at_kill = -1;
  pid_t killed = -1;
  // Without a gang restart (spec.runPolicy), so that the resume below is the test's.
  ProcessResult b = RunProcess({HptrainBinary(), "run", job_b, "--quiet", "--set",
                                "spec.runPolicy.restartPolicy=Never"}, 600, [&](pid_t) {
    if (killed > 0 || !FileExists(ckpt_b)) return;
    auto c = train::LoadCheckpoint(ckpt_b);
    if (!c.ok() || c->step < kInterval || c->step >= kSteps) return;
    std::vector<pid_t> pids = FindProcesses({job_b, "worker", "--rank 1"});
    if (pids.empty()) return;
    step_at_kill = c->step;
    killed = pids[0];
    kill(killed, SIGKILL);
  });
  ASSERT_GT(killed, 0) << "never saw a checkpoint in [10, 40); run ended with " << b.exit_code
                       << "\n" << b.err;
  EXPECT_EQ(b.exit_code, 1) << b.err;
  EXPECT_NE(b.err.find("worker-1"), std::string::npos) << b.err;
  EXPECT_TRUE(FindProcesses({job_b}).empty());

  // What the resumed run starts from: a checkpoint strictly inside the run, on the interval.
  auto interrupted = train::LoadCheckpoint(ckpt_b);
  ASSERT_TRUE(interrupted.ok()) << interrupted.status();
  const int64_t resumed_from = interrupted->step;
  EXPECT_GE(resumed_from, step_at_kill);
  EXPECT_GE(resumed_from, kInterval);
  EXPECT_LT(resumed_from, kSteps);
  EXPECT_EQ(resumed_from % kInterval, 0);

  // B, resumed.
  const std::string json = dir.path() + "/resumed.json";
  ProcessResult resumed =
      RunProcess({HptrainBinary(), "run", job_b, "--resume", "--quiet", "--output-json", json}, 600);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;

  auto ca = train::LoadCheckpoint(ckpt_a);
  auto cb = train::LoadCheckpoint(ckpt_b);
  ASSERT_TRUE(ca.ok()) << ca.status();
  ASSERT_TRUE(cb.ok()) << cb.status();
  EXPECT_EQ(ca->step, kSteps);
  EXPECT_EQ(cb->step, kSteps);
  const std::vector<float>& pa = ca->sections["params"];
  const std::vector<float>& pb = cb->sections["params"];
  ASSERT_EQ(pa.size(), static_cast<size_t>(kLeNetParams));
  ASSERT_EQ(pb.size(), pa.size());
  size_t differing = 0, first = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (std::memcmp(&pa[i], &pb[i], sizeof(float)) != 0) {
      if (differing++ == 0) first = i;
    }
  }
  EXPECT_EQ(differing, 0u) << "first difference at " << first << ": " << pa[first] << " vs "
                           << pb[first];
  // The optimizer state matches too (momentum), so the runs could go on identically.
  EXPECT_EQ(ca->sections["momentum"], cb->sections["momentum"]);
  EXPECT_EQ(ca->optimizer_steps, cb->optimizer_steps);

  // The resumed run trained only the steps after its checkpoint: each rank sent the ring
  // all-reduce bytes of (40 - resumed_from) steps, not of 40.
  nlohmann::json summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << ReadFile(json);
  EXPECT_EQ(summary["steps"], kSteps);
  ASSERT_EQ(summary["ranks"].size(), static_cast<size_t>(kWorkers));
  const double per_step = 2.0 * (kWorkers - 1) / kWorkers * 4 * kLeNetParams;
  const double expected = (kSteps - resumed_from) * per_step;
  for (const auto& rank : summary["ranks"]) {
    const double sent = rank["bytes_sent"].get<double>();
    EXPECT_NEAR(sent, expected, 0.01 * expected) << "rank " << rank["rank"];
  }
}

TEST(Checkpoint, TruncatedCheckpointWithResumeIsBadInput) {
  TempDir dir;
  const std::string ckpt = dir.path() + "/job.ckpt";
  train::Checkpoint c;
  c.job = "truncated";
  c.step = 10;
  c.sections["params"] = std::vector<float>(50000, 0.5f);
  ASSERT_TRUE(train::SaveCheckpoint(ckpt, c).ok());
  const auto size = std::filesystem::file_size(ckpt);
  std::filesystem::resize_file(ckpt, size / 2);

  const std::string job = dir.Write(
      "job.yaml", SyntheticJob("truncated", 2,
                               "  maxSteps: 5\n  checkpoint: {path: " + ckpt + "}\n"));
  const std::string json = dir.path() + "/summary.json";
  ProcessResult r = RunProcess(
      {HptrainBinary(), "run", job, "--resume", "--quiet", "--output-json", json}, 120);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  std::vector<std::string> lines = Lines(r.err);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find(ckpt), std::string::npos) << r.err;
  EXPECT_FALSE(FileExists(json));
  EXPECT_TRUE(FindProcesses({job}).empty());
  // The corrupt checkpoint is left as it was for the user to inspect.
  EXPECT_EQ(std::filesystem::file_size(ckpt), size / 2);
}

// A checkpoint whose directory does not exist would fail the run at the first checkpoint, after
// the workers trained up to it: the launcher refuses it before any process starts.
TEST(Checkpoint, AMissingCheckpointDirectoryIsBadInputBeforeTraining) {
  TempDir dir;
  const std::string ckpt = dir.path() + "/missing/job.ckpt";
  const std::string job = dir.Write(
      "job.yaml", SyntheticJob("nodir", 2,
                               "  maxSteps: 5\n  checkpoint: {path: " + ckpt +
                                   ", intervalSteps: 2}\n"));
  ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 120);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  std::vector<std::string> lines = Lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("spec.checkpoint.path: directory " + dir.path() + "/missing does not exist"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("step"), std::string::npos) << "nothing trained: " << r.out;
  EXPECT_TRUE(FindProcesses({job}).empty());
}

}  // namespace
}  // namespace hptrain::testing
