#include "runtime/train/local_optimizer.h"

#include "kernels/update/update.h"
#include "runtime/base/status.h"
#include "runtime/train/cuda_stream.h"

namespace hptrain::train {

absl::StatusOr<std::unique_ptr<LocalOptimizer>> LocalOptimizer::Create(
    const optim::OptimizerOptions& options, size_t size, const FlatModel& model) {
  std::unique_ptr<LocalOptimizer> optimizer(new LocalOptimizer(options, size));
  const torch::Device& device = model.device();
  if (device.is_cuda()) {
    HPTRAIN_ASSIGN_OR_RETURN(
        optimizer->device_,
        optim::DeviceOptimizer::Create(options, size, device.has_index() ? device.index() : -1));
    optimizer->torch_device_ = device;
  }
  return optimizer;
}

absl::Status LocalOptimizer::Step(float* params, const float* grads, double lr) {
  if (device_ == nullptr) {
    host_.Step(params, grads, lr);
    return absl::OkStatus();
  }
  // On the stream libtorch's work on this device runs on, after the gradients' reduction.
  return device_->Step(params, grads, lr, CurrentCudaStream(torch_device_));
}

absl::Status LocalOptimizer::AverageState(comm::Communicator& comm) {
  if (comm.size() == 1) return absl::OkStatus();
  const float inverse = 1.0f / static_cast<float>(comm.size());
  HPTRAIN_RETURN_IF_ERROR(StateToHost());
  for (auto& [name, state] : host_.state()) {
    HPTRAIN_RETURN_IF_ERROR(comm.AllReduceSum(state->data(), state->size()),
                            "averaging optimizer state ", name);
    kernels::Scale(state->data(), state->size(), inverse);
  }
  return StateToDevice();
}

absl::Status LocalOptimizer::Save(Checkpoint* checkpoint) {
  HPTRAIN_RETURN_IF_ERROR(StateToHost());
  checkpoint->optimizer_steps = host_.steps();
  for (const auto& [name, state] : host_.state()) checkpoint->sections[name] = *state;
  return absl::OkStatus();
}

absl::Status LocalOptimizer::Restore(const Checkpoint& checkpoint, const std::string& path) {
  for (auto& [name, state] : host_.state()) {
    HPTRAIN_RETURN_IF_ERROR(CheckSection(checkpoint, path, name, state->size()));
    *state = checkpoint.sections.at(name);
  }
  host_.set_steps(checkpoint.optimizer_steps);
  return StateToDevice();
}

bool LocalOptimizer::OwnsSection(const std::string& section) {
  return host_.state().count(section) > 0;
}

absl::Status LocalOptimizer::StateToHost() {
  if (device_ == nullptr) return absl::OkStatus();
  return device_->CopyStateTo(host_, CurrentCudaStream(torch_device_));
}

absl::Status LocalOptimizer::StateToDevice() {
  if (device_ == nullptr) return absl::OkStatus();
  return device_->CopyStateFrom(host_, CurrentCudaStream(torch_device_));
}

}  // namespace hptrain::train
