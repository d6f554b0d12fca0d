// ModelEvaluator: the test accuracy of a job's model for given flat parameters, the measure of
// MP²'s prediction-result-based selection and of `hptrain mp2 eval` (docs/algorithms.md §1b).
//
// It opens the job's test split and builds its model once (as the trainer does, from spec.model,
// spec.dataset and spec.seed), then, for each call, copies the flat parameters into the model
// (model->parameters() order, concatenated: the trainer's flat order and that of the snapshot
// windows, dataset.h) and classifies a fixed subset of the test images.
//
// Normalisation buffers are not part of the snapshots. A model with floating-point buffers
// (BatchNorm running statistics) is therefore evaluated with batch statistics: training-mode
// forwards without gradients over batches of `batch_size` test images, so the accuracy reflects the
// parameters alone and not running statistics from another model. Dropout in such a model would
// make this random; no zoo model has both. Models without buffers are evaluated in evaluation
// mode. The subset, the batches and so the result are the same on every call for the same
// parameters.
//
// Not thread-safe. Nothing here throws; libtorch errors come back as Internal.
#ifndef HPTRAIN_RUNTIME_TRAIN_MP2_MODEL_EVALUATOR_H_
#define HPTRAIN_RUNTIME_TRAIN_MP2_MODEL_EVALUATOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/job/job_spec.h"

namespace hptrain::train {
class Dataset;
class Model;
}  // namespace hptrain::train

namespace hptrain::train::mp2 {

// Sets libtorch's intra-op thread count for the whole process (training and evaluation);
// threads ≤ 0 keeps libtorch's default (all cores).
void SetTorchThreads(int threads);

class ModelEvaluator {
 public:
  // Opens spec.dataset's test split and builds spec.model for it (CreateModel with spec.seed).
  // The data set's and the model's errors (NotFound, DataLoss, InvalidArgument) pass through.
  // `batch_size` ≥ 1: images per forward.
  static absl::StatusOr<std::unique_ptr<ModelEvaluator>> Create(const job::JobSpec& spec,
                                                                int64_t batch_size = 500);
  ~ModelEvaluator();

  // Σ tensor sizes, and the sizes in parameters() order.
  int64_t num_parameters() const { return num_parameters_; }
  const std::vector<int64_t>& tensor_sizes() const { return tensor_sizes_; }
  int64_t test_size() const;

  // The fraction of correctly classified images among min(max_samples, test_size()) test images,
  // spread evenly over the test split (max_samples ≤ 0: all of them). InvalidArgument when
  // flat_params does not hold num_parameters() values; Internal on a libtorch failure.
  absl::StatusOr<double> Accuracy(const std::vector<float>& flat_params, int64_t max_samples);

 private:
  ModelEvaluator() = default;

  std::unique_ptr<Dataset> test_;
  std::unique_ptr<Model> model_;
  int64_t batch_size_ = 500;
  int64_t num_parameters_ = 0;
  std::vector<int64_t> tensor_sizes_;
  bool batch_statistics_ = false;
};

}  // namespace hptrain::train::mp2

#endif  // HPTRAIN_RUNTIME_TRAIN_MP2_MODEL_EVALUATOR_H_
