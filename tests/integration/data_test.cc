// The npy format through the real binary: Fashion-MNIST written as npy (uint8 [N, 28, 28], as
// numpy.save writes it) trains to the idx reader's parameters bit for bit; with augmentation, a
// rebalanced run ends with the fixed allocation's parameters and a killed-and-resumed run with an
// uninterrupted one's, bit for bit; bad npy files are one-line errors naming the file, exit 2.
#include <signal.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/train/checkpoint.h"
#include "tests/integration/hptrain_process.h"
#include "tests/runtime/train/data/npy_writer.h"

namespace hptrain::testing {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";
constexpr int kSteps = 30;

// The whole of a gzip (or plain) file.
std::vector<uint8_t> ReadGz(const std::string& path) {
  std::vector<uint8_t> out;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.insert(out.end(), buf, buf + n);
  gzclose(f);
  return out;
}

uint32_t BigEndian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Fashion-MNIST's idx files as train-/test-images.npy (|u1 [N, 28, 28]) and -labels.npy (<i8 [N])
// in `dir`: what numpy.save writes for the arrays torchvision reads from the same files.
bool ConvertToNpy(const std::string& dir) {
  for (const auto& [idx, npy] : {std::pair<std::string, std::string>{"train", "train"},
                                 std::pair<std::string, std::string>{"t10k", "test"}}) {
    const std::vector<uint8_t> images =
        ReadGz(std::string(kFashionMnist) + "/" + idx + "-images-idx3-ubyte.gz");
    const std::vector<uint8_t> labels =
        ReadGz(std::string(kFashionMnist) + "/" + idx + "-labels-idx1-ubyte.gz");
    if (images.size() < 16 || labels.size() < 8) return false;
    const int64_t n = BigEndian(&images[4]);
    const int64_t rows = BigEndian(&images[8]);
    const int64_t cols = BigEndian(&images[12]);
    if (!WriteNpy(dir + "/" + npy + "-images.npy", "|u1", {n, rows, cols}, images.data() + 16,
                  static_cast<size_t>(n * rows * cols))) {
      return false;
    }
    std::vector<int64_t> classes(labels.begin() + 8, labels.end());
    if (!WriteNpy(dir + "/" + npy + "-labels.npy", "<i8", {n}, classes)) return false;
  }
  return true;
}

// A LeNet-5 job, 4 workers (or `groups`), `kSteps` steps, final parameters in `checkpoint`.
std::string Job(const std::string& name, const std::string& dataset, const std::string& checkpoint,
                const std::string& extra = "",
                const std::string& workers = "  workers: {replicas: 4}\n") {
  return "apiVersion: hptrain.io/v1alpha1\n"
         "kind: TrainingJob\n"
         "metadata:\n"
         "  name: " + name + "\n"
         "spec:\n"
         "  model: {name: lenet5}\n"
         "  dataset: " + dataset + "\n"
         "  strategy: {type: ssgd}\n"
         "  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}\n"
         "  globalBatchSize: 64\n"
         "  epochs: 1\n"
         "  maxSteps: " + std::to_string(kSteps) + "\n"
         "  seed: 11\n"
         "  threads: 1\n" + workers +
         "  checkpoint: {path: " + checkpoint + "}\n" + extra;
}

std::vector<float> FinalParameters(const std::string& checkpoint) {
  auto c = train::LoadCheckpoint(checkpoint);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return {};
  EXPECT_EQ(c->step, kSteps);
  return c->sections["params"];
}

::testing::AssertionResult BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.empty() || a.size() != b.size()) {
    return ::testing::AssertionFailure() << "sizes " << a.size() << " and " << b.size();
  }
  size_t differing = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && differing++ == 0) first = i;
  }
  if (differing == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differing << " parameters differ, the first at " << first
                                       << ": " << a[first] << " vs " << b[first];
}

class NpyData : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz")) {
      return;
    }
    data_ = new TempDir();
    converted_ = ConvertToNpy(data_->path());
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }
  void SetUp() override {
    if (data_ == nullptr) GTEST_SKIP() << "Fashion-MNIST not installed at " << kFashionMnist;
    ASSERT_TRUE(converted_) << "could not write the npy files";
  }
  static std::string Npy(const std::string& more = "") {
    return "{name: fmnist-npy, format: npy, path: " + data_->path() + ", normalize: false" + more +
           "}";
  }

  TempDir dir_;
  static TempDir* data_;
  static bool converted_;
};
TempDir* NpyData::data_ = nullptr;
bool NpyData::converted_ = false;

constexpr char kAugment[] = ", augment: {randomCrop: {size: 28, padding: 4}, horizontalFlip: true}";

TEST_F(NpyData, TrainsToTheIdxReadersParametersBitForBit) {
  const std::string idx_ckpt = dir_.path() + "/idx.ckpt";
  const std::string npy_ckpt = dir_.path() + "/npy.ckpt";
  const std::string idx = dir_.Write(
      "idx.yaml", Job("data-idx", "{name: fashion-mnist, normalize: false}", idx_ckpt));
  const std::string npy = dir_.Write("npy.yaml", Job("data-npy", Npy(), npy_ckpt));
  ProcessResult a = RunProcess({HptrainBinary(), "run", idx, "--quiet"}, 600);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ProcessResult b = RunProcess({HptrainBinary(), "run", npy, "--quiet"}, 600);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_TRUE(BitIdentical(FinalParameters(idx_ckpt), FinalParameters(npy_ckpt)));
}

TEST_F(NpyData, AugmentedRunRebalancedEndsWithTheFixedAllocationsParameters) {
  // Relative speeds (1, 1, 0.5, 0.25) x 4, as in rebalance_test.cc.
  const std::string slow = "  testing: {slowdown: [4, 4, 8, 16]}\n";
  const std::string fixed_ckpt = dir_.path() + "/fixed.ckpt";
  const std::string moving_ckpt = dir_.path() + "/moving.ckpt";
  const std::string fixed =
      dir_.Write("fixed.yaml", Job("aug-fixed", Npy(kAugment), fixed_ckpt, slow));
  const std::string moving = dir_.Write(
      "moving.yaml",
      Job("aug-moving", Npy(kAugment), moving_ckpt,
          slow + "  rebalance: {enabled: true, intervalSteps: 3, hysteresis: 0.05}\n"));
  // A small step size keeps float summation-order differences (which any two allocations have)
  // from growing beyond 1e-5 in these steps.
  const std::vector<std::string> calm = {"--set", "spec.optimizer.lr=0.01", "--set",
                                         "spec.optimizer.momentum=0"};
  std::vector<std::string> run_fixed = {HptrainBinary(), "run", fixed, "--quiet"};
  run_fixed.insert(run_fixed.end(), calm.begin(), calm.end());
  ProcessResult a = RunProcess(run_fixed, 600);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const std::string json = dir_.path() + "/moving.json";
  std::vector<std::string> run_moving = {HptrainBinary(), "run", moving, "--quiet",
                                         "--output-json", json};
  run_moving.insert(run_moving.end(), calm.begin(), calm.end());
  ProcessResult b = RunProcess(run_moving, 600);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  // The allocation really moved: the slowest worker ends with a smaller share than worker 0.
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
  ASSERT_TRUE(summary.contains("ranks")) << ReadFile(json);
  std::vector<int> final_batch;
  for (const auto& r : summary["ranks"]) final_batch.push_back(r["batch_size"].get<int>());
  ASSERT_EQ(final_batch.size(), 4u);
  EXPECT_LT(final_batch[3], final_batch[0]);

  const std::vector<float> pa = FinalParameters(fixed_ckpt);
  const std::vector<float> pb = FinalParameters(moving_ckpt);
  ASSERT_EQ(pa.size(), pb.size());
  ASSERT_FALSE(pa.empty());
  double worst = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(pa[i]) - pb[i]) /
                                std::max(std::abs(static_cast<double>(pa[i])), 1e-2));
  }
  std::cout << "max relative difference " << worst << "\n";
  EXPECT_LE(worst, 1e-5);
}

TEST_F(NpyData, AugmentedRunKilledAndResumedEqualsAnUninterruptedOne) {
  const std::string extra = "  testing: {slowdown: [20, 20, 20, 20]}\n";
  const std::string ckpt_a = dir_.path() + "/a.ckpt";
  const std::string ckpt_b = dir_.path() + "/b.ckpt";
  const auto job = [&](const std::string& name, const std::string& ckpt) {
    std::string text = Job(name, Npy(kAugment), ckpt, extra);
    text.replace(text.find("}\n", text.find("checkpoint:")), 2, ", intervalSteps: 10}\n");
    return text;
  };
  const std::string job_a = dir_.Write("a.yaml", job("aug-resume-a", ckpt_a));
  const std::string job_b = dir_.Write("b.yaml", job("aug-resume-b", ckpt_b));
  ProcessResult a = RunProcess({HptrainBinary(), "run", job_a, "--quiet"}, 600);
  ASSERT_EQ(a.exit_code, 0) << a.err;

  // SIGKILL a worker once a checkpoint inside the run exists.
  pid_t killed = -1;
  ProcessResult b = RunProcess({HptrainBinary(), "run", job_b, "--quiet", "--set",
                                "spec.runPolicy.restartPolicy=Never"}, 600, [&](pid_t) {
    if (killed > 0 || !FileExists(ckpt_b)) return;
    auto c = train::LoadCheckpoint(ckpt_b);
    if (!c.ok() || c->step < 10 || c->step >= kSteps) return;
    std::vector<pid_t> pids = FindProcesses({job_b, "worker", "--rank 1"});
    if (pids.empty()) return;
    killed = pids[0];
    kill(killed, SIGKILL);
  });
  ASSERT_GT(killed, 0) << "never saw a checkpoint in [10, " << kSteps << "); run ended with "
                       << b.exit_code << "\n" << b.err;
  EXPECT_EQ(b.exit_code, 1) << b.err;
  auto interrupted = train::LoadCheckpoint(ckpt_b);
  ASSERT_TRUE(interrupted.ok()) << interrupted.status();
  EXPECT_LT(interrupted->step, kSteps);

  ProcessResult resumed = RunProcess({HptrainBinary(), "run", job_b, "--resume", "--quiet"}, 600);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(BitIdentical(FinalParameters(ckpt_a), FinalParameters(ckpt_b)));
}

// Bad npy files: exit 2 and one line on stderr naming the file.
class BadNpy : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<uint8_t> pixels(8 * 28 * 28, 100);
    std::vector<int64_t> labels = {0, 1, 2, 3, 4, 5, 6, 7};
    for (const std::string split : {"train", "test"}) {
      ASSERT_TRUE(WriteNpy(Path(split + "-images.npy"), "|u1", {8, 28, 28}, pixels));
      ASSERT_TRUE(WriteNpy(Path(split + "-labels.npy"), "<i8", {8}, labels));
    }
  }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  // Runs the job and checks exit 2, one line, and that the line names `file` and `what`.
  void ExpectBadInput(const std::string& file, const std::string& what) {
    const std::string job = dir_.Write(
        "job.yaml", Job("bad-npy", "{name: tiny, format: npy, path: " + dir_.path() + "}",
                        dir_.path() + "/x.ckpt", "", "  workers: {replicas: 2}\n"));
    std::string text = ReadFile(job);
    text.replace(text.find("globalBatchSize: 64"), 19, "globalBatchSize: 4");
    dir_.Write("job.yaml", text);
    ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 120);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find(Path(file)), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  }

  TempDir dir_;
};

TEST_F(BadNpy, TruncatedWrongDtypeAndLengthMismatchNameTheFile) {
  // Truncated: the images file lost its last 100 bytes.
  std::vector<uint8_t> pixels(8 * 28 * 28, 100);
  ASSERT_TRUE(WriteNpy(Path("train-images.npy"), "|u1", {8, 28, 28}, pixels.data(),
                       pixels.size() - 100));
  ExpectBadInput("train-images.npy", "truncated");
  ASSERT_TRUE(WriteNpy(Path("train-images.npy"), "|u1", {8, 28, 28}, pixels));

  // Wrong dtype: float64 labels.
  std::vector<double> doubles(8, 1.0);
  ASSERT_TRUE(WriteNpy(Path("test-labels.npy"), "<f8", {8}, doubles));
  ExpectBadInput("test-labels.npy", "dtype '<f8'");
  std::vector<int64_t> labels = {0, 1, 2, 3, 4, 5, 6, 7};
  ASSERT_TRUE(WriteNpy(Path("test-labels.npy"), "<i8", {8}, labels));

  // Seven labels for eight images.
  labels.pop_back();
  ASSERT_TRUE(WriteNpy(Path("train-labels.npy"), "<i8", {7}, labels));
  ExpectBadInput("train-labels.npy", "7 labels for the 8 images");
}

}  // namespace
}  // namespace hptrain::testing
