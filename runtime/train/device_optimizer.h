// DeviceOptimizer: the optimizer of a worker that trains on a GPU. The same update as Optimizer
// (torch.optim semantics: SGD with momentum, weight decay and Nesterov; Adam), written as libtorch
// tensor operations on the flat parameter and gradient buffers where they live, so that neither
// the state nor the update leaves the device.
//
// It agrees with Optimizer to rounding (the two evaluate the same formulas, but libtorch's fused
// operations may round differently from kernels/update's element loop), not bit for bit.
//
// Checkpoints and the optimizer-state averaging of hierarchical training work on host vectors:
// CopyStateTo/CopyStateFrom move the state to and from an Optimizer's vectors, by the same names
// ("momentum", "adam.m", "adam.v"). Not thread-safe.
#ifndef HPTRAIN_RUNTIME_TRAIN_DEVICE_OPTIMIZER_H_
#define HPTRAIN_RUNTIME_TRAIN_DEVICE_OPTIMIZER_H_

#include <torch/types.h>

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/optimizer.h"

namespace hptrain::train {

class DeviceOptimizer {
 public:
  // State for `num_parameters` floats on `device` (zero, as Optimizer's).
  DeviceOptimizer(const job::OptimizerSpec& spec, int64_t num_parameters,
                  const torch::Device& device);

  // params -= update(grads) at learning rate `lr`; both are flat float tensors on the device.
  void Step(torch::Tensor& params, const torch::Tensor& grads, double lr);

  int64_t steps() const { return steps_; }

  // The state into `host`'s vectors, with the step count; and back from them. Internal on a
  // size mismatch (a bug: both are built for the same model).
  absl::Status CopyStateTo(Optimizer& host) const;
  absl::Status CopyStateFrom(Optimizer& host);

 private:
  job::OptimizerSpec spec_;
  int64_t steps_ = 0;
  torch::Tensor momentum_;  // SGD with momentum
  torch::Tensor m_;         // Adam
  torch::Tensor v_;
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_DEVICE_OPTIMIZER_H_
