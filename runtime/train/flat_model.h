// FlatModel: a model's parameters as one flat float32 buffer on the training device (every
// parameter becomes a view into it), the host copy the exchange library works on, and the flat
// gradient slots that backward's hooks copy each parameter's gradient into.
//
// Three layouts (trainer.h describes the two routes on a GPU):
//   host path    the CPU: the flat parameters are their own host copy; each gradient is copied
//                into the bucketed reducer's host buffer.
//   staged       on the device (a GPU, or spec.testing.devicePath on the CPU) with an exchange in
//                host memory: gradients are copied into the reducer's host buffer as backward
//                produces them, and the reduced ones go back to a flat device buffer in one copy
//                (GradientsForStep) before the optimizer step.
//   device route on a GPU whose strategy reduces device buckets (NCCL): gradients are copied into
//                the flat device buffer on the default stream, and reduced there.
#ifndef HPTRAIN_RUNTIME_TRAIN_FLAT_MODEL_H_
#define HPTRAIN_RUNTIME_TRAIN_FLAT_MODEL_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/comm/bucketed_reducer.h"
#include "runtime/train/models/model.h"

namespace hptrain::train {

class FlatModel {
 public:
  // Flattens `model`'s parameters (already on `device`) into one buffer there. `on_device`: the
  // staged or device layout; false: the host path. Only float32 parameters are supported.
  static absl::StatusOr<std::unique_ptr<FlatModel>> Create(Model* model, torch::Device device,
                                                           bool on_device);

  // Binds the gradient slots to `reducer`'s host buffer (host path, staged) or, with
  // `reduce_on_device`, to a flat device buffer in the reducer's layout. Once, before the
  // first backward.
  absl::Status AttachGradients(comm::BucketedReducer* reducer, bool reduce_on_device);

  std::vector<torch::Tensor>& parameters() { return params_; }
  int64_t size() const { return flat_.numel(); }
  bool on_device() const { return on_device_; }
  bool reduce_on_device() const { return reduce_on_device_; }
  const torch::Device& device() const { return device_; }

  // The flat parameters where the model trains (device memory on a GPU).
  float* data() { return flat_.data_ptr<float>(); }
  // Their host copy, which strategies and checkpoints read and write: current after ToHost,
  // written back by ToDevice. Both are no-ops on the host path, where the two are one buffer.
  absl::Span<float> host() {
    return absl::MakeSpan(host_.data_ptr<float>(), static_cast<size_t>(host_.numel()));
  }
  void ToHost();
  void ToDevice();

  // A batch tensor on the training device: from pinned memory, asynchronously, on a GPU; the
  // tensor itself otherwise.
  torch::Tensor Load(const torch::Tensor& host) const;

  // In the autograd hook of parameter `index`: its gradient, times `scale`, into its slot.
  // (The Python API's losses are means over the local batch b: scale b makes them the sums the
  // reducers expect.)
  void StoreGradient(int index, const torch::Tensor& grad, float scale = 1.0f);
  // Device route, before backward: zeroes the device gradients, so that a parameter that gets
  // no gradient this step contributes zeros, as on the host, where the reducer zero-fills it.
  void ClearGradients();
  // Device route: the flat device gradient buffer (the reducer's buckets at the same offsets).
  float* device_gradients() { return device_grads_.data_ptr<float>(); }
  // The device path's flat gradients for the optimizer: staged, the reducer's host buffer
  // copied up first; on the device route, in place.
  absl::StatusOr<float*> GradientsForStep();

 private:
  FlatModel(std::vector<torch::Tensor> params, torch::Device device, bool on_device)
      : params_(std::move(params)), device_(device), on_device_(on_device) {}

  std::vector<torch::Tensor> params_;
  torch::Device device_;
  bool on_device_;
  bool reduce_on_device_ = false;
  comm::BucketedReducer* reducer_ = nullptr;
  torch::Tensor flat_;          // every parameter is a view into this buffer
  torch::Tensor host_;          // flat_ itself on the host path; its (pinned) host copy otherwise
  torch::Tensor device_grads_;  // device path: the flat gradients on the device
  // Device path, per parameter: its slot, shaped as the parameter: in device_grads_ on the
  // device route, in the reducer's host buffer when staged.
  std::vector<torch::Tensor> slots_;
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_FLAT_MODEL_H_
