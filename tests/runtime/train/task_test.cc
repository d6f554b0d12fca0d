// Task (runtime/train/task.h): each loss against a reference computed here from its definition,
// the metrics on hand-made outputs, their sums merged over shards as the evaluator merges them,
// and a TorchScript module's own loss and metric.
#include "runtime/train/task.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hptrain::train {
namespace {

using ::testing::HasSubstr;

TargetInfo Classes(int n) {
  TargetInfo t;
  t.kind = TargetKind::kClass;
  t.num_classes = n;
  return t;
}

TargetInfo Vectors(int dim) {
  TargetInfo t;
  t.kind = TargetKind::kVector;
  t.dim = dim;
  return t;
}

std::unique_ptr<Task> Make(const std::string& name, const TargetInfo& targets,
                           Model* model = nullptr) {
  auto task = CreateTask(name, targets, model);
  EXPECT_TRUE(task.ok()) << task.status();
  return task.ok() ? *std::move(task) : nullptr;
}

double Value(const NamedMetrics& metrics, const std::string& name) {
  for (const auto& [metric, value] : metrics) {
    if (metric == name) return value;
  }
  ADD_FAILURE() << "no metric " << name;
  return NAN;
}

// All of a task's metrics after accumulating (outputs, targets) in one batch.
NamedMetrics MetricsOf(const Task& task, const torch::Tensor& outputs,
                       const torch::Tensor& targets) {
  MetricState state = task.EmptyState();
  absl::Status status = task.Accumulate(outputs, targets, &state);
  EXPECT_TRUE(status.ok()) << status;
  return task.Metrics(state);
}

class TaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    torch::manual_seed(7);
  }
};

TEST_F(TaskTest, NamesItsMetricsPrimaryFirst) {
  auto classification = Make("classification", Classes(10));
  auto multilabel = Make("multilabel", Vectors(4));
  auto regression = Make("regression", Vectors(2));
  ASSERT_TRUE(classification && multilabel && regression);
  EXPECT_EQ(classification->metric_names(),
            (std::vector<std::string>{"accuracy", "top5_accuracy"}));
  EXPECT_TRUE(classification->higher_is_better());
  EXPECT_EQ(multilabel->metric_names(), (std::vector<std::string>{"f1", "map"}));
  EXPECT_TRUE(multilabel->higher_is_better());
  EXPECT_EQ(regression->primary_metric(), "rmse");
  EXPECT_FALSE(regression->higher_is_better());
}

TEST_F(TaskTest, TargetsThatDoNotFitTheTaskAreRefused) {
  auto wrong = CreateTask("classification", Vectors(3), nullptr);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.status().message()), HasSubstr("spec.task: classification"));
  EXPECT_EQ(CreateTask("regression", Classes(3), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateTask("multilabel", Classes(3), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateTask("torchscript", Classes(3), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateTask("ranking", Classes(3), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TaskTest, ClassificationLossIsTheSummedCrossEntropy) {
  auto task = Make("classification", Classes(4));
  ASSERT_TRUE(task);
  torch::Tensor logits = torch::randn({5, 4}, torch::kDouble);
  torch::Tensor targets = torch::tensor({0, 3, 1, 1, 2}, torch::kLong);
  double expected = 0;
  auto a = logits.accessor<double, 2>();
  for (int i = 0; i < 5; ++i) {
    double z = 0;
    for (int k = 0; k < 4; ++k) z += std::exp(a[i][k]);
    expected += std::log(z) - a[i][targets[i].item<int64_t>()];
  }
  auto loss = task->Loss(logits.to(torch::kFloat).requires_grad_(), targets);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(loss->dim(), 0);
  EXPECT_TRUE(loss->requires_grad());
  EXPECT_NEAR(loss->item<double>(), expected, 1e-4);
}

TEST_F(TaskTest, ClassificationTopOneAndTopFive) {
  auto task = Make("classification", Classes(7));
  ASSERT_TRUE(task);
  // Row i ranks the classes by its scores; the target's rank is 1, 2, 5, 6 and 7.
  torch::Tensor outputs = torch::tensor({{7., 6., 5., 4., 3., 2., 1.},
                                         {7., 6., 5., 4., 3., 2., 1.},
                                         {7., 6., 5., 4., 3., 2., 1.},
                                         {7., 6., 5., 4., 3., 2., 1.},
                                         {7., 6., 5., 4., 3., 2., 1.}});
  torch::Tensor targets = torch::tensor({0, 1, 4, 5, 6}, torch::kLong);
  NamedMetrics m = MetricsOf(*task, outputs, targets);
  EXPECT_DOUBLE_EQ(Value(m, "accuracy"), 1.0 / 5);
  EXPECT_DOUBLE_EQ(Value(m, "top5_accuracy"), 3.0 / 5);
  // With three classes top-k is top-3: always right.
  auto three = Make("classification", Classes(3));
  ASSERT_TRUE(three);
  NamedMetrics m3 = MetricsOf(*three, torch::tensor({{1., 2., 3.}, {3., 2., 1.}}),
                              torch::tensor({0, 2}, torch::kLong));
  EXPECT_DOUBLE_EQ(Value(m3, "accuracy"), 0.0);
  EXPECT_DOUBLE_EQ(Value(m3, "top5_accuracy"), 1.0);
}

TEST_F(TaskTest, MultilabelLossIsBceMeanOverLabelsSummedOverSamples) {
  auto task = Make("multilabel", Vectors(3));
  ASSERT_TRUE(task);
  torch::Tensor logits = torch::randn({4, 3}, torch::kDouble);
  torch::Tensor targets =
      torch::tensor({{1., 0., 1.}, {0., 0., 0.}, {1., 1., 1.}, {0., 1., 0.}}, torch::kDouble);
  double expected = 0;
  for (int i = 0; i < 4; ++i) {
    double sample = 0;
    for (int j = 0; j < 3; ++j) {
      const double z = logits[i][j].item<double>(), y = targets[i][j].item<double>();
      const double p = 1 / (1 + std::exp(-z));
      sample -= y * std::log(p) + (1 - y) * std::log(1 - p);
    }
    expected += sample / 3;
  }
  auto loss = task->Loss(logits.to(torch::kFloat), targets.to(torch::kFloat));
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(loss->item<double>(), expected, 1e-4);
}

TEST_F(TaskTest, MultilabelMicroF1AndMeanAveragePrecision) {
  auto task = Make("multilabel", Vectors(2));
  ASSERT_TRUE(task);
  // Label 0: logits 3, 2, -1, -2 for truths 1, 0, 1, 0: predicted positive 3 and 2 (TP, FP),
  // missed the third (FN). Ranked: P@1 = 1 (recall 1/2), P@3 = 2/3 (recall 1): AP 5/6.
  // Label 1: logits -3, 1, 2, 0.5 for truths 0, 1, 1, 0: TP 2, FP 1 (0.5), FN 0; ranked 2, 1:
  // both positives first: AP 1.
  torch::Tensor outputs = torch::tensor({{3., -3.}, {2., 1.}, {-1., 2.}, {-2., 0.5}});
  torch::Tensor targets = torch::tensor({{1.f, 0.f}, {0.f, 1.f}, {1.f, 1.f}, {0.f, 0.f}});
  NamedMetrics m = MetricsOf(*task, outputs, targets);
  const double tp = 3, fp = 2, fn = 1;
  EXPECT_NEAR(Value(m, "f1"), 2 * tp / (2 * tp + fp + fn), 1e-12);
  EXPECT_NEAR(Value(m, "map"), (5.0 / 6 + 1.0) / 2, 1e-12);
}

TEST_F(TaskTest, AveragePrecisionTreatsTiesAsOneThresholdAndSkipsAbsentLabels) {
  // Two samples tied at the top, one positive: precision 1/2 at recall 1/2; then the other
  // positive at rank 3: precision 2/3 at recall 1.
  EXPECT_NEAR(AveragePrecision({0.9f, 0.9f, 0.5f}, {true, false, true}), 0.5 * 0.5 + 0.5 * 2 / 3.,
              1e-12);
  EXPECT_EQ(AveragePrecision({0.9f, 0.1f}, {false, false}), -1);
  EXPECT_DOUBLE_EQ(AveragePrecision({0.1f, 0.9f}, {false, true}), 1.0);
}

TEST_F(TaskTest, RegressionLossRmseAndMae) {
  auto task = Make("regression", Vectors(2));
  ASSERT_TRUE(task);
  torch::Tensor outputs = torch::tensor({{1.f, 2.f}, {0.f, -1.f}, {3.f, 3.f}});
  torch::Tensor targets = torch::tensor({{1.5f, 2.f}, {2.f, -1.f}, {0.f, 4.f}});
  // Errors: -0.5, 0, -2, 0, 3, -1.
  const double squares = 0.25 + 0 + 4 + 0 + 9 + 1;
  auto loss = task->Loss(outputs, targets);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(loss->item<double>(), squares / 2, 1e-5);  // Σ_i mean over the 2 values
  NamedMetrics m = MetricsOf(*task, outputs, targets);
  EXPECT_NEAR(Value(m, "rmse"), std::sqrt(squares / 6), 1e-12);
  EXPECT_NEAR(Value(m, "mae"), (0.5 + 2 + 3 + 1) / 6, 1e-12);
  // Outputs that would broadcast against the targets are an error, not a silent [n, n] loss.
  auto wrong = task->Loss(torch::zeros({3, 1}), torch::zeros({3}));
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
}

// The evaluator scores shards on different workers and adds their states: the metrics of the
// merged states are those of the whole set.
TEST_F(TaskTest, ShardStatesMergeIntoTheWholeSetsMetrics) {
  struct Case {
    std::string task;
    TargetInfo targets;
    torch::Tensor outputs, labels;
  };
  std::vector<Case> cases = {
      {"classification", Classes(8), torch::randn({30, 8}),
       torch::randint(0, 8, {30}, torch::kLong)},
      {"multilabel", Vectors(5), torch::randn({30, 5}),
       torch::randint(0, 2, {30, 5}, torch::kFloat)},
      {"regression", Vectors(3), torch::randn({30, 3}), torch::randn({30, 3})}};
  for (const Case& c : cases) {
    auto task = Make(c.task, c.targets);
    ASSERT_TRUE(task);
    MetricState whole = task->EmptyState();
    ASSERT_TRUE(task->Accumulate(c.outputs, c.labels, &whole).ok());
    MetricState merged = task->EmptyState();
    for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 11}, {11, 30}}) {
      MetricState shard = task->EmptyState();
      ASSERT_TRUE(
          task->Accumulate(c.outputs.slice(0, begin, end), c.labels.slice(0, begin, end), &shard)
              .ok());
      merged.count += shard.count;
      merged.loss_sum += shard.loss_sum;
      for (size_t i = 0; i < merged.sums.size(); ++i) merged.sums[i] += shard.sums[i];
      merged.rows.insert(merged.rows.end(), shard.rows.begin(), shard.rows.end());
    }
    EXPECT_EQ(merged.count, 30) << c.task;
    EXPECT_NEAR(merged.loss_sum, whole.loss_sum, 1e-4) << c.task;
    const NamedMetrics a = task->Metrics(whole), b = task->Metrics(merged);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].first, b[i].first);
      EXPECT_NEAR(a[i].second, b[i].second, 1e-9) << c.task << " " << a[i].first;
    }
  }
}

// A TorchScript module with its own loss and metric, defined here, saved and loaded as a job's
// spec.model.torchscript would be.
class TorchScriptTaskTest : public TaskTest {
 protected:
  std::unique_ptr<Model> Load(const std::string& methods, const std::string& file) {
    torch::jit::Module module("Regressor");
    module.register_parameter("w", torch::randn({4, 2}).requires_grad_(), false);
    module.define(R"(
def forward(self, x):
    return x.flatten(1).matmul(self.w)
)" + methods);
    const std::string path = ::testing::TempDir() + "/" + file;
    module.save(path);
    job::ModelSpec spec;
    spec.torchscript = path;
    auto model = CreateModel(spec, ModelShape{1, 2, 2, 2}, 1);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *std::move(model) : nullptr;
  }
};

TEST_F(TorchScriptTaskTest, CallsTheModulesLossAndMetric) {
  auto model = Load(R"(
def loss(self, outputs, targets):
    return (outputs - targets).abs().mean() * 3.0
def metric(self, outputs, targets):
    return (outputs - targets).abs().max()
)",
                    "hptrain_task_with_loss.pt");
  ASSERT_TRUE(model);
  auto task = Make("torchscript", Vectors(2), model.get());
  ASSERT_TRUE(task);
  EXPECT_EQ(task->metric_names(), (std::vector<std::string>{"metric"}));
  torch::Tensor inputs = torch::randn({5, 1, 2, 2});
  torch::Tensor targets = torch::randn({5, 2});
  auto outputs = model->Forward(inputs);
  ASSERT_TRUE(outputs.ok());
  auto loss = task->Loss(*outputs, targets);
  ASSERT_TRUE(loss.ok()) << loss.status();
  // The module returns the batch's mean; the task's loss is the sum: × 5.
  const torch::Tensor error = (*outputs - targets).abs();
  EXPECT_NEAR(loss->item<double>(), error.mean().item<double>() * 3 * 5, 1e-4);
  // Gradients reach the module's parameters through its own loss.
  loss->backward();
  ASSERT_TRUE(model->parameters()[0].grad().defined());
  EXPECT_GT(model->parameters()[0].grad().abs().sum().item<double>(), 0);
  // metric: each batch's value weighted by its size.
  MetricState state = task->EmptyState();
  torch::NoGradGuard no_grad;
  ASSERT_TRUE(task->Accumulate(outputs->slice(0, 0, 2), targets.slice(0, 0, 2), &state).ok());
  ASSERT_TRUE(task->Accumulate(outputs->slice(0, 2, 5), targets.slice(0, 2, 5), &state).ok());
  const double first = error.slice(0, 0, 2).max().item<double>();
  const double second = error.slice(0, 2, 5).max().item<double>();
  EXPECT_NEAR(task->Metrics(state)[0].second, (2 * first + 3 * second) / 5, 1e-5);
  // An empty slice does not call the module (its mean would be NaN) and gives zero.
  auto empty = task->Loss(outputs->slice(0, 0, 0), targets.slice(0, 0, 0));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->item<double>(), 0.0);
}

TEST_F(TorchScriptTaskTest, WithoutMetricReportsTheLossAndWithoutLossIsRefused) {
  auto only_loss = Load(R"(
def loss(self, outputs, targets):
    return ((outputs - targets) ** 2).mean()
)",
                        "hptrain_task_only_loss.pt");
  ASSERT_TRUE(only_loss);
  auto task = Make("torchscript", Vectors(2), only_loss.get());
  ASSERT_TRUE(task);
  EXPECT_EQ(task->primary_metric(), "loss");
  EXPECT_FALSE(task->higher_is_better());
  torch::NoGradGuard no_grad;
  auto outputs = only_loss->Forward(torch::randn({4, 1, 2, 2}));
  ASSERT_TRUE(outputs.ok());
  torch::Tensor targets = torch::randn({4, 2});
  NamedMetrics m = MetricsOf(*task, *outputs, targets);
  EXPECT_NEAR(Value(m, "loss"), (*outputs - targets).square().mean().item<double>(), 1e-5);

  auto no_loss = Load("", "hptrain_task_no_loss.pt");
  ASSERT_TRUE(no_loss);
  auto refused = CreateTask("torchscript", Vectors(2), no_loss.get());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("no loss(outputs, targets)"));
}

TEST_F(TorchScriptTaskTest, ALossThatFailsIsAnErrorNotAnException) {
  auto model = Load(R"(
def loss(self, outputs, targets):
    return outputs.matmul(targets)
)",
                    "hptrain_task_bad_loss.pt");
  ASSERT_TRUE(model);
  auto task = Make("torchscript", Vectors(2), model.get());
  ASSERT_TRUE(task);
  auto loss = task->Loss(torch::zeros({3, 2}), torch::zeros({3, 2}));  // [3,2] @ [3,2]: invalid
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loss.status().message()), HasSubstr("loss failed"));
}

}  // namespace
}  // namespace hptrain::train
