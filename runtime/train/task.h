// Task: what a model's outputs mean (spec.task): the training loss and the metrics an evaluation
// reports, by name.
//
//   classification  targets: kClass, int64 [n] (sample_source.h)
//                   loss: cross-entropy
//                   metrics: accuracy (top-1), top5_accuracy (top-k, k = min(5, classes))
//   multilabel      targets: kVector, float32 multi-hot [n, labels]
//                   loss: BCE-with-logits, mean over the labels
//                   metrics: f1 (micro; a label is predicted when its sigmoid exceeds 0.5), map
//   regression      targets: kVector, float32 [n, dim]
//                   loss: MSE, mean over dim
//                   metrics: rmse, mae (over every target value)
//   torchscript     targets: either
//                   loss: the module's loss(outputs, targets)
//                   metrics: metric (the module's metric(outputs, targets), when it has one),
//                   else loss (the test loss)
// The first metric is the task's primary one.
// Higher is better for every primary metric but rmse (and a torchscript module's "loss").
//
// Loss() returns the SUM over the batch of the per-sample losses: the trainer back-propagates the
// sum and the exchange divides the gradients by the global batch (docs/design.md "Training
// semantics"), so a step is the mean over the global batch whatever the workers' slices.
// A TorchScript module's loss(outputs, targets) returns the MEAN over the batch, as PyTorch's
// losses do by default (reduction="mean"); Loss() multiplies it by the batch size. Its optional
// metric(outputs, targets) returns the batch's mean too; the evaluation weighs each batch by its
// size. Both get the outputs as float32 and the targets as the data set gives them.
//
// Metrics accumulate in a MetricState: sums over the samples, which the evaluator all-reduces over
// the workers (each scores a shard of the test set), and, for mAP, one row of floats per sample
// (its scores and labels), which the evaluator all-gathers: average precision ranks every sample
// of the test set, so it has no exact form as a sum. mAP is computed exactly as scikit-learn's
// average_precision_score averaged over the labels that have a positive sample (macro average):
// AP = Σ_k (R_k − R_{k−1}) P_k over the distinct scores, highest first.
//
// Errors: Create returns InvalidArgument "spec.task: ..." for a task that does not fit the data
// set's targets or a TorchScript module without loss(). Loss and Accumulate catch libtorch's
// exceptions and return InvalidArgument with its message (e.g. outputs of the wrong shape).
//
// Thread-safety: a Task is immutable after Create, but a torchscript task calls into its Model,
// which is not thread-safe: use it from the thread that trains.
#ifndef HPTRAIN_RUNTIME_TRAIN_TASK_H_
#define HPTRAIN_RUNTIME_TRAIN_TASK_H_

#include <torch/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/train/data/sample_source.h"
#include "runtime/train/models/model.h"

namespace hptrain::train {

// Metric values by name, in the task's order (primary first).
using NamedMetrics = std::vector<std::pair<std::string, double>>;

// What an evaluation accumulates over the samples it scores.
struct MetricState {
  double count = 0;          // samples scored
  double loss_sum = 0;       // Σ per-sample loss
  std::vector<double> sums;  // Task::num_sums() task-specific sums
  std::vector<float> rows;   // Task::row_width() floats per sample scored (count rows)
};

class Task {
 public:
  virtual ~Task() = default;
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;

  // spec.task: "classification", ...
  const std::string& name() const { return name_; }
  // The names Metrics() returns values for, primary first.
  const std::vector<std::string>& metric_names() const { return metric_names_; }
  const std::string& primary_metric() const { return metric_names_.front(); }
  // Whether a higher value of the primary metric is a better model.
  bool higher_is_better() const { return higher_is_better_; }

  // Σ over the batch of the per-sample losses of `outputs` [n, outputs] against `targets` (as the
  // data set gives them), a float32 scalar that records autograd history when grad mode is on.
  virtual absl::StatusOr<torch::Tensor> Loss(const torch::Tensor& outputs,
                                             const torch::Tensor& targets) const = 0;

  // Sizes of MetricState::sums and of one sample's row in MetricState::rows.
  virtual int num_sums() const = 0;
  virtual int row_width() const { return 0; }
  // A state with nothing accumulated, sized for this task.
  MetricState EmptyState() const;
  // Adds one batch's loss and metric contributions to *state (no autograd history recorded).
  absl::Status Accumulate(const torch::Tensor& outputs, const torch::Tensor& targets,
                          MetricState* state) const;
  // The metrics of an accumulated state (all ranks' sums added, rows concatenated), in
  // metric_names() order. Zeros for an empty state.
  virtual NamedMetrics Metrics(const MetricState& state) const = 0;

 protected:
  Task(std::string name, std::vector<std::string> metric_names, bool higher_is_better)
      : name_(std::move(name)),
        metric_names_(std::move(metric_names)),
        higher_is_better_(higher_is_better) {}

  // The task's own part of Accumulate: sums and rows (count and loss are added by Accumulate).
  // May throw (libtorch).
  virtual void AccumulateMetrics(const torch::Tensor& outputs, const torch::Tensor& targets,
                                 MetricState* state) const = 0;

 private:
  std::string name_;
  std::vector<std::string> metric_names_;
  bool higher_is_better_;
};

// The task spec.task names for a training set with `targets`. `model` is used only by the
// torchscript task (its loss and metric methods) and must outlive the task. InvalidArgument
// "spec.task: ..." when the targets do not fit the task (classification needs class labels,
// multilabel and regression float vectors) or the module lacks loss(); for an unknown name too.
absl::StatusOr<std::unique_ptr<Task>> CreateTask(const std::string& task, const TargetInfo& targets,
                                                 Model* model);

// The average precision of one label's scores (scikit-learn's average_precision_score):
// Σ_k (R_k − R_{k−1}) P_k over the distinct scores from the highest, P_k and R_k the precision
// and recall of predicting positive every score ≥ the k-th. `positive[i]` says whether sample i
// has the label. Returns -1 when no sample has it (AP undefined).
double AveragePrecision(const std::vector<float>& scores, const std::vector<bool>& positive);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_TASK_H_
