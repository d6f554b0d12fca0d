#include "runtime/train/mp2/model_evaluator.h"

#include <torch/torch.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/train/data/dataset.h"
#include "runtime/train/models/model.h"

namespace hptrain::train::mp2 {

void SetTorchThreads(int threads) {
  if (threads > 0) torch::set_num_threads(threads);
}

absl::StatusOr<std::unique_ptr<ModelEvaluator>> ModelEvaluator::Create(const job::JobSpec& spec,
                                                                       int64_t batch_size) {
  if (batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("evaluation batch size ", batch_size));
  }
  std::unique_ptr<ModelEvaluator> evaluator(new ModelEvaluator());
  evaluator->batch_size_ = batch_size;
  HPTRAIN_ASSIGN_OR_RETURN(evaluator->test_, OpenDataset(spec.dataset, Split::kTest, spec.seed));
  // The same shape the trainer derives from its data set (trainer.cc's ShapeOf); the test split
  // has the training split's sample shape and classes.
  ModelShape shape;
  shape.channels = evaluator->test_->shape().channels;
  shape.height = evaluator->test_->shape().height;
  shape.width = evaluator->test_->shape().width;
  shape.num_classes = evaluator->test_->num_classes();
  HPTRAIN_ASSIGN_OR_RETURN(evaluator->model_, CreateModel(spec.model, shape, spec.seed));
  for (const torch::Tensor& p : evaluator->model_->parameters()) {
    if (p.scalar_type() != torch::kFloat32) {
      return absl::InvalidArgumentError("only float32 parameters are supported");
    }
    evaluator->tensor_sizes_.push_back(p.numel());
    evaluator->num_parameters_ += p.numel();
  }
  evaluator->batch_statistics_ = !evaluator->model_->buffers().empty();
  return evaluator;
}

ModelEvaluator::~ModelEvaluator() = default;

int64_t ModelEvaluator::test_size() const { return test_->size(); }

absl::StatusOr<double> ModelEvaluator::Accuracy(const std::vector<float>& flat_params,
                                                int64_t max_samples) {
  if (static_cast<int64_t>(flat_params.size()) != num_parameters_) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model has ", num_parameters_, " parameters, got ", flat_params.size()));
  }
  const int64_t total = test_->size();
  const int64_t n = max_samples > 0 ? std::min(max_samples, total) : total;
  if (n == 0) return absl::InvalidArgumentError("the test split is empty");
  int64_t correct = 0;
  try {
    torch::NoGradGuard no_grad;
    int64_t offset = 0;
    for (torch::Tensor p : model_->parameters()) {
      torch::Tensor src = torch::from_blob(const_cast<float*>(flat_params.data()) + offset,
                                           p.sizes(), torch::kFloat32);
      p.copy_(src);
      offset += p.numel();
    }
    model_->train(batch_statistics_);
    // Equal batches: with batch statistics a small last batch would be judged on noisier
    // statistics than the others.
    const int64_t batches = (n + batch_size_ - 1) / batch_size_;
    for (int64_t b = 0; b < batches; ++b) {
      std::vector<int64_t> indices;
      for (int64_t i = b * n / batches; i < (b + 1) * n / batches; ++i) {
        // Evenly spread over the split, in case it is ordered by class.
        indices.push_back(i * total / n);
      }
      auto batch = test_->Gather(indices);
      if (!batch.ok()) return batch.status();
      auto logits = model_->Forward(batch->inputs);
      if (!logits.ok()) return logits.status();
      correct += logits->argmax(1).eq(batch->targets).sum().item<int64_t>();
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("evaluating the model: ", e.what()));
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

}  // namespace hptrain::train::mp2
