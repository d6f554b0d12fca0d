// The optimizer's settings: SGD (momentum, Nesterov, weight decay) or Adam, with the meaning of
// torch.optim.SGD (dampening 0) and torch.optim.Adam (L2 weight decay, not AdamW). The learning
// rate is not among them: every step is given its own (lr_schedule.h computes it).
#ifndef HPTRAIN_RUNTIME_OPTIM_OPTIMIZER_OPTIONS_H_
#define HPTRAIN_RUNTIME_OPTIM_OPTIMIZER_OPTIONS_H_

namespace hptrain::optim {

enum class OptimizerType { kSgd, kAdam };

struct OptimizerOptions {
  OptimizerType type = OptimizerType::kSgd;
  double weight_decay = 0.0;  // both: d = g + weight_decay·p
  // SGD.
  double momentum = 0.0;  // 0: plain SGD, no momentum buffer
  bool nesterov = false;
  // Adam.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;

  // SGD with these settings (Adam's left at their defaults).
  static OptimizerOptions Sgd(double momentum, bool nesterov, double weight_decay) {
    OptimizerOptions o;
    o.momentum = momentum;
    o.nesterov = nesterov;
    o.weight_decay = weight_decay;
    return o;
  }
  // Adam with the default betas and eps.
  static OptimizerOptions Adam(double weight_decay) {
    OptimizerOptions o;
    o.type = OptimizerType::kAdam;
    o.weight_decay = weight_decay;
    return o;
  }
};

}  // namespace hptrain::optim

#endif  // HPTRAIN_RUNTIME_OPTIM_OPTIMIZER_OPTIONS_H_
