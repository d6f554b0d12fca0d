#include "runtime/train/device_optimizer.h"

#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hptrain::train {
namespace {

// The named device tensors of the state, as Optimizer::state() names its vectors.
std::map<std::string, torch::Tensor> Named(const torch::Tensor& momentum, const torch::Tensor& m,
                                           const torch::Tensor& v) {
  std::map<std::string, torch::Tensor> named;
  if (momentum.defined()) named["momentum"] = momentum;
  if (m.defined()) {
    named["adam.m"] = m;
    named["adam.v"] = v;
  }
  return named;
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
  std::map<std::string, std::vector<float>*> vectors = host.state();
  for (const auto& [name, tensor] : Named(momentum_, m_, v_)) {
    auto it = vectors.find(name);
    if (it == vectors.end() || static_cast<int64_t>(it->second->size()) != tensor.numel()) {
      return absl::InternalError(absl::StrCat("optimizer state ", name, " does not match"));
    }
    torch::Tensor cpu = tensor.to(torch::kCPU).contiguous();
    std::copy(cpu.data_ptr<float>(), cpu.data_ptr<float>() + cpu.numel(), it->second->begin());
  }
  host.set_steps(steps_);
  return absl::OkStatus();
}

absl::Status DeviceOptimizer::CopyStateFrom(Optimizer& host) {
  std::map<std::string, std::vector<float>*> vectors = host.state();
  torch::NoGradGuard no_grad;
  for (auto& [name, tensor] : Named(momentum_, m_, v_)) {
    auto it = vectors.find(name);
    if (it == vectors.end() || static_cast<int64_t>(it->second->size()) != tensor.numel()) {
      return absl::InternalError(absl::StrCat("optimizer state ", name, " does not match"));
    }
    tensor.copy_(torch::from_blob(it->second->data(), {tensor.numel()}, torch::kFloat32));
  }
  steps_ = host.steps();
  return absl::OkStatus();
}

}  // namespace hptrain::train
