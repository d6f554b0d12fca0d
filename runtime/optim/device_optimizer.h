// DeviceOptimizer: Optimizer's device route, for a worker that trains on a GPU. The same update
// (the same kernel parameters handed to kernels/update's CUDA twins, which compute what the CPU
// kernels compute, element for element) over the same state layout ("momentum", or "adam.m" and
// "adam.v", each num_parameters floats) kept in device memory, so neither the state nor the
// update leaves the GPU.
//
// Checkpoints and the optimizer-state averaging of hierarchical training work on host vectors:
// CopyStateTo/CopyStateFrom move the state to and from an Optimizer of the same options and size,
// by name, with the step count. In a build without CUDA, Create returns Unimplemented
// (device_optimizer_none.cc). Not thread-safe.
#ifndef HPTRAIN_RUNTIME_OPTIM_DEVICE_OPTIMIZER_H_
#define HPTRAIN_RUNTIME_OPTIM_DEVICE_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/optim/optimizer.h"
#include "runtime/optim/optimizer_options.h"

namespace hptrain::optim {

class DeviceOptimizer {
 public:
  // State for `num_parameters` floats in the memory of CUDA device `device` (-1: the calling
  // thread's current device), zero as Optimizer's. Internal when the allocation fails;
  // Unimplemented in a build without CUDA.
  static absl::StatusOr<std::unique_ptr<DeviceOptimizer>> Create(const OptimizerOptions& options,
                                                                 size_t num_parameters,
                                                                 int device = -1);
  ~DeviceOptimizer();
  DeviceOptimizer(const DeviceOptimizer&) = delete;
  DeviceOptimizer& operator=(const DeviceOptimizer&) = delete;

  // params -= update(grads) at learning rate `lr`: device pointers to num_parameters floats
  // each, on the optimizer's device. Enqueued on `stream` (a cudaStream_t; null: the legacy
  // default stream) after the work already there; returns without waiting for it. Internal when
  // the launch fails.
  absl::Status Step(float* params, const float* grads, double lr, void* stream);

  int64_t steps() const { return steps_; }
  const OptimizerOptions& options() const { return options_; }
  size_t size() const { return n_; }

  // The state into `host`'s vectors with the step count, and back from them. Both are ordered
  // on `stream` and wait for it, so a following host read (or a following step) sees the copy.
  // Internal when `host` lacks a vector of this optimizer or has one of another size (a bug:
  // both are built for the same model), or when a copy fails.
  absl::Status CopyStateTo(Optimizer& host, void* stream) const;
  absl::Status CopyStateFrom(Optimizer& host, void* stream);

 private:
  DeviceOptimizer(const OptimizerOptions& options, size_t num_parameters, int device);

  OptimizerOptions options_;
  size_t n_;
  int device_;
  int64_t steps_ = 0;
  float* momentum_ = nullptr;  // device memory, SGD with momentum
  float* m_ = nullptr;         // Adam
  float* v_ = nullptr;
};

}  // namespace hptrain::optim

#endif  // HPTRAIN_RUNTIME_OPTIM_DEVICE_OPTIMIZER_H_
