#include "runtime/optim/update_params.h"

namespace hptrain::optim::internal {

// weight_decay_scale·λ is computed in double and rounded once, as the strategies that scale
// the decay (multistep's global step over H local steps) always did.
kernels::SgdParams SgdParamsFor(const OptimizerOptions& options, double lr,
                                double weight_decay_scale, bool first_step) {
  kernels::SgdParams p;
  p.lr = static_cast<float>(lr);
  p.momentum = static_cast<float>(options.momentum);
  p.weight_decay = static_cast<float>(weight_decay_scale * options.weight_decay);
  p.nesterov = options.nesterov;
  p.first_step = first_step;
  return p;
}

kernels::AdamParams AdamParamsFor(const OptimizerOptions& options, double lr,
                                  double weight_decay_scale, int64_t step) {
  kernels::AdamParams p;
  p.lr = static_cast<float>(lr);
  p.beta1 = static_cast<float>(options.beta1);
  p.beta2 = static_cast<float>(options.beta2);
  p.eps = static_cast<float>(options.eps);
  p.weight_decay = static_cast<float>(weight_decay_scale * options.weight_decay);
  p.step = step;
  return p;
}

}  // namespace hptrain::optim::internal
