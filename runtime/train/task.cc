#include "runtime/train/task.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <numeric>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/train/torch_call.h"

namespace hptrain::train {
namespace {

namespace F = torch::nn::functional;

// Runs `fn`, turning libtorch's exceptions into InvalidArgument "WHAT: MESSAGE": a loss or metric
// fails on what the user gave (outputs of the wrong shape, a module's own method).
template <typename Fn>
absl::Status Guarded(const std::string& what, Fn&& fn) {
  absl::Status status = TorchCall(what.c_str(), std::forward<Fn>(fn));
  if (status.ok()) return status;
  return absl::InvalidArgumentError(status.message());
}

double Ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

class ClassificationTask final : public Task {
 public:
  explicit ClassificationTask(int classes)
      : Task("classification", {"accuracy", "top5_accuracy"}, true),
        k_(std::max(1, std::min(5, classes))) {}

  absl::StatusOr<torch::Tensor> Loss(const torch::Tensor& outputs,
                                     const torch::Tensor& targets) const override {
    torch::Tensor loss;
    HPTRAIN_RETURN_IF_ERROR(Guarded("classification loss", [&] {
      loss = F::cross_entropy(outputs.to(torch::kFloat), targets,
                              F::CrossEntropyFuncOptions().reduction(torch::kSum));
    }));
    return loss;
  }

  int num_sums() const override { return 2; }  // top-1 hits, top-k hits

  NamedMetrics Metrics(const MetricState& s) const override {
    return {{"accuracy", Ratio(s.sums[0], s.count)}, {"top5_accuracy", Ratio(s.sums[1], s.count)}};
  }

 protected:
  void AccumulateMetrics(const torch::Tensor& outputs, const torch::Tensor& targets,
                         MetricState* s) const override {
    s->sums[0] += outputs.argmax(1).eq(targets).sum().item<double>();
    const int64_t k = std::min<int64_t>(k_, outputs.size(1));
    torch::Tensor top = std::get<1>(outputs.topk(k, 1));
    s->sums[1] += top.eq(targets.unsqueeze(1)).any(1).sum().item<double>();
  }

 private:
  int k_;
};

class MultilabelTask final : public Task {
 public:
  explicit MultilabelTask(int labels) : Task("multilabel", {"f1", "map"}, true), labels_(labels) {}

  absl::StatusOr<torch::Tensor> Loss(const torch::Tensor& outputs,
                                     const torch::Tensor& targets) const override {
    torch::Tensor loss;
    HPTRAIN_RETURN_IF_ERROR(Guarded("multilabel loss", [&] {
      // Σ_i mean_j BCE(i, j): the sum over every element divided by the labels per sample.
      loss = F::binary_cross_entropy_with_logits(
                 outputs.to(torch::kFloat), targets.to(torch::kFloat),
                 F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kSum)) /
             static_cast<double>(std::max<int64_t>(1, outputs.size(1)));
    }));
    return loss;
  }

  int num_sums() const override { return 3; }  // true positives, false positives, false negatives
  int row_width() const override { return 2 * labels_; }  // scores, then labels (0 or 1)

  NamedMetrics Metrics(const MetricState& s) const override {
    const double tp = s.sums[0], fp = s.sums[1], fn = s.sums[2];
    const double f1 = Ratio(2 * tp, 2 * tp + fp + fn);
    // Each label's AP over every sample; the mean over the labels that occur.
    const size_t width = static_cast<size_t>(2 * labels_);
    const size_t n = width > 0 ? s.rows.size() / width : 0;
    double ap_sum = 0;
    int ap_count = 0;
    std::vector<float> scores(n);
    std::vector<bool> positive(n);
    for (int j = 0; j < labels_; ++j) {
      for (size_t i = 0; i < n; ++i) {
        scores[i] = s.rows[i * width + static_cast<size_t>(j)];
        positive[i] = s.rows[i * width + static_cast<size_t>(labels_ + j)] > 0.5f;
      }
      const double ap = AveragePrecision(scores, positive);
      if (ap < 0) continue;
      ap_sum += ap;
      ++ap_count;
    }
    return {{"f1", f1}, {"map", Ratio(ap_sum, ap_count)}};
  }

 protected:
  void AccumulateMetrics(const torch::Tensor& outputs, const torch::Tensor& targets,
                         MetricState* s) const override {
    torch::Tensor logits = outputs.to(torch::kFloat);
    torch::Tensor truth = targets.to(torch::kFloat).gt(0.5);
    torch::Tensor predicted = logits.gt(0);  // sigmoid(logit) > 0.5
    s->sums[0] += predicted.logical_and(truth).sum().item<double>();
    s->sums[1] += predicted.logical_and(truth.logical_not()).sum().item<double>();
    s->sums[2] += predicted.logical_not().logical_and(truth).sum().item<double>();
    torch::Tensor rows =
        torch::cat({logits, truth.to(torch::kFloat)}, 1).to(torch::kCPU).contiguous();
    const float* data = rows.data_ptr<float>();
    s->rows.insert(s->rows.end(), data, data + rows.numel());
  }

 private:
  int labels_;
};

class RegressionTask final : public Task {
 public:
  RegressionTask() : Task("regression", {"rmse", "mae"}, false) {}

  absl::StatusOr<torch::Tensor> Loss(const torch::Tensor& outputs,
                                     const torch::Tensor& targets) const override {
    torch::Tensor loss;
    HPTRAIN_RETURN_IF_ERROR(Guarded("regression loss", [&] {
      CheckShapes(outputs, targets);
      loss = F::mse_loss(outputs.to(torch::kFloat), targets.to(torch::kFloat),
                         F::MSELossFuncOptions().reduction(torch::kSum)) /
             static_cast<double>(std::max<int64_t>(1, outputs.size(1)));
    }));
    return loss;
  }

  // Σ squared error and Σ absolute error over every target value; target values scored.
  int num_sums() const override { return 3; }

  NamedMetrics Metrics(const MetricState& s) const override {
    return {{"rmse", std::sqrt(Ratio(s.sums[0], s.sums[2]))}, {"mae", Ratio(s.sums[1], s.sums[2])}};
  }

 protected:
  void AccumulateMetrics(const torch::Tensor& outputs, const torch::Tensor& targets,
                         MetricState* s) const override {
    CheckShapes(outputs, targets);
    torch::Tensor error = outputs.to(torch::kDouble) - targets.to(torch::kDouble);
    s->sums[0] += error.square().sum().item<double>();
    s->sums[1] += error.abs().sum().item<double>();
    s->sums[2] += static_cast<double>(error.numel());
  }

 private:
  // mse_loss would broadcast [n, 1] against [n] into [n, n]: refuse shapes that differ.
  static void CheckShapes(const torch::Tensor& outputs, const torch::Tensor& targets) {
    TORCH_CHECK(outputs.sizes() == targets.sizes(), "outputs of shape ", outputs.sizes(),
                " for targets of shape ", targets.sizes());
  }
};

class TorchScriptTask final : public Task {
 public:
  TorchScriptTask(Model* model, bool has_metric)
      : Task("torchscript", {has_metric ? "metric" : "loss"}, has_metric),
        model_(model),
        has_metric_(has_metric) {}

  absl::StatusOr<torch::Tensor> Loss(const torch::Tensor& outputs,
                                     const torch::Tensor& targets) const override {
    if (outputs.dim() == 0) return absl::InvalidArgumentError("torchscript loss: scalar outputs");
    const int64_t n = outputs.size(0);
    // An empty slice: no call (a mean over nothing is NaN), but a graph that reaches every
    // parameter, so that backward still feeds the exchange (zero gradients).
    if (n == 0) return outputs.to(torch::kFloat).sum() * 0.0;
    HPTRAIN_ASSIGN_OR_RETURN(torch::Tensor mean,
                             model_->CallMethod("loss", {outputs.to(torch::kFloat), targets}));
    torch::Tensor loss;
    HPTRAIN_RETURN_IF_ERROR(Guarded(absl::StrCat(model_->name(), ": loss"), [&] {
      TORCH_CHECK(mean.numel() == 1, "loss returned ", mean.numel(),
                  " values, expected a scalar (the batch's mean)");
      loss = mean.reshape({}).to(torch::kFloat) * static_cast<double>(n);
    }));
    return loss;
  }

  int num_sums() const override { return 1; }  // Σ batch metric × batch size

  NamedMetrics Metrics(const MetricState& s) const override {
    if (has_metric_) return {{"metric", Ratio(s.sums[0], s.count)}};
    return {{"loss", Ratio(s.loss_sum, s.count)}};
  }

 protected:
  void AccumulateMetrics(const torch::Tensor& outputs, const torch::Tensor& targets,
                         MetricState* s) const override {
    const int64_t n = outputs.size(0);
    if (!has_metric_ || n == 0) return;
    absl::StatusOr<torch::Tensor> value =
        model_->CallMethod("metric", {outputs.to(torch::kFloat), targets});
    if (!value.ok()) throw std::runtime_error(std::string(value.status().message()));
    TORCH_CHECK(value->numel() == 1, model_->name(), ": metric returned ", value->numel(),
                " values, expected a scalar (the batch's mean)");
    s->sums[0] += value->item<double>() * static_cast<double>(n);
  }

 private:
  Model* model_;
  bool has_metric_;
};

const char* KindName(TargetKind kind) {
  return kind == TargetKind::kClass ? "integer class labels" : "float target vectors";
}

absl::Status NeedsKind(const std::string& task, const TargetInfo& targets, TargetKind kind) {
  if (targets.kind == kind) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("spec.task: ", task, " needs ", KindName(kind),
                                                 ", but the training set has ",
                                                 KindName(targets.kind)));
}

}  // namespace

MetricState Task::EmptyState() const {
  MetricState state;
  state.sums.assign(static_cast<size_t>(num_sums()), 0.0);
  return state;
}

absl::Status Task::Accumulate(const torch::Tensor& outputs, const torch::Tensor& targets,
                              MetricState* state) const {
  torch::NoGradGuard no_grad;
  HPTRAIN_ASSIGN_OR_RETURN(torch::Tensor loss, Loss(outputs, targets));
  return Guarded(absl::StrCat(name(), " metrics"), [&] {
    state->loss_sum += loss.item<double>();
    state->count += static_cast<double>(outputs.size(0));
    AccumulateMetrics(outputs, targets, state);
  });
}

double AveragePrecision(const std::vector<float>& scores, const std::vector<bool>& positive) {
  const size_t n = scores.size();
  const double positives = static_cast<double>(std::count(positive.begin(), positive.end(), true));
  if (positives == 0) return -1;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  double tp = 0, fp = 0, recall_before = 0, ap = 0;
  for (size_t i = 0; i < n;) {
    // Samples with equal scores are predicted together: one threshold.
    size_t j = i;
    for (; j < n && scores[order[j]] == scores[order[i]]; ++j) {
      if (positive[order[j]]) {
        ++tp;
      } else {
        ++fp;
      }
    }
    const double recall = tp / positives;
    ap += (recall - recall_before) * (tp / (tp + fp));
    recall_before = recall;
    i = j;
  }
  return ap;
}

absl::StatusOr<std::unique_ptr<Task>> CreateTask(const std::string& task, const TargetInfo& targets,
                                                 Model* model) {
  if (task == "classification") {
    HPTRAIN_RETURN_IF_ERROR(NeedsKind(task, targets, TargetKind::kClass));
    return std::unique_ptr<Task>(new ClassificationTask(targets.num_classes));
  }
  if (task == "multilabel") {
    HPTRAIN_RETURN_IF_ERROR(NeedsKind(task, targets, TargetKind::kVector));
    return std::unique_ptr<Task>(new MultilabelTask(targets.dim));
  }
  if (task == "regression") {
    HPTRAIN_RETURN_IF_ERROR(NeedsKind(task, targets, TargetKind::kVector));
    return std::unique_ptr<Task>(new RegressionTask());
  }
  if (task == "torchscript") {
    if (model == nullptr || !model->HasMethod("loss")) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.task: torchscript: ", model == nullptr ? "the model" : model->name(),
                       " has no loss(outputs, targets) method"));
    }
    return std::unique_ptr<Task>(new TorchScriptTask(model, model->HasMethod("metric")));
  }
  return absl::InvalidArgumentError(absl::StrCat("spec.task: unknown task \"", task, "\""));
}

}  // namespace hptrain::train
