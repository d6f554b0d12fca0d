// spec.task through the real binary (runtime/train/task.h): regression on data made here reaches
// an RMSE that no linear model reaches on it (the bound computed here by least squares);
// multilabel reports its metrics by name; a TorchScript module's own loss trains and falls; every
// task trains under ssgd, hps and multistep. The data is written here as .npy files (NumPy's
// NEP 1 format); the TorchScript module by /usr/bin/python3 (skipped without torch there).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

// An .npy file (NEP 1, version 1.0): little-endian `descr` ("<f4"), C order, `shape`.
void WriteNpy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
              const void* data, size_t bytes) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  // "(n,)" for one dimension, "(n, m)" for more.
  dims.resize(dims.size() - (shape.size() > 1 ? 2 : 1));
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + header + '\n', padded to a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header += std::string((64 - unpadded % 64) % 64, ' ') + "\n";
  std::ofstream out(path, std::ios::binary);
  const uint16_t length = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  const char le[2] = {static_cast<char>(length & 0xff), static_cast<char>(length >> 8)};
  out.write(le, 2);
  out << header;
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  ASSERT_TRUE(out.good()) << path;
}

constexpr int kSide = 4;                  // images 1 x 4 x 4
constexpr int kFeatures = kSide * kSide;  // 16 pixels in [0, 1]

// One split: pixels uniform in [0, 1), and the targets of each task, computed from them.
struct Split {
  std::vector<float> pixels;      // n x 16
  std::vector<float> regression;  // n x 2: 4 (x0 - 1/2)^2, |x1 - x2|
  std::vector<float> multilabel;  // n x 4: x_j > 1/2
  int64_t n = 0;
};

Split MakeSplit(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(0.f, 1.f);
  Split s;
  s.n = n;
  for (int64_t i = 0; i < n; ++i) {
    const size_t at = s.pixels.size();
    for (int j = 0; j < kFeatures; ++j) s.pixels.push_back(uniform(rng));
    const float* x = &s.pixels[at];
    s.regression.push_back(4 * (x[0] - 0.5f) * (x[0] - 0.5f));
    s.regression.push_back(std::fabs(x[1] - x[2]));
    for (int j = 0; j < 4; ++j) s.multilabel.push_back(x[j] > 0.5f ? 1.f : 0.f);
  }
  return s;
}

// Writes the npy directory of one task ("regression" or "multilabel") under `dir`.
std::string WriteData(const std::string& dir, const std::string& task, const Split& train,
                      const Split& test) {
  const std::string path = dir + "/" + task;
  std::filesystem::create_directories(path);
  for (const auto& [name, split] :
       {std::pair<std::string, const Split*>{"train", &train}, {"test", &test}}) {
    WriteNpy(path + "/" + name + "-images.npy", "<f4", {split->n, kSide, kSide},
             split->pixels.data(), split->pixels.size() * sizeof(float));
    const std::vector<float>& targets =
        task == "regression" ? split->regression : split->multilabel;
    const int64_t dim = static_cast<int64_t>(targets.size()) / split->n;
    WriteNpy(path + "/" + name + "-labels.npy", "<f4", {split->n, dim}, targets.data(),
             targets.size() * sizeof(float));
  }
  return path;
}

// The RMSE over every target value of the best affine fit of `test`'s regression targets from its
// pixels (least squares on the test set itself: no linear model does better there).
double BestLinearRmse(const Split& test) {
  constexpr int p = kFeatures + 1;  // pixels and a bias
  double total = 0;
  for (int d = 0; d < 2; ++d) {
    // Normal equations A w = b, A = X^T X, b = X^T y; Gauss-Jordan with partial pivoting.
    std::vector<double> a(p * p, 0.0), b(p, 0.0);
    for (int64_t i = 0; i < test.n; ++i) {
      double row[p];
      for (int j = 0; j < kFeatures; ++j) row[j] = test.pixels[i * kFeatures + j];
      row[kFeatures] = 1;
      const double y = test.regression[i * 2 + d];
      for (int r = 0; r < p; ++r) {
        b[r] += row[r] * y;
        for (int c = 0; c < p; ++c) a[r * p + c] += row[r] * row[c];
      }
    }
    for (int c = 0; c < p; ++c) {
      int pivot = c;
      for (int r = c + 1; r < p; ++r) {
        if (std::fabs(a[r * p + c]) > std::fabs(a[pivot * p + c])) pivot = r;
      }
      for (int k = 0; k < p; ++k) std::swap(a[c * p + k], a[pivot * p + k]);
      std::swap(b[c], b[pivot]);
      for (int r = 0; r < p; ++r) {
        if (r == c) continue;
        const double f = a[r * p + c] / a[c * p + c];
        for (int k = 0; k < p; ++k) a[r * p + k] -= f * a[c * p + k];
        b[r] -= f * b[c];
      }
    }
    for (int64_t i = 0; i < test.n; ++i) {
      double fit = b[kFeatures] / a[kFeatures * p + kFeatures];
      for (int j = 0; j < kFeatures; ++j) {
        fit += b[j] / a[j * p + j] * test.pixels[i * kFeatures + j];
      }
      const double e = fit - test.regression[i * 2 + d];
      total += e * e;
    }
  }
  return std::sqrt(total / (2.0 * static_cast<double>(test.n)));
}

// A job on `dataset` (a YAML flow mapping) with `task`, two workers unless `strategy` needs more.
std::string Job(const std::string& name, const std::string& task, const std::string& model,
                const std::string& dataset, const std::string& strategy, const std::string& extra) {
  std::string job = "apiVersion: hptrain.io/v1alpha1\nkind: TrainingJob\nmetadata:\n";
  job += "  name: " + name + "\nspec:\n";
  job += "  task: " + task + "\n";
  job += "  model: " + model + "\n";
  job += "  dataset: " + dataset + "\n";
  job += "  strategy: " + strategy + "\n";
  job += "  globalBatchSize: 64\n  threads: 1\n  seed: 3\n  workers: {replicas: 2}\n";
  return job + extra;
}

struct JobRun {
  int exit_code = -1;
  std::string err;
  Json summary;
};

JobRun RunJob(const std::string& dir, const std::string& name, const std::string& job) {
  const std::string file = dir + "/" + name + ".yaml";
  const std::string json = dir + "/" + name + ".json";
  std::ofstream(file) << job;
  ProcessResult r = RunProcess({HptrainBinary(), "run", file, "--output-json", json}, 300);
  JobRun run;
  run.exit_code = r.exit_code;
  run.err = r.out + r.err;
  if (r.exit_code == 0) run.summary = Json::parse(ReadFile(json), nullptr, false);
  return run;
}

double Metric(const Json& evaluation, const std::string& name) {
  if (!evaluation.contains("metrics") || !evaluation["metrics"].contains(name)) {
    ADD_FAILURE() << "no metric " << name << " in " << evaluation.dump();
    return NAN;
  }
  return evaluation["metrics"][name].get<double>();
}

class TasksTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    train_ = new Split(MakeSplit(2048, 1));
    test_ = new Split(MakeSplit(512, 2));
    regression_ = WriteData(dir_->path(), "regression", *train_, *test_);
    multilabel_ = WriteData(dir_->path(), "multilabel", *train_, *test_);
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete train_;
    delete test_;
  }
  static std::string Npy(const std::string& path) {
    return "{name: tasks, format: npy, path: " + path + ", normalize: false}";
  }
  // A TorchScript MLP for 1 x 4 x 4 inputs with `outputs` outputs and its own loss and metric
  // (`loss` and `metric` are TorchScript expressions of `outputs` and `targets`); empty when
  // /usr/bin/python3 has no torch.
  static std::string Module(const std::string& name, int outputs, const std::string& loss,
                            const std::string& metric) {
    const std::string path = dir_->path() + "/" + name + ".pt";
    const std::string script = dir_->path() + "/" + name + ".py";
    std::string text = "import torch\n";
    text += "torch.manual_seed(0)\n";
    text += "class M(torch.nn.Module):\n";
    text += "    def __init__(self):\n";
    text += "        super().__init__()\n";
    text += "        self.fc1 = torch.nn.Linear(16, 64)\n";
    text += "        self.fc2 = torch.nn.Linear(64, " + std::to_string(outputs) + ")\n";
    text += "    def forward(self, x):\n";
    text += "        return self.fc2(torch.relu(self.fc1(torch.flatten(x, 1))))\n";
    text += "    @torch.jit.export\n";
    text += "    def loss(self, outputs, targets):\n";
    text += "        return " + loss + "\n";
    text += "    @torch.jit.export\n";
    text += "    def metric(self, outputs, targets):\n";
    text += "        return " + metric + "\n";
    text += "torch.jit.script(M()).save('" + path + "')\n";
    std::ofstream(script) << text;
    const std::string command = "/usr/bin/python3 " + script + " >/dev/null 2>&1";
    return std::system(command.c_str()) == 0 ? path : "";
  }

  static TempDir* dir_;
  static Split* train_;
  static Split* test_;
  static std::string regression_;
  static std::string multilabel_;
};

TempDir* TasksTest::dir_ = nullptr;
Split* TasksTest::train_ = nullptr;
Split* TasksTest::test_ = nullptr;
std::string TasksTest::regression_;
std::string TasksTest::multilabel_;

// Label-smoothed cross-entropy (its own loss) and the accuracy (its own metric) of a classifier.
const char kClassifierLoss[] =
    "torch.nn.functional.cross_entropy(outputs, targets, label_smoothing=0.1)";
const char kClassifierMetric[] = "(outputs.argmax(1) == targets).float().mean()";
const char kSynthetic[] =
    "{name: synthetic, synthetic: {samples: 2048, testSamples: 512, shape: [1, 4, 4], "
    "classes: 4}}";

TEST_F(TasksTest, RegressionBeatsTheBestLinearFit) {
  const double bound = BestLinearRmse(*test_);
  JobRun run =
      RunJob(dir_->path(), "regression",
             Job("regression", "regression", "{name: mlp, hidden: [64, 64]}", Npy(regression_),
                 "{type: ssgd}", "  optimizer: {type: adam, lr: 0.01}\n  epochs: 4\n"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("test_rmse "));
  const Json& s = run.summary;
  EXPECT_EQ(s["task"], "regression");
  EXPECT_EQ(s["metric"], "rmse");
  const double rmse = Metric(s["final"], "rmse");
  const double mae = Metric(s["final"], "mae");
  std::cout << "regression: test RMSE " << rmse << " (MAE " << mae
            << "), best linear fit on the test set " << bound << "\n";
  EXPECT_GT(bound, 0.2);  // the targets are far from linear in the pixels
  EXPECT_LT(rmse, bound);
  EXPECT_LE(mae, rmse);
  EXPECT_EQ(s["final"]["test_accuracy"], 0.0);
  // The test loss is the MSE per sample averaged over the two targets: RMSE squared.
  EXPECT_NEAR(s["final"]["test_loss"].get<double>(), rmse * rmse, 1e-3);
}

TEST_F(TasksTest, MultilabelReportsF1AndMeanAveragePrecision) {
  JobRun run = RunJob(dir_->path(), "multilabel",
                   Job("multilabel", "multilabel", "{name: mlp, hidden: [32]}", Npy(multilabel_),
                       "{type: ssgd}", "  optimizer: {type: adam, lr: 0.01}\n  epochs: 3\n"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("test_f1 "));
  const Json& s = run.summary;
  EXPECT_EQ(s["metric"], "f1");
  const double f1 = Metric(s["final"], "f1"), map = Metric(s["final"], "map");
  std::cout << "multilabel: F1 " << f1 << ", mAP " << map << "\n";
  // Each label is one pixel above 1/2: learnable to near 1; chance F1 is about 1/2.
  EXPECT_GT(f1, 0.8);
  EXPECT_GT(map, 0.8);
  EXPECT_LE(map, 1.0);
  ASSERT_EQ(s["per_epoch"].size(), 3u);
  EXPECT_EQ(Metric(s["per_epoch"][2], "f1"), f1);
}

// The module's own loss (label-smoothed cross-entropy) drives training: the test loss it gives
// falls from the first evaluation to the last, and its own metric (accuracy) rises above chance.
TEST_F(TasksTest, TorchScriptModulesOwnLossTrainsAndFalls) {
  const std::string module = Module("classifier", 4, kClassifierLoss, kClassifierMetric);
  if (module.empty()) GTEST_SKIP() << "/usr/bin/python3 cannot script a torch module";
  JobRun run = RunJob(
      dir_->path(), "torchscript",
      Job("torchscript", "torchscript", "{torchscript: " + module + "}", kSynthetic, "{type: ssgd}",
          "  optimizer: {type: sgd, lr: 0.1, momentum: 0.9}\n  epochs: 2\n"
          "  evalEverySteps: 8\n"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("test_metric "));
  const Json& s = run.summary;
  EXPECT_EQ(s["task"], "torchscript");
  EXPECT_EQ(s["metric"], "metric");
  const Json& evaluations = s["evaluations"];
  ASSERT_GE(evaluations.size(), 3u);
  const double first = evaluations.front()["test_loss"].get<double>();
  const double last = evaluations.back()["test_loss"].get<double>();
  std::cout << "torchscript: test loss " << first << " at step " << evaluations.front()["step"]
            << ", " << last << " at the end; metric " << Metric(s["final"], "metric") << "\n";
  EXPECT_LT(last, 0.8 * first);
  EXPECT_LT(s["per_epoch"][1]["train_loss"].get<double>(),
            s["per_epoch"][0]["train_loss"].get<double>());
  EXPECT_GT(Metric(s["final"], "metric"), 0.5);  // four classes: chance is 1/4
}

// One epoch of every task under ssgd, hps and multistep: each run ends and reports its task's
// metrics by name.
TEST_F(TasksTest, EveryTaskUnderSsgdHpsAndMultistep) {
  const std::string module = Module("matrix", 4, kClassifierLoss, kClassifierMetric);
  struct Task {
    std::string task, model, dataset;
    std::vector<std::string> metrics;
  };
  std::vector<Task> tasks = {
      {"classification", "{name: mlp, hidden: [16]}", kSynthetic, {"accuracy", "top5_accuracy"}},
      {"multilabel", "{name: mlp, hidden: [16]}", Npy(multilabel_), {"f1", "map"}},
      {"regression", "{name: mlp, hidden: [16]}", Npy(regression_), {"rmse", "mae"}}};
  if (!module.empty()) {
    tasks.push_back({"torchscript", "{torchscript: " + module + "}", kSynthetic, {"metric"}});
  }
  for (const std::string& strategy :
       {std::string("{type: ssgd}"), std::string("{type: hps, bits: 8, staleness: 1}"),
        std::string("{type: multistep, interval: 2}")}) {
    for (const Task& t : tasks) {
      const std::string name = t.task + "-" + strategy.substr(7, strategy.find_first_of(",}") - 7);
      JobRun run = RunJob(dir_->path(), name,
                       Job(name, t.task, t.model, t.dataset, strategy,
                           "  optimizer: {type: sgd, lr: 0.05}\n  epochs: 1\n"));
      ASSERT_EQ(run.exit_code, 0) << name << ": " << run.err;
      EXPECT_EQ(run.summary["task"], t.task) << name;
      EXPECT_EQ(run.summary["metric"], t.metrics[0]) << name;
      for (const std::string& metric : t.metrics) {
        const double value = Metric(run.summary["final"], metric);
        EXPECT_TRUE(std::isfinite(value)) << name << " " << metric;
      }
    }
  }
}

}  // namespace
}  // namespace hptrain::testing
