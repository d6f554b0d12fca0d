// Evaluator: the model's loss and its task's metrics (task.h) on the test split.
//
// Evaluate shards the test set over the workers (rank r takes [n·r/N, n·(r+1)/N)), all-reduces
// the task's sums and all-gathers its per-sample rows (mAP), so every rank reports the same
// numbers for the model they share. For strategies whose workers train models of their own
// (gossip), EvaluateOwnModel scores this worker's model on the whole test set with no collective,
// and GatherAccuracies collects every worker's primary metric.
// The loss is the summed per-sample loss over the samples, divided by their number.
//
// Thread-safety: one thread (the trainer's). The model is switched to eval mode for the duration
// of each call and back to training mode after it.
#ifndef HPTRAIN_RUNTIME_TRAIN_EVALUATOR_H_
#define HPTRAIN_RUNTIME_TRAIN_EVALUATOR_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/data/dataset.h"
#include "runtime/train/models/model.h"
#include "runtime/train/task.h"

namespace hptrain::train {

// One evaluation's results.
struct EvaluationResult {
  double loss = 0;       // mean per-sample loss (0 for an empty test set)
  NamedMetrics metrics;  // the task's, primary first
  // The task's primary metric (metrics' first value).
  double primary() const { return metrics.empty() ? 0.0 : metrics.front().second; }
  // The value of metric `name`, or 0 when the task has none of that name.
  double value(const std::string& name) const;
};

class Evaluator {
 public:
  // Moves a batch tensor to the model's device (identity on the host).
  using ToDevice = std::function<torch::Tensor(const torch::Tensor&)>;

  // None of the pointers is owned; all must outlive the evaluator.
  Evaluator(const Dataset* test, Model* model, const Task* task, comm::Communicator* comm, int rank,
            ToDevice to_device);

  // Every rank: this rank's shard scored, the task's sums all-reduced and its rows gathered. On
  // success *out holds the whole test set's figures. InvalidArgument when the task's loss or
  // metric rejects the outputs, Internal on another libtorch error, the communicator's error
  // otherwise.
  absl::Status Evaluate(EvaluationResult* out);

  // Classification's figures as before tasks existed: *accuracy the top-1 accuracy (0 for other
  // tasks), *loss the mean loss. As Evaluate otherwise.
  absl::Status Evaluate(double* accuracy, double* loss);

  // This worker's own model on the whole test set, no collective: the task's primary metric in
  // *primary.
  absl::Status EvaluateOwnModel(double* primary);

  // Every rank: each rank's `own` figure, by rank, into *all (comm.size() entries).
  absl::Status GatherAccuracies(double own, std::vector<double>* all);

 private:
  // The task's state over test samples [begin, end).
  absl::Status EvaluateRange(int64_t begin, int64_t end, MetricState* state);

  const Dataset* test_;
  Model* model_;
  const Task* task_;
  comm::Communicator* comm_;
  int rank_;
  ToDevice to_device_;
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_EVALUATOR_H_
