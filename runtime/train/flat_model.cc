#include "runtime/train/flat_model.h"

#include <cstring>

#include "runtime/base/status.h"
#include "runtime/train/torch_call.h"

namespace hptrain::train {

absl::StatusOr<std::unique_ptr<FlatModel>> FlatModel::Create(Model* model, torch::Device device,
                                                             bool on_device) {
  std::unique_ptr<FlatModel> flat(new FlatModel(model->parameters(), device, on_device));
  int64_t total = 0;
  for (const auto& p : flat->params_) {
    if (p.scalar_type() != torch::kFloat32) {
      return absl::InvalidArgumentError("only float32 parameters are supported");
    }
    total += p.numel();
  }
  HPTRAIN_RETURN_IF_ERROR(TorchCall("flattening parameters", [&] {
    torch::NoGradGuard no_grad;
    flat->flat_ =
        torch::empty({total}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
    int64_t offset = 0;
    for (auto& p : flat->params_) {
      torch::Tensor view = flat->flat_.narrow(0, offset, p.numel()).view(p.sizes());
      view.copy_(p);
      p.set_data(view);
      offset += p.numel();
    }
    if (!on_device) {
      flat->host_ = flat->flat_;
      return;
    }
    // Pinned on a GPU, so that the copies to and from it run at full speed.
    flat->host_ = torch::empty(
        {total}, torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(device.is_cuda()));
    flat->host_.copy_(flat->flat_);
  }));
  return flat;
}

absl::Status FlatModel::AttachGradients(comm::BucketedReducer* reducer, bool reduce_on_device) {
  reducer_ = reducer;
  reduce_on_device_ = reduce_on_device;
  if (!on_device_) return absl::OkStatus();
  return TorchCall("allocating the device buffers", [&] {
    const int64_t n = static_cast<int64_t>(reducer->size());
    device_grads_ =
        torch::zeros({n}, torch::TensorOptions().dtype(torch::kFloat32).device(device_));
    // Each gradient's slot, shaped as its parameter, made once: the hooks copy straight in.
    for (int t = 0; t < reducer->num_tensors(); ++t) {
      const int64_t offset = static_cast<int64_t>(reducer->offset(t));
      const int64_t size = static_cast<int64_t>(reducer->tensor_size(t));
      slots_.push_back(
          reduce_on_device
              ? device_grads_.narrow(0, offset, size).view(params_[t].sizes())
              : torch::from_blob(reducer->data_for(t), params_[t].sizes(), torch::kFloat32));
    }
  });
}

void FlatModel::ToHost() {
  if (!on_device_) return;
  torch::NoGradGuard no_grad;
  host_.copy_(flat_);
}

void FlatModel::ToDevice() {
  if (!on_device_) return;
  torch::NoGradGuard no_grad;
  flat_.copy_(host_);
}

torch::Tensor FlatModel::Load(const torch::Tensor& host) const {
  if (!device_.is_cuda()) return host;
  return host.pin_memory().to(device_, /*non_blocking=*/true);
}

void FlatModel::StoreGradient(int index, const torch::Tensor& grad, float scale) {
  if (scale != 1.0f) {
    torch::NoGradGuard no_grad;
    if (on_device_) {
      slots_[index].copy_(grad * scale);
    } else {
      // Into the reducer's slot, then scaled there: no temporary.
      torch::Tensor slot = torch::from_blob(reducer_->data_for(index), grad.sizes(),
                                            torch::TensorOptions().dtype(torch::kFloat32));
      slot.copy_(grad);
      slot.mul_(scale);
    }
    return;
  }
  if (!on_device_) {
    torch::Tensor g = grad.contiguous();
    std::memcpy(reducer_->data_for(index), g.data_ptr<float>(), g.numel() * sizeof(float));
    return;
  }
  torch::NoGradGuard no_grad;
  // Staged: a synchronous copy into the reducer's host slot, ready for the strategy. Device
  // route: a copy on the GPU into device_grads_, on backward's stream (the default stream),
  // queued before the hook marks the tensor ready.
  slots_[index].copy_(grad);
}

void FlatModel::ClearGradients() {
  if (!reduce_on_device_) return;
  torch::NoGradGuard no_grad;
  device_grads_.zero_();
}

absl::StatusOr<float*> FlatModel::GradientsForStep() {
  if (!reduce_on_device_) {
    HPTRAIN_RETURN_IF_ERROR(TorchCall("copying the reduced gradients to the device", [&] {
      torch::NoGradGuard no_grad;
      const int64_t n = static_cast<int64_t>(reducer_->size());
      device_grads_.copy_(torch::from_blob(reducer_->data(), {n}, torch::kFloat32));
    }));
  }
  return device_grads_.data_ptr<float>();
}

}  // namespace hptrain::train
