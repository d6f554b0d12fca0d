#include "runtime/train/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/train/torch_call.h"

// libtorch 2.4 made autocast's switches per device type (at::autocast::set_autocast_enabled(
// device_type, ...)) and deprecated the per-device functions that 1.x has (set_cpu_enabled,
// set_autocast_gpu_dtype, ...).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define HPTRAIN_AUTOCAST_BY_DEVICE_TYPE 1
#else
#define HPTRAIN_AUTOCAST_BY_DEVICE_TYPE 0
#endif

namespace hptrain::train {
namespace {

void SetAutocast(c10::DeviceType type, bool enabled, c10::ScalarType dtype) {
#if HPTRAIN_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_dtype(type, dtype);
  at::autocast::set_autocast_enabled(type, enabled);
#else
  if (type == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

}  // namespace

absl::StatusOr<c10::ScalarType> AutocastDtype(const std::string& precision) {
  if (precision == "fp32" || precision.empty()) return c10::ScalarType::Float;
  if (precision == "bf16") return c10::ScalarType::BFloat16;
  if (precision == "fp16") return c10::ScalarType::Half;
  return absl::InvalidArgumentError(
      absl::StrCat("spec.precision: must be fp32, bf16 or fp16, got \"", precision, "\""));
}

bool AutocastGuard::Enabled(c10::DeviceType type) {
#if HPTRAIN_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::is_autocast_enabled(type);
#else
  return type == c10::DeviceType::CUDA ? at::autocast::is_enabled()
                                       : at::autocast::is_cpu_enabled();
#endif
}

c10::ScalarType AutocastGuard::Dtype(c10::DeviceType type) {
#if HPTRAIN_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::get_autocast_dtype(type);
#else
  return type == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                       : at::autocast::get_autocast_cpu_dtype();
#endif
}

AutocastGuard::AutocastGuard(const torch::Device& device, c10::ScalarType dtype) {
  if (dtype == c10::ScalarType::Float) return;
  active_ = true;
  type_ = device.is_cuda() ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
  previous_enabled_ = Enabled(type_);
  previous_dtype_ = Dtype(type_);
  SetAutocast(type_, true, dtype);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // As torch.autocast's __exit__: the cached casts of the weights are dropped when the outermost
  // region ends, since the optimizer changes the weights before the next forward.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  SetAutocast(type_, previous_enabled_, previous_dtype_);
}

bool LossScaler::Update(bool found_inf) {
  if (found_inf) {
    ++skipped_;
    scale_ *= options_.backoff_factor;
    good_ = 0;
    return false;
  }
  if (++good_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    good_ = 0;
  }
  return true;
}

bool AllFinite(const float* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(data[i])) return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<MixedPrecision>> MixedPrecision::Create(const job::JobSpec& spec,
                                                                       const torch::Device& device,
                                                                       int rank) {
  HPTRAIN_ASSIGN_OR_RETURN(c10::ScalarType dtype, AutocastDtype(spec.precision));
  if (dtype == c10::ScalarType::Half && !device.is_cuda()) {
    return absl::InvalidArgumentError(
        "spec.precision: fp16 needs a GPU, but this worker trains on the CPU; use bf16 or fp32");
  }
  std::unique_ptr<MixedPrecision> mixed(new MixedPrecision(device, dtype));
  if (dtype == c10::ScalarType::Half || spec.testing.loss_scaling) mixed->scaler_.emplace();
  if (mixed->scaler_ && spec.testing.inf_gradient_rank == rank) {
    mixed->inf_step_ = spec.testing.inf_gradient_step;
  }
  return mixed;
}

torch::Tensor MixedPrecision::ScaleLoss(const torch::Tensor& loss) const {
  if (!scaler_) return loss;
  return loss * scaler_->scale();
}

absl::StatusOr<bool> MixedPrecision::CheckGradients(int64_t step, FlatModel& flat,
                                                    comm::BucketedReducer& reducer,
                                                    const std::vector<char>& stored,
                                                    comm::Communicator& comm) {
  if (!scaler_) return true;
  bool finite = true;
  HPTRAIN_RETURN_IF_ERROR(TorchCall("checking the gradients for inf/nan", [&] {
    if (flat.reduce_on_device()) {
      // The device route's flat gradients, zeroed before backward (ClearGradients).
      torch::Tensor grads = torch::from_blob(
          flat.device_gradients(), {static_cast<int64_t>(reducer.size())},
          torch::TensorOptions().dtype(torch::kFloat32).device(flat.device()));
      if (step == inf_step_) grads.narrow(0, 0, 1).fill_(std::numeric_limits<float>::infinity());
      finite = grads.isfinite().all().item<bool>();
      return;
    }
    // The host slots of the tensors stored this step; the others hold an earlier step's values
    // and are zero-filled when the exchange starts.
    for (int t = 0; t < reducer.num_tensors(); ++t) {
      if (!stored[t]) continue;
      if (step == inf_step_) {
        reducer.data_for(t)[0] = std::numeric_limits<float>::infinity();
        inf_step_ = -1;  // one tensor is enough
      }
      if (!AllFinite(reducer.data_for(t), reducer.tensor_size(t))) {
        finite = false;
        break;
      }
    }
  }));
  float flag = finite ? 0.0f : 1.0f;
  if (comm.size() > 1) {
    HPTRAIN_RETURN_IF_ERROR(comm.AllReduceSum(&flag, 1), "step ", step,
                            ": all-reducing the inf/nan check of the gradients");
  }
  return scaler_->Update(flag > 0.0f);
}

}  // namespace hptrain::train
