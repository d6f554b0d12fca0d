// Evaluator: the model's accuracy and loss on the test split.
//
// Evaluate shards the test set over the workers (rank r takes [n·r/N, n·(r+1)/N)) and all-reduces
// the sums, so every rank reports the same numbers for the model they share. For strategies whose
// workers train models of their own (gossip), EvaluateOwnModel scores this worker's model on the
// whole test set with no collective, and GatherAccuracies collects every worker's figure.
// Loss is the summed cross-entropy over the samples, divided by their number.
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

namespace hptrain::train {

class Evaluator {
 public:
  // Moves a batch tensor to the model's device (identity on the host).
  using ToDevice = std::function<torch::Tensor(const torch::Tensor&)>;

  // None of the pointers is owned; all must outlive the evaluator.
  Evaluator(const Dataset* test, Model* model, comm::Communicator* comm, int rank,
            ToDevice to_device);

  // Every rank: this rank's shard scored, the sums all-reduced. On success *accuracy and *loss
  // hold the whole test set's figures (0 for an empty test set). Internal on a libtorch error,
  // the communicator's error otherwise.
  absl::Status Evaluate(double* accuracy, double* loss);

  // This worker's own model on the whole test set, no collective: its accuracy in *accuracy.
  absl::Status EvaluateOwnModel(double* accuracy);

  // Every rank: each rank's `own` figure, by rank, into *all (comm.size() entries).
  absl::Status GatherAccuracies(double own, std::vector<double>* all);

 private:
  // Sums over test samples [begin, end): correct predictions and loss.
  absl::Status EvaluateRange(int64_t begin, int64_t end, double* correct, double* loss_sum);

  const Dataset* test_;
  Model* model_;
  comm::Communicator* comm_;
  int rank_;
  ToDevice to_device_;
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_EVALUATOR_H_
