// ExternalModel: a model whose forward pass its owner runs (the Python API: the user's
// torch.nn.Module). The trainer's machinery sees only its parameters and floating-point buffers,
// which are the owner's own tensors (handles, not copies): flattening the parameters
// (flat_model.h) makes the owner's parameters views into the flat buffer, and averaging or
// restoring the buffers writes the owner's buffers.
#ifndef HPTRAIN_RUNTIME_TRAIN_MODELS_EXTERNAL_MODEL_H_
#define HPTRAIN_RUNTIME_TRAIN_MODELS_EXTERNAL_MODEL_H_

#include <string>
#include <vector>

#include "runtime/train/models/model.h"

namespace hptrain::train {

class ExternalModel : public Model {
 public:
  // Names beside tensors, same lengths (the owner's named_parameters / named_buffers).
  ExternalModel(std::vector<torch::Tensor> parameters, std::vector<std::string> parameter_names,
                std::vector<torch::Tensor> buffers, std::vector<std::string> buffer_names);

  // Unimplemented: the owner runs the forward pass.
  absl::StatusOr<torch::Tensor> Forward(const torch::Tensor& input) override;
  std::vector<torch::Tensor> parameters() const override { return parameters_; }
  std::vector<std::string> parameter_names() const override { return parameter_names_; }
  std::vector<torch::Tensor> buffers() const override { return buffers_; }
  std::vector<std::string> buffer_names() const override { return buffer_names_; }
  // The owner switches its module between training and evaluation; this only records it.
  void train(bool on) override { training_ = on; }
  bool is_training() const override { return training_; }
  // The owner places its module: FailedPrecondition when asked to move it.
  absl::Status to(const torch::Device& device) override;

 private:
  std::vector<torch::Tensor> parameters_;
  std::vector<std::string> parameter_names_;
  std::vector<torch::Tensor> buffers_;
  std::vector<std::string> buffer_names_;
  bool training_ = true;
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_MODELS_EXTERNAL_MODEL_H_
