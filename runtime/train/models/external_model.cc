#include "runtime/train/models/external_model.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace hptrain::train {

ExternalModel::ExternalModel(std::vector<torch::Tensor> parameters,
                             std::vector<std::string> parameter_names,
                             std::vector<torch::Tensor> buffers,
                             std::vector<std::string> buffer_names)
    : Model("external"),
      parameters_(std::move(parameters)),
      parameter_names_(std::move(parameter_names)),
      buffers_(std::move(buffers)),
      buffer_names_(std::move(buffer_names)) {}

absl::StatusOr<torch::Tensor> ExternalModel::Forward(const torch::Tensor& input) {
  (void)input;
  return absl::UnimplementedError("the model's owner runs its forward pass");
}

absl::Status ExternalModel::to(const torch::Device& device) {
  return absl::FailedPreconditionError(
      absl::StrCat("the model's owner places it; cannot move it to ", device.str()));
}

}  // namespace hptrain::train
