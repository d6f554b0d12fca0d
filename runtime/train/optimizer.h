// Optimizer: SGD (momentum, weight decay, Nesterov) and Adam over the model's flat parameter and
// gradient buffers, with the semantics of torch.optim. No libtorch: the math is in
// kernels/update, the state is plain float vectors that checkpoints save and restore.
#ifndef HPTRAIN_RUNTIME_TRAIN_OPTIMIZER_H_
#define HPTRAIN_RUNTIME_TRAIN_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/job/job_spec.h"

namespace hptrain::train {

class Optimizer {
 public:
  Optimizer(const job::OptimizerSpec& spec, size_t num_parameters);

  // params -= update(grads) at learning rate `lr`. Both buffers hold num_parameters floats.
  void Step(float* params, const float* grads, double lr);

  // The same step in parts (the priority scheduler updates one layer at a time): BeginStep
  // once, then StepRange on disjoint ranges [begin, end) that together cover every element.
  // The update is element-wise, so the parts give Step's result bit for bit.
  void BeginStep() { ++steps_; }
  void StepRange(float* params, const float* grads, size_t begin, size_t end, double lr);

  int64_t steps() const { return steps_; }
  // Named state vectors ("momentum", or "adam.m" and "adam.v"), for checkpoints.
  std::map<std::string, std::vector<float>*> state();
  // Restores the step count (state vectors are filled through state()).
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  job::OptimizerSpec spec_;
  size_t n_;
  int64_t steps_ = 0;
  std::vector<float> momentum_;
  std::vector<float> m_;
  std::vector<float> v_;
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_OPTIMIZER_H_
