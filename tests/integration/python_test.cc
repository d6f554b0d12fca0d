// The Python package (python/hptrain) through the real binary: a plain PyTorch script
// (examples/python/lenet5.py) run as a job's spec.trainer trains exactly as the built-in trainer
// does, follows the H-PS allocation, resumes a killed run bit for bit, and explains bad input.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/train/checkpoint.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

bool HaveFashionMnist() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

// Whether the build made the package (build/python beside build/bin) and torch imports.
bool HavePackage() {
  const std::string dir = HptrainBinary();
  const std::string package =
      std::filesystem::path(dir).parent_path().parent_path().string() + "/python/hptrain";
  return std::filesystem::exists(package + "/__init__.py") && std::filesystem::exists(kPython);
}

std::string Script() {
  return (std::filesystem::current_path() / "examples/python/lenet5.py").string();
}

// LeNet-5 on Fashion-MNIST, 4 workers with batches 8/8/24/24, trained by the built-in trainer
// (`python_args` empty) or by the script with those arguments. `extra` (spec lines) may name an
// optimizer of its own in place of SGD with momentum.
std::string Job(const std::string& name, const std::string& strategy,
                const std::vector<std::string>& python_args, const std::string& extra) {
  std::string trainer = "  model: {name: lenet5}\n";
  if (!python_args.empty()) {
    trainer = "  trainer:\n    command: [\"" + std::string(kPython) + "\", \"" + Script() + "\"";
    for (const auto& a : python_args) trainer += ", \"" + a + "\"";
    trainer += "]\n";
  }
  return "apiVersion: hptrain.io/v1alpha1\n"
         "kind: TrainingJob\n"
         "metadata:\n"
         "  name: " + name + "\n"
         "spec:\n" + trainer +
         "  dataset: {name: fashion-mnist}\n"
         "  strategy: " + strategy + "\n" +
         (extra.find("  optimizer:") == std::string::npos
              ? "  optimizer: {type: sgd, lr: 0.05, momentum: 0.9, weightDecay: 5.0e-4}\n"
              : "") +
         "  globalBatchSize: 64\n"
         "  epochs: 1\n"
         "  seed: 11\n"
         "  threads: 1\n" + extra +
         "  workerGroups:\n"
         "    - {name: small, replicas: 2, batchSize: 8}\n"
         "    - {name: large, replicas: 2, batchSize: 24}\n";
}

std::vector<float> Parameters(const std::string& checkpoint, int64_t expected_step) {
  auto c = train::LoadCheckpoint(checkpoint);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return {};
  EXPECT_EQ(c->step, expected_step);
  return c->sections["params"];
}

// The largest |a - b| / max(|a|, 0.01) over the parameters.
double WorstRelative(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) /
                                std::max(std::abs(static_cast<double>(a[i])), 1e-2));
  }
  return worst;
}

class PythonApi : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
    if (!HavePackage()) GTEST_SKIP() << "the Python package was not built (build/python)";
  }
};

struct Case {
  const char* name;
  const char* strategy;
  const char* extra;  // more spec lines
};

class PythonEquivalence : public PythonApi, public ::testing::WithParamInterface<Case> {};

// The command prefix that runs both programs on the reference BLAS, when it is installed beside
// the alternative in use. The script's layers and the built-in model's reach BLAS in different
// layouts (NN against NT products), which an optimized BLAS (OpenBLAS) computes with different
// kernels: the last bits then differ from the first step (1e-7 relative), and a ReLU or max-pool
// decision that flips somewhere within 20 steps carries that into the 1e-4 range (localsgd1 at
// step 20 on OpenBLAS: 2e-4, at steps 1, 5 and 10: 1e-7 to 7e-7). The reference BLAS computes
// every product in one order, so what is compared here is the algorithm.
std::vector<std::string> ReferenceBlas() {
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu/blas", "/usr/lib/aarch64-linux-gnu/blas"}) {
    if (access((std::string(dir) + "/libblas.so.3").c_str(), R_OK) == 0) {
      return {"/usr/bin/env", std::string("LD_LIBRARY_PATH=") + dir};
    }
  }
  return {};
}

// Starting from the model zoo's initial parameters, 20 steps of the script end within 1e-5 of
// the built-in trainer's, compared from the two checkpoints.
TEST_P(PythonEquivalence, ScriptEndsWithTheBuiltInTrainersParameters) {
  const Case& c = GetParam();
  TempDir dir;
  const std::string extra = std::string(c.extra) + "  maxSteps: 20\n";
  const std::string builtin = dir.Write(
      "builtin.yaml", Job("eq-builtin", c.strategy, {},
                          extra + "  checkpoint: {path: " + dir.path() + "/builtin.ckpt}\n"));
  const std::string script = dir.Write(
      "script.yaml", Job("eq-script", c.strategy, {"--builtin-init"},
                         extra + "  checkpoint: {path: " + dir.path() + "/script.ckpt}\n"));
  const std::vector<std::string> prefix = ReferenceBlas();
  auto run = [&](const std::string& job) {
    std::vector<std::string> argv = prefix;
    argv.insert(argv.end(), {HptrainBinary(), "run", job, "--quiet"});
    return RunProcess(argv, 600);
  };
  ProcessResult a = run(builtin);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ProcessResult b = run(script);
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  const std::vector<float> pa = Parameters(dir.path() + "/builtin.ckpt", 20);
  const std::vector<float> pb = Parameters(dir.path() + "/script.ckpt", 20);
  ASSERT_EQ(pa.size(), 61706u);
  const double worst = WorstRelative(pa, pb);
  std::cout << c.name << ": max relative difference " << worst << "\n";
  EXPECT_LE(worst, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, PythonEquivalence,
    ::testing::Values(Case{"ssgd", "{type: ssgd}", ""},
                      Case{"quantized32", "{type: quantized, bits: 32}", ""},
                      Case{"ps", "{type: ps}", ""},
                      Case{"multistep1", "{type: multistep, interval: 1}", ""},
                      Case{"localsgd1", "{type: localsgd, interval: 1}",
                           "  optimizer: {type: sgd, lr: 0.05}\n"}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// Every strategy runs the script: one script, the strategy from the manifest. (Accuracy over a
// whole epoch against the built-in trainer is bench/run's python-X systems.)
class PythonStrategies : public PythonApi, public ::testing::WithParamInterface<Case> {};

TEST_P(PythonStrategies, ScriptTrainsUnderTheStrategy) {
  const Case& c = GetParam();
  TempDir dir;
  const std::string job = dir.Write(
      "job.yaml", Job(std::string("py-") + c.name, c.strategy, {"--builtin-init"},
                      std::string(c.extra) + "  maxSteps: 12\n  checkpoint: {path: " +
                          dir.path() + "/x.ckpt}\n"));
  ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<float> p = Parameters(dir.path() + "/x.ckpt", 12);
  ASSERT_EQ(p.size(), 61706u);
  for (float v : p) ASSERT_TRUE(std::isfinite(v));
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, PythonStrategies,
    ::testing::Values(Case{"fp16", "{type: fp16}", ""},
                      Case{"quantized8", "{type: quantized, bits: 8}", ""},
                      Case{"topk", "{type: topk, density: 0.01}", ""},
                      Case{"dgc", "{type: dgc, density: 0.01}", ""},
                      Case{"localsgd", "{type: localsgd, interval: 4}", ""},
                      Case{"hierarchical", "{type: hierarchical}",
                           "  topology: {workersPerNode: 2}\n"},
                      Case{"gossip", "{type: gossip}", ""},
                      Case{"multistep", "{type: multistep}", ""},
                      Case{"hps", "{type: hps, bits: 8, staleness: 1}", ""},
                      Case{"mp2", "{type: mp2, predictor: zero}", ""}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// The script's batches follow the H-PS allocation: every step's lengths add up to the global
// batch on all ranks together (each rank used the allocation of the same step), the allocation
// moved, and the run ends with the parameters of the script with that allocation fixed.
TEST_F(PythonApi, SamplerFollowsTheRebalancedAllocation) {
  TempDir dir;
  const std::string common =
      "  maxSteps: 40\n  testing: {slowdown: [4, 4, 8, 16]}\n"
      "  globalBatchSize: 256\n";
  const std::string logs = dir.path() + "/batches";
  std::filesystem::create_directories(logs);
  auto job = [&](const std::string& name, const std::string& more,
                 const std::vector<std::string>& args) {
    std::string text = Job(name, "{type: ssgd}", args,
                           more + "  checkpoint: {path: " + dir.path() + "/" + name + ".ckpt}\n");
    // Four equal workers here: the slowdown, not the groups, makes them unequal.
    const size_t groups = text.find("  workerGroups:");
    text = text.substr(0, groups) + "  workerGroups:\n    - {name: cpu, replicas: 4}\n";
    // The global batch of `common` replaces Job's.
    const size_t b = text.find("  globalBatchSize: 64\n");
    text.erase(b, std::strlen("  globalBatchSize: 64\n"));
    return dir.Write(name + ".yaml", text);
  };
  const std::string fixed = job("fixed", common, {"--builtin-init"});
  const std::string moving =
      job("moving", common + "  rebalance: {enabled: true, intervalSteps: 3, hysteresis: 0.05}\n",
          {"--builtin-init", "--batch-log", logs});
  const std::vector<std::string> calm = {"--set", "spec.optimizer.lr=0.01", "--set",
                                         "spec.optimizer.momentum=0", "--set",
                                         "spec.optimizer.weightDecay=0"};
  std::vector<std::string> run_fixed = {HptrainBinary(), "run", fixed, "--quiet"};
  run_fixed.insert(run_fixed.end(), calm.begin(), calm.end());
  ProcessResult a = RunProcess(run_fixed, 900);
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  std::vector<std::string> run_moving = {HptrainBinary(), "run", moving, "--quiet"};
  run_moving.insert(run_moving.end(), calm.begin(), calm.end());
  ProcessResult b = RunProcess(run_moving, 900);
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;

  // A gang restart (the launcher's recovery from a failed worker, which a loaded machine can
  // cause) replays the steps since the checkpoint and appends them again: the last record of a
  // step is the one whose batch trained the final parameters.
  if (b.err.find("restarting the gang") != std::string::npos) {
    std::cout << "the run restarted:\n" << b.err << "\n";
  }
  std::map<int64_t, std::vector<int>> lengths;  // step -> each rank's batch length
  for (int rank = 0; rank < 4; ++rank) {
    std::istringstream in(ReadFile(logs + "/rank-" + std::to_string(rank) + ".txt"));
    int64_t step = 0;
    int length = 0;
    std::set<int64_t> steps;
    while (in >> step >> length) {
      auto& row = lengths[step];
      row.resize(4, -1);
      row[rank] = length;
      steps.insert(step);
    }
    EXPECT_EQ(steps.size(), 40u) << "rank " << rank;
    if (!steps.empty()) {
      EXPECT_EQ(*steps.begin(), 0) << "rank " << rank;
      EXPECT_EQ(*steps.rbegin(), 39) << "rank " << rank;
    }
  }
  ASSERT_EQ(lengths.size(), 40u);
  int changes = 0;
  std::vector<int> previous;
  for (const auto& [step, row] : lengths) {
    int sum = 0;
    for (int length : row) {
      EXPECT_GE(length, 0) << "step " << step;
      sum += length;
    }
    EXPECT_EQ(sum, 256) << "step " << step << ": the ranks used different allocations";
    if (!previous.empty() && row != previous) ++changes;
    previous = row;
  }
  std::cout << "allocation changes " << changes << ", final " << previous[0] << " " << previous[1]
            << " " << previous[2] << " " << previous[3] << "\n";
  // That the balancer moves work from slow to fast workers is the rebalance test's; here only
  // that it moved, and that every rank's batches followed it at the same step.
  EXPECT_GT(changes, 0);

  const double worst =
      WorstRelative(Parameters(dir.path() + "/fixed.ckpt", 40),
                    Parameters(dir.path() + "/moving.ckpt", 40));
  std::cout << "max relative difference " << worst << "\n";
  EXPECT_LE(worst, 1e-5);
}

// A worker of a Python job killed mid-run is restarted with the gang (restartPolicy OnFailure),
// resumes from the checkpoint, and the run ends with the parameters of an uninterrupted one, bit
// for bit.
TEST_F(PythonApi, KilledWorkerResumesToTheUninterruptedParameters) {
  TempDir dir;
  const std::string extra =
      "  maxSteps: 40\n  testing: {slowdown: [20, 20, 20, 20]}\n"
      "  runPolicy: {restartPolicy: OnFailure, backoffLimit: 2}\n";
  const std::string a_job = dir.Write(
      "a.yaml", Job("py-resume-a", "{type: ssgd}", {"--builtin-init"},
                    extra + "  checkpoint: {path: " + dir.path() + "/a.ckpt, intervalSteps: 10}\n"));
  const std::string b_ckpt = dir.path() + "/b.ckpt";
  const std::string b_job = dir.Write(
      "b.yaml", Job("py-resume-b", "{type: ssgd}", {"--builtin-init"},
                    extra + "  checkpoint: {path: " + b_ckpt + ", intervalSteps: 10}\n"));
  ProcessResult a = RunProcess({HptrainBinary(), "run", a_job, "--quiet"}, 900);
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;

  pid_t killed = -1;
  ProcessResult b = RunProcess({HptrainBinary(), "run", b_job}, 900, [&](pid_t) {
    if (killed > 0 || !FileExists(b_ckpt)) return;
    auto c = train::LoadCheckpoint(b_ckpt);
    if (!c.ok() || c->step < 10 || c->step >= 40) return;
    std::vector<pid_t> pids = FindProcesses({Script(), "--builtin-init"});
    if (pids.empty()) return;
    killed = pids[0];
    kill(killed, SIGKILL);
  });
  ASSERT_GT(killed, 0) << "never saw a checkpoint in [10, 40)\n" << b.err;
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_NE((b.out + b.err).find("resum"), std::string::npos) << b.out << b.err;

  const std::vector<float> pa = Parameters(dir.path() + "/a.ckpt", 40);
  const std::vector<float> pb = Parameters(b_ckpt, 40);
  ASSERT_EQ(pa.size(), pb.size());
  size_t differing = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (std::memcmp(&pa[i], &pb[i], sizeof(float)) != 0) ++differing;
  }
  EXPECT_EQ(differing, 0u);
}

// hp.init() outside any job: one line naming the missing variable, a non-zero exit.
TEST_F(PythonApi, InitOutsideAJobNamesTheMissingVariable) {
  const std::string python_dir =
      std::filesystem::path(HptrainBinary()).parent_path().parent_path().string() + "/python";
  ProcessResult r = RunProcess({"/usr/bin/env", "-i", "PYTHONPATH=" + python_dir, kPython, "-c",
                                "import hptrain as hp; hp.init()"},
                               120);
  EXPECT_NE(r.exit_code, 0);
  const std::vector<std::string> lines = Lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("HPTRAIN_JOB"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hptrain::testing
