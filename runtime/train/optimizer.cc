#include "runtime/train/optimizer.h"

#include "kernels/update/update.h"

namespace hptrain::train {

Optimizer::Optimizer(const job::OptimizerSpec& spec, size_t num_parameters)
    : spec_(spec), n_(num_parameters) {
  if (spec_.type == "adam") {
    m_.assign(n_, 0.0f);
    v_.assign(n_, 0.0f);
  } else if (spec_.momentum != 0.0) {
    momentum_.assign(n_, 0.0f);
  }
}

void Optimizer::Step(float* params, const float* grads, double lr) {
  BeginStep();
  StepRange(params, grads, 0, n_, lr);
}

void Optimizer::StepRange(float* params, const float* grads, size_t begin, size_t end,
                          double lr) {
  const size_t n = end - begin;
  params += begin;
  grads += begin;
  if (spec_.type == "adam") {
    kernels::AdamParams p;
    p.lr = static_cast<float>(lr);
    p.beta1 = static_cast<float>(spec_.beta1);
    p.beta2 = static_cast<float>(spec_.beta2);
    p.eps = static_cast<float>(spec_.eps);
    p.weight_decay = static_cast<float>(spec_.weight_decay);
    p.step = steps_;
    kernels::AdamStep(params, grads, m_.data() + begin, v_.data() + begin, n, p);
    return;
  }
  kernels::SgdParams p;
  p.lr = static_cast<float>(lr);
  p.momentum = static_cast<float>(spec_.momentum);
  p.weight_decay = static_cast<float>(spec_.weight_decay);
  p.nesterov = spec_.nesterov;
  p.first_step = steps_ == 1;
  kernels::SgdStep(params, grads, momentum_.empty() ? nullptr : momentum_.data() + begin, n, p);
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

}  // namespace hptrain::train
