#include "runtime/optim/optimizer.h"

#include "kernels/update/update.h"
#include "runtime/optim/update_params.h"

namespace hptrain::optim {

Optimizer::Optimizer(const OptimizerOptions& options, size_t num_parameters)
    : options_(options), n_(num_parameters) {
  if (options_.type == OptimizerType::kAdam) {
    m_.assign(n_, 0.0f);
    v_.assign(n_, 0.0f);
  } else if (options_.momentum != 0.0) {
    momentum_.assign(n_, 0.0f);
  }
}

void Optimizer::Step(float* params, const float* grads, double lr) {
  BeginStep();
  StepRange(params, grads, 0, n_, lr);
}

void Optimizer::StepRange(float* params, const float* grads, size_t begin, size_t end, double lr,
                          double weight_decay_scale) {
  const size_t n = end - begin;
  params += begin;
  grads += begin;
  if (options_.type == OptimizerType::kAdam) {
    kernels::AdamStep(params, grads, m_.data() + begin, v_.data() + begin, n,
                      internal::AdamParamsFor(options_, lr, weight_decay_scale, steps_));
    return;
  }
  kernels::SgdStep(params, grads, momentum_.empty() ? nullptr : momentum_.data() + begin, n,
                   internal::SgdParamsFor(options_, lr, weight_decay_scale, steps_ == 1));
}

std::map<std::string, std::vector<float>*> Optimizer::state() {
  std::map<std::string, std::vector<float>*> s;
  if (!momentum_.empty()) s["momentum"] = &momentum_;
  if (!m_.empty()) {
    s["adam.m"] = &m_;
    s["adam.v"] = &v_;
  }
  return s;
}

std::vector<float>* Optimizer::StateVector(const std::string& name) {
  if (name == "momentum") return momentum_.empty() ? nullptr : &momentum_;
  if (name == "adam.m") return m_.empty() ? nullptr : &m_;
  if (name == "adam.v") return v_.empty() ? nullptr : &v_;
  return nullptr;
}

}  // namespace hptrain::optim
