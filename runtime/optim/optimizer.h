// Optimizer: SGD (momentum, weight decay, Nesterov) and Adam over a model's flat parameter and
// gradient buffers in host memory, with the semantics of torch.optim (optimizer_options.h). The
// math is kernels/update's; the state is named float vectors that checkpoints save and restore:
//   "momentum"           SGD with momentum != 0 (torch's momentum_buffer)
//   "adam.m", "adam.v"   Adam's first and second moments (torch's exp_avg, exp_avg_sq)
// each of num_parameters floats, zero at construction. SGD without momentum has no state.
//
// The device route (device_optimizer.h) steps the same state layout in GPU memory with the
// kernels' CUDA twins. Not thread-safe.
#ifndef HPTRAIN_RUNTIME_OPTIM_OPTIMIZER_H_
#define HPTRAIN_RUNTIME_OPTIM_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/optim/optimizer_options.h"

namespace hptrain::optim {

class Optimizer {
 public:
  Optimizer(const OptimizerOptions& options, size_t num_parameters);

  // params -= update(grads) at learning rate `lr`. Both buffers hold num_parameters floats.
  void Step(float* params, const float* grads, double lr);

  // The same step in parts (a scheduler updates one layer at a time): BeginStep once, then
  // StepRange on disjoint ranges [begin, end) that together cover every element. The update is
  // element-wise, so the parts give Step's result bit for bit. `weight_decay_scale` multiplies
  // the weight decay of this step (a step that stands for several local steps decays as much
  // as they would have: multistep's global step); 1 elsewhere.
  void BeginStep() { ++steps_; }
  void StepRange(float* params, const float* grads, size_t begin, size_t end, double lr,
                 double weight_decay_scale = 1.0);

  // Steps begun. The first step starts SGD's momentum buffer (torch: buf = d, later
  // buf = momentum·buf + d) and Adam's bias corrections count from it. set_steps restores the
  // count of a checkpoint; set_steps(k > 0) on a buffer given its values from elsewhere makes
  // the next step continue it.
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }

  const OptimizerOptions& options() const { return options_; }
  size_t size() const { return n_; }

  // The named state vectors (see the top of this file), owned by the optimizer, for checkpoints
  // and for strategies that copy state between optimizers. StateVector: one of them, or null
  // when this optimizer has no state of that name.
  std::map<std::string, std::vector<float>*> state();
  std::vector<float>* StateVector(const std::string& name);

 private:
  OptimizerOptions options_;
  size_t n_;
  int64_t steps_ = 0;
  std::vector<float> momentum_;
  std::vector<float> m_;
  std::vector<float> v_;
};

}  // namespace hptrain::optim

#endif  // HPTRAIN_RUNTIME_OPTIM_OPTIMIZER_H_
