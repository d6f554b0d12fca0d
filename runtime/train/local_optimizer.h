// LocalOptimizer: the job's optimizer (runtime/optim) where the model trains: on the host, or on
// a GPU (optim::DeviceOptimizer, its state in device memory, mirrored into the host optimizer's
// vectors for checkpoints and averaging). It steps on the gradients the strategy's reducer gave:
// the mean over the global batch, or this worker's own mean for the model-averaging strategies.
#ifndef HPTRAIN_RUNTIME_TRAIN_LOCAL_OPTIMIZER_H_
#define HPTRAIN_RUNTIME_TRAIN_LOCAL_OPTIMIZER_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/optim/device_optimizer.h"
#include "runtime/optim/optimizer.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/flat_model.h"

namespace hptrain::train {

class LocalOptimizer {
 public:
  // For `model`'s `size` parameters: on its GPU when it has one, on the host otherwise (also
  // for the device path on the CPU, whose "device" buffers are host memory).
  static absl::StatusOr<std::unique_ptr<LocalOptimizer>> Create(
      const optim::OptimizerOptions& options, size_t size, const FlatModel& model);

  // One step of the flat parameters on the flat gradients, both where the model trains (on a
  // GPU: enqueued on libtorch's current stream).
  absl::Status Step(float* params, const float* grads, double lr);
  // The priority scheduler's step, range by range (host only): BeginStep once per step, then
  // StepRange for each layer.
  void BeginStep() { host_.BeginStep(); }
  void StepRange(float* params, const float* grads, size_t begin, size_t end, double lr) {
    host_.StepRange(params, grads, begin, end, lr);
  }

  // Every rank: the state averaged over the workers (a no-op with one worker).
  absl::Status AverageState(comm::Communicator& comm);
  // The state into `checkpoint` (its sections under the optimizer's names, and its step count),
  // and back; a section that is missing or does not match is an error naming `path`.
  absl::Status Save(Checkpoint* checkpoint);
  absl::Status Restore(const Checkpoint& checkpoint, const std::string& path);
  // Whether `section` is one of the optimizer's state sections.
  bool OwnsSection(const std::string& section);

 private:
  LocalOptimizer(const optim::OptimizerOptions& options, size_t size) : host_(options, size) {}
  // On a GPU: the device state into host_'s vectors, and back; nothing otherwise.
  absl::Status StateToHost();
  absl::Status StateToDevice();

  optim::Optimizer host_;
  std::unique_ptr<optim::DeviceOptimizer> device_;  // on a GPU
  torch::Device torch_device_{torch::kCPU};
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_LOCAL_OPTIMIZER_H_
