#include "runtime/job/optimizer_options.h"

namespace hptrain::job {

optim::OptimizerOptions OptimizerOptionsFor(const OptimizerSpec& spec) {
  optim::OptimizerOptions o;
  o.type = spec.type == "adam" ? optim::OptimizerType::kAdam : optim::OptimizerType::kSgd;
  o.weight_decay = spec.weight_decay;
  o.momentum = spec.momentum;
  o.nesterov = spec.nesterov;
  o.beta1 = spec.beta1;
  o.beta2 = spec.beta2;
  o.eps = spec.eps;
  return o;
}

optim::LrScheduleOptions LrScheduleFor(const OptimizerSpec& spec, int epochs) {
  optim::LrScheduleOptions s;
  const ScheduleSpec& schedule = spec.schedule;
  if (schedule.type == "step") {
    s.type = optim::LrScheduleType::kStep;
  } else if (schedule.type == "cosine") {
    s.type = optim::LrScheduleType::kCosine;
  }
  s.lr = spec.lr;
  s.epochs = epochs;
  s.step_size = schedule.step_size;
  s.gamma = schedule.gamma;
  s.min_lr = schedule.min_lr;
  s.warmup_epochs = schedule.warmup_epochs;
  return s;
}

}  // namespace hptrain::job
