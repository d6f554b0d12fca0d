// hptrain export through the real binary: LeNet-5 trained briefly on Fashion-MNIST, exported,
// and served by Python's torch.jit.load gives the run summary's test accuracy; a missing, a
// corrupt and another model's checkpoint are each a one-line error with exit code 2.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/train/checkpoint.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kPython[] = "/usr/bin/python3";
constexpr char kFashion[] = "/usr/share/datasets/fashion-mnist";

bool HaveFashionMnist() {
  return std::filesystem::exists(std::string(kFashion) + "/t10k-images-idx3-ubyte.gz");
}

std::string ExportJob(const std::string& name, const std::string& checkpoint) {
  return LeNetJob(name, "    - {name: cpu, replicas: 2}\n",
                  "  globalBatchSize: 64\n"
                  "  epochs: 1\n"
                  "  maxSteps: 80\n"
                  "  seed: 5\n"
                  "  threads: 1\n"
                  "  checkpoint: {path: " + checkpoint + "}\n");
}

// Test accuracy of the module on the test split, computed as a user would: the idx files read
// with numpy, pixels normalized with the module's own attributes.
constexpr char kAccuracyScript[] = R"(
import gzip, sys
import numpy as np
import torch

model = torch.jit.load(sys.argv[1]).eval()
root = sys.argv[2]
with gzip.open(root + "/t10k-images-idx3-ubyte.gz") as f:
    images = np.frombuffer(f.read(), np.uint8, offset=16)
with gzip.open(root + "/t10k-labels-idx1-ubyte.gz") as f:
    labels = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
c, h, w = model.input_shape
x = images.reshape(-1, c, h, w).astype(np.float32) / np.float32(255)
mean = np.array(model.input_mean, np.float32).reshape(1, c, 1, 1)
std = np.array(model.input_std, np.float32).reshape(1, c, 1, 1)
x = (x - mean) / std
with torch.no_grad():
    predicted = torch.cat([model(torch.from_numpy(x[i:i + 1000])).argmax(1)
                           for i in range(0, len(x), 1000)])
print((predicted.numpy() == labels).mean())
print(model.hptrain_model)
)";

TEST(Export, PythonServesTheExportedLeNetAtTheRunsTestAccuracy) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed at " << kFashion;
  TempDir dir;
  const std::string checkpoint = dir.path() + "/run.ckpt";
  const std::string job = dir.Write("job.yaml", ExportJob("export-lenet", checkpoint));
  const std::string summary_path = dir.path() + "/summary.json";
  ProcessResult run = RunProcess(
      {HptrainBinary(), "run", job, "--quiet", "--output-json", summary_path}, 600);
  ASSERT_EQ(run.exit_code, 0) << run.err;

  const std::string model = dir.path() + "/model.pt";
  ProcessResult exported = RunProcess({HptrainBinary(), "export", job, "--out", model}, 120);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_THAT(exported.out, HasSubstr("wrote " + model + ": 61706 parameters"));
  EXPECT_THAT(exported.out, HasSubstr("lenet5 trained with hptrain (job export-lenet"));
  ASSERT_TRUE(FileExists(model));

  ProcessResult probe = RunProcess({kPython, "-c", "import torch, numpy"}, 120);
  if (probe.exit_code != 0) {
    GTEST_SKIP() << kPython << " cannot import torch and numpy: " << probe.err;
  }
  const std::string script = dir.Write("accuracy.py", kAccuracyScript);
  ProcessResult served = RunProcess({kPython, script, model, kFashion}, 300);
  ASSERT_EQ(served.exit_code, 0) << served.err;
  const double python_accuracy = std::stod(Lines(served.out).at(0));
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(summary_path));
  const double run_accuracy = summary.at("final").at("test_accuracy").get<double>();
  std::printf("test accuracy: torch.jit.load in Python %.4f, run summary %.4f\n", python_accuracy,
              run_accuracy);
  // Trained for real (10 classes: chance is 0.1), and the same within 0.05 percentage point.
  EXPECT_GT(run_accuracy, 0.5);
  EXPECT_LE(std::fabs(python_accuracy - run_accuracy), 0.0005)
      << "python " << python_accuracy << ", run summary " << run_accuracy;
  EXPECT_THAT(served.out, HasSubstr("Input: float32 [N, 1, 28, 28]"));
}

// One line on stderr naming `what`, exit code 2.
void ExpectBadInput(const ProcessResult& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_THAT(r.err, HasSubstr("hptrain export: "));
  EXPECT_THAT(r.err, HasSubstr(what));
}

TEST(Export, BadCheckpointsAreOneLineErrors) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed at " << kFashion;
  TempDir dir;
  const std::string job = dir.Write("job.yaml", ExportJob("export-errors", dir.path() + "/a.ckpt"));
  const std::string out = dir.path() + "/model.pt";

  ExpectBadInput(RunProcess({HptrainBinary(), "export", job, "--out", out}, 120),
                 dir.path() + "/a.ckpt");

  const std::string corrupt = dir.Write("corrupt.ckpt", "HPTCKPT1 but nothing after it");
  ExpectBadInput(RunProcess({HptrainBinary(), "export", job, corrupt, "--out", out}, 120),
                 corrupt);

  train::Checkpoint other;  // an MLP-sized checkpoint for a LeNet-5 job
  other.job = "export-errors";
  other.sections["params"].assign(1000, 0.5f);
  other.sections["buffers"];
  const std::string wrong = dir.path() + "/other.ckpt";
  ASSERT_TRUE(train::SaveCheckpoint(wrong, other).ok());
  ExpectBadInput(RunProcess({HptrainBinary(), "export", job, wrong, "--out", out}, 120),
                 wrong + ": section params does not match this model (expected 61706 values)");

  ExpectBadInput(RunProcess({HptrainBinary(), "export", job, wrong}, 120), "--out");
  EXPECT_FALSE(FileExists(out));
}

}  // namespace
}  // namespace hptrain::testing
