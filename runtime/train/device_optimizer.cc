#include "runtime/train/device_optimizer.h"

#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"

namespace hptrain::train {
namespace {

// Each state tensor (momentum, or Adam's m and v) with the vector of `host` of the same name
// (Optimizer::state()); Internal when one is missing or of another size (a bug: both optimizers
// are built for the same model).
using StatePairs = std::vector<std::pair<torch::Tensor, std::vector<float>*>>;
absl::StatusOr<StatePairs> PairState(const torch::Tensor& momentum, const torch::Tensor& m,
                                     const torch::Tensor& v, Optimizer& host) {
  const std::map<std::string, std::vector<float>*> vectors = host.state();
  StatePairs pairs;
  for (const auto& [name, tensor] :
       {std::pair<const char*, const torch::Tensor*>{"momentum", &momentum},
        {"adam.m", &m},
        {"adam.v", &v}}) {
    if (!tensor->defined()) continue;
    auto it = vectors.find(name);
    if (it == vectors.end() || static_cast<int64_t>(it->second->size()) != tensor->numel()) {
      return absl::InternalError(absl::StrCat("optimizer state ", name, " does not match"));
    }
    pairs.emplace_back(*tensor, it->second);
  }
  return pairs;
}

// A host vector as a flat CPU tensor over its memory.
torch::Tensor Over(std::vector<float>& values) {
  return torch::from_blob(values.data(), {static_cast<int64_t>(values.size())}, torch::kFloat32);
}

}  // namespace

DeviceOptimizer::DeviceOptimizer(const job::OptimizerSpec& spec, int64_t num_parameters,
                                 const torch::Device& device)
    : spec_(spec) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  if (spec_.type == "adam") {
    m_ = torch::zeros({num_parameters}, options);
    v_ = torch::zeros({num_parameters}, options);
  } else if (spec_.momentum != 0.0) {
    momentum_ = torch::zeros({num_parameters}, options);
  }
}

void DeviceOptimizer::Step(torch::Tensor& params, const torch::Tensor& grads, double lr) {
  torch::NoGradGuard no_grad;
  ++steps_;
  const double wd = spec_.weight_decay;
  // d = g + wd·p, as the element kernels (kernels/update/update_common.h).
  torch::Tensor d = wd != 0.0 ? grads.add(params, wd) : grads;
  if (spec_.type == "adam") {
    const double b1 = spec_.beta1, b2 = spec_.beta2;
    const double correction1 = 1.0 - std::pow(b1, static_cast<double>(steps_));
    const double correction2_sqrt = std::sqrt(1.0 - std::pow(b2, static_cast<double>(steps_)));
    m_.mul_(b1).add_(d, 1.0 - b1);
    v_.mul_(b2).addcmul_(d, d, 1.0 - b2);
    torch::Tensor denom = v_.sqrt().div_(correction2_sqrt).add_(spec_.eps);
    params.addcdiv_(m_, denom, -lr / correction1);
    return;
  }
  if (momentum_.defined()) {
    const double mu = spec_.momentum;
    if (steps_ == 1) {
      momentum_.copy_(d);
    } else {
      momentum_.mul_(mu).add_(d);
    }
    d = spec_.nesterov ? d.add(momentum_, mu) : momentum_;
  }
  params.add_(d, -lr);
}

absl::Status DeviceOptimizer::CopyStateTo(Optimizer& host) const {
  HPTRAIN_ASSIGN_OR_RETURN(StatePairs pairs, PairState(momentum_, m_, v_, host));
  for (auto& [tensor, values] : pairs) Over(*values).copy_(tensor);
  host.set_steps(steps_);
  return absl::OkStatus();
}

absl::Status DeviceOptimizer::CopyStateFrom(Optimizer& host) {
  HPTRAIN_ASSIGN_OR_RETURN(StatePairs pairs, PairState(momentum_, m_, v_, host));
  torch::NoGradGuard no_grad;
  for (auto& [tensor, values] : pairs) tensor.copy_(Over(*values));
  steps_ = host.steps();
  return absl::OkStatus();
}

}  // namespace hptrain::train
