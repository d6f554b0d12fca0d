#include "runtime/train/model_buffers.h"

#include <torch/torch.h>

#include "runtime/base/status.h"
#include "runtime/train/torch_call.h"

namespace hptrain::train {

size_t BufferElements(const Model& model) {
  size_t total = 0;
  for (const auto& b : model.buffers()) total += static_cast<size_t>(b.numel());
  return total;
}

void FlattenBuffers(const Model& model, std::vector<float>* flat) {
  flat->clear();
  for (const auto& b : model.buffers()) {
    torch::Tensor c = b.to(torch::kCPU, torch::kFloat32).contiguous();
    flat->insert(flat->end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
}

absl::Status RestoreBuffers(Model& model, const std::vector<float>& flat, float scale) {
  size_t offset = 0;
  return TorchCall("restoring buffers", [&] {
    torch::NoGradGuard no_grad;
    for (auto& b : model.buffers()) {
      // from_blob does not write through the pointer; the copy below only reads it.
      torch::Tensor src = torch::from_blob(const_cast<float*>(flat.data()) + offset, b.sizes(),
                                           torch::kFloat32);
      b.copy_(scale == 1.0f ? src : src * scale);
      offset += b.numel();
    }
  });
}

absl::Status AverageBuffers(Model& model, comm::Communicator& comm) {
  if (model.buffers().empty() || comm.size() == 1) return absl::OkStatus();
  std::vector<float> flat;
  FlattenBuffers(model, &flat);
  HPTRAIN_RETURN_IF_ERROR(comm.AllReduceSum(flat.data(), flat.size()), "averaging buffers");
  return RestoreBuffers(model, flat, 1.0f / static_cast<float>(comm.size()));
}

}  // namespace hptrain::train
