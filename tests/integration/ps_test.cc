// The parameter server through the real binary (hptrain run: ps-0 with the coordinator and
// shard 0, ps-1.. for more shards, workers over gRPC): exactness against ssgd and one process,
// the degenerate identities, sharding, the byte formulas from the run summary, and a PS killed
// mid-run followed by --resume (docs/algorithms.md §5d).
#include <signal.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/ps/ps_codec.h"
#include "runtime/train/checkpoint.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

constexpr int64_t kLeNetParams = 61706;
const std::vector<int64_t> kLeNetTensors = {150, 6, 2400, 16, 48000, 120, 10080, 84, 840, 10};

bool HaveData() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

std::string Job(const std::string& name, const std::string& groups, const std::string& ckpt,
                const std::string& extra = "") {
  return LeNetJob(name, groups,
                  "  globalBatchSize: 64\n  epochs: 1\n  maxSteps: 20\n  seed: 7\n  threads: 1\n"
                  "  checkpoint: {path: " + ckpt + "}\n" + extra);
}
const char kUneven[] =
    "    - {name: small, replicas: 2, batchSize: 8}\n"
    "    - {name: large, replicas: 2, batchSize: 24}\n";

std::vector<float> RunAndLoad(const TempDir& dir, const std::string& name,
                              const std::string& groups, const std::vector<std::string>& sets,
                              const std::string& json = "") {
  const std::string ckpt = dir.path() + "/" + name + ".ckpt";
  std::string job = dir.Write(name + ".yaml", Job(name, groups, ckpt));
  std::vector<std::string> argv = {HptrainBinary(), "run", job, "--quiet"};
  for (const auto& s : sets) argv.insert(argv.end(), {"--set", s});
  if (!json.empty()) argv.insert(argv.end(), {"--output-json", json});
  ProcessResult r = RunProcess(argv, 600);
  EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
  auto c = train::LoadCheckpoint(ckpt);
  if (!c.ok()) {
    ADD_FAILURE() << name << ": " << c.status();
    return {};
  }
  EXPECT_EQ(c->step, 20) << name;
  return c->sections["params"];
}

// ‖a − b‖ / ‖b‖ (Euclidean norms).
double NormRelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

// The largest element-wise |a − b| / max(|b|, 0.01).
double MaxRelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) /
                                std::max(std::abs(static_cast<double>(b[i])), 1e-2));
  }
  return worst;
}

TEST(ParameterServer, PsWithAnUnevenAllocationEqualsSsgdAndOneProcess) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets";
  TempDir dir;
  std::vector<float> ps = RunAndLoad(dir, "ps-four", kUneven, {"spec.strategy.type=ps"});
  std::vector<float> ssgd = RunAndLoad(dir, "ssgd-four", kUneven, {});
  std::vector<float> one =
      RunAndLoad(dir, "ps-one", "    - {name: single, replicas: 1}\n", {"spec.strategy.type=ps"});
  ASSERT_EQ(ps.size(), static_cast<size_t>(kLeNetParams));
  ASSERT_EQ(ssgd.size(), ps.size());
  ASSERT_EQ(one.size(), ps.size());
  // Only the order of the sums differs (rank order, ring order, one autograd sum).
  std::cout << "relative difference (norm; largest element-wise): ps vs ssgd "
            << NormRelativeDifference(ps, ssgd) << "; " << MaxRelativeDifference(ps, ssgd)
            << ", ps vs one process " << NormRelativeDifference(ps, one) << "; "
            << MaxRelativeDifference(ps, one) << "\n";
  EXPECT_LE(NormRelativeDifference(ps, ssgd), 1e-6);
  EXPECT_LE(NormRelativeDifference(ps, one), 1e-6);
  EXPECT_LE(MaxRelativeDifference(ps, ssgd), 1e-5);
  EXPECT_LE(MaxRelativeDifference(ps, one), 1e-5);
}

TEST(ParameterServer, DegenerateHpsAndTwoShardsAreBitwiseTheSame) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets";
  TempDir dir;
  std::vector<float> ps = RunAndLoad(dir, "ps", kUneven, {"spec.strategy.type=ps"});
  std::vector<float> hps = RunAndLoad(
      dir, "hps", kUneven,
      {"spec.strategy.type=hps", "spec.strategy.staleness=0", "spec.strategy.bits=32"});
  std::vector<float> ps2 =
      RunAndLoad(dir, "ps-two-shards", kUneven, {"spec.strategy.type=ps", "spec.ps.shards=2"});
  std::vector<float> hps8 = RunAndLoad(dir, "hps8", kUneven,
                                       {"spec.strategy.type=hps", "spec.strategy.bits=8"});
  std::vector<float> pipelined = RunAndLoad(
      dir, "hps32", kUneven, {"spec.strategy.type=hps", "spec.strategy.bits=32"});
  std::vector<float> pipelined2 =
      RunAndLoad(dir, "hps32-two-shards", kUneven,
                 {"spec.strategy.type=hps", "spec.strategy.bits=32", "spec.ps.shards=2"});
  ASSERT_EQ(ps.size(), static_cast<size_t>(kLeNetParams));
  EXPECT_TRUE(hps == ps) << "hps (staleness 0, 32 bits) differs from ps";
  EXPECT_TRUE(ps2 == ps) << "ps with 2 shards differs from 1 shard";
  ASSERT_EQ(pipelined.size(), ps.size());
  EXPECT_TRUE(pipelined2 == pipelined) << "hps (staleness 1) with 2 shards differs from 1 shard";
  ASSERT_EQ(hps8.size(), ps.size());
  EXPECT_FALSE(hps8 == ps);  // quantization and staleness did change something
}

// Bytes per worker from the run summary's PS counters against docs/algorithms.md §5c.
TEST(ParameterServer, BytesFromTheCountersFollowTheFormulas) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets";
  TempDir dir;
  auto per_step = [](int bits) {
    int64_t total = 0;
    for (int64_t n : kLeNetTensors) total += ps::PsPayloadBytes(n, bits);
    return total;
  };
  for (int bits : {32, 8}) {
    const std::string name = "bytes-" + std::to_string(bits);
    const std::string json = dir.path() + "/" + name + ".json";
    RunAndLoad(dir, name, kUneven,
               {"spec.strategy.type=hps", "spec.strategy.bits=" + std::to_string(bits)}, json);
    nlohmann::json summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
    ASSERT_FALSE(summary.is_discarded()) << ReadFile(json);
    ASSERT_EQ(summary["ranks"].size(), 4u);
    for (const auto& rank : summary["ranks"]) {
      const int r = rank["rank"].get<int>();
      // Rank 0 sent the initial parameters and fetched the shards' parameters and momentum for
      // the final checkpoint; every rank pulled the initial parameters in fp32 and, at fewer
      // bits, the exact model once more before the final evaluation.
      const int64_t sent = 20 * per_step(bits) + (r == 0 ? 4 * kLeNetParams : 0);
      const int64_t received = 20 * per_step(bits) + (bits == 32 ? 1 : 2) * 4 * kLeNetParams +
                               (r == 0 ? 2 * 4 * kLeNetParams : 0);
      EXPECT_EQ(rank["ps_bytes_sent"].get<int64_t>(), sent) << name << " rank " << r;
      EXPECT_EQ(rank["ps_bytes_received"].get<int64_t>(), received) << name << " rank " << r;
    }
  }
  EXPECT_EQ(per_step(32), 4 * kLeNetParams);
  std::cout << "push (and pull) bytes per worker per step: fp32 " << per_step(32) << ", 8 bits "
            << per_step(8) << " (" << 100.0 * per_step(8) / per_step(32) << " %)\n";
  EXPECT_LE(per_step(8), 0.27 * per_step(32));
}

TEST(ParameterServer, KilledPsFailsTheWorkersAndResumeEndsAsAnUninterruptedRun) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets";
  TempDir dir;
  auto job = [&](const std::string& name) {
    return dir.Write(name + ".yaml",
                     LeNetJob(name, "    - {name: cpu, replicas: 4}\n",
                              "  globalBatchSize: 64\n  epochs: 1\n  maxSteps: 40\n  seed: 11\n"
                              "  threads: 1\n"
                              "  checkpoint: {path: " + dir.path() + "/" + name +
                                  ".ckpt, intervalSteps: 10}\n"
                                  "  testing: {slowdown: [20, 20, 20, 20]}\n"));
  };
  const std::string job_a = job("ps-a"), job_b = job("ps-b");
  const std::vector<std::string> ps = {"--set", "spec.strategy.type=ps"};
  // Without a gang restart, so that the resume below is the test's.
  const std::vector<std::string> never = {"--set", "spec.runPolicy.restartPolicy=Never"};
  ProcessResult a = RunProcess({HptrainBinary(), "run", job_a, "--quiet", ps[0], ps[1]}, 600);
  ASSERT_EQ(a.exit_code, 0) << a.err;

  const std::string ckpt_b = dir.path() + "/ps-b.ckpt";
  pid_t killed = -1;
  ProcessResult b = RunProcess(
      {HptrainBinary(), "run", job_b, "--quiet", ps[0], ps[1], never[0], never[1]}, 600,
                               [&](pid_t) {
    if (killed > 0 || !FileExists(ckpt_b)) return;
    auto c = train::LoadCheckpoint(ckpt_b);
    if (!c.ok() || c->step < 10 || c->step >= 40) return;
    std::vector<pid_t> pids = FindProcesses({job_b, " ps "});
    if (pids.empty()) return;
    killed = pids[0];
    kill(killed, SIGKILL);
  });
  ASSERT_GT(killed, 0) << "never saw a checkpoint in [10, 40); exit " << b.exit_code << "\n"
                       << b.err;
  EXPECT_EQ(b.exit_code, 1) << b.err;
  EXPECT_NE(b.err.find("ps-0"), std::string::npos) << b.err;
  EXPECT_TRUE(FindProcesses({job_b}).empty());

  ProcessResult resumed =
      RunProcess({HptrainBinary(), "run", job_b, "--resume", "--quiet", ps[0], ps[1]}, 600);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  auto ca = train::LoadCheckpoint(dir.path() + "/ps-a.ckpt");
  auto cb = train::LoadCheckpoint(ckpt_b);
  ASSERT_TRUE(ca.ok() && cb.ok());
  EXPECT_EQ(cb->step, 40);
  EXPECT_TRUE(ca->sections["params"] == cb->sections["params"]);
  EXPECT_TRUE(ca->sections["ps.params"] == cb->sections["ps.params"]);
  EXPECT_TRUE(ca->sections["ps.momentum"] == cb->sections["ps.momentum"]);
  EXPECT_EQ(ca->sections["ps.momentum"].size(), static_cast<size_t>(kLeNetParams));
}

// One epoch of the demo job (4 workers, global batch 128, seed 42, cosine schedule as in
// compression_test.cc): ps within 0.3 points of ssgd's test accuracy, hps (8 bits, staleness 1)
// within 1.0.
TEST(ParameterServer, OneEpochAccuracyAgainstSsgd) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets";
  TempDir dir;
  auto accuracy = [&](const std::string& tag, const std::vector<std::string>& sets) {
    const std::string json = dir.path() + "/" + tag + ".json";
    std::vector<std::string> argv = {HptrainBinary(), "run", "examples/fashion-mnist.yaml",
                                     "--quiet", "--output-json", json, "--set", "spec.epochs=1",
                                     "--set", "spec.optimizer.schedule.type=cosine"};
    for (const auto& set : sets) argv.insert(argv.end(), {"--set", set});
    ProcessResult r = RunProcess(argv, 900);
    EXPECT_EQ(r.exit_code, 0) << tag << ": " << r.err;
    nlohmann::json summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
    if (summary.is_discarded()) return 0.0;
    const double a = 100 * summary["final"]["test_accuracy"].get<double>();
    std::cout << tag << ": test accuracy " << a << " %\n";
    return a;
  };
  const double ssgd = accuracy("ssgd", {});
  const double ps = accuracy("ps", {"spec.strategy.type=ps"});
  const double hps = accuracy("hps", {"spec.strategy.type=hps", "spec.strategy.bits=8",
                                      "spec.strategy.staleness=1"});
  EXPECT_GT(ssgd, 80.0);
  EXPECT_GE(ps, ssgd - 0.3);
  EXPECT_GE(hps, ssgd - 1.0);
}

}  // namespace
}  // namespace hptrain::testing
