// Mixed precision (spec.precision: fp32 | bf16 | fp16) for the trainer: autocast around the
// forward and the loss, fp32 master weights and optimizer, and for fp16 dynamic loss scaling.
//
// The model's parameters stay float32: under autocast the matrix products and convolutions run in
// bf16 or fp16 on casts of them, so their gradients arrive in float32 and enter the exchange
// unchanged. Backward runs outside autocast, in the dtypes the forward chose (as PyTorch's).
//
// fp16 (CUDA only) adds dynamic loss scaling, as torch.cuda.amp.GradScaler does it. One step:
//   1. forward under autocast; the loss is multiplied by the scale S before backward;
//   2. the autograd hooks store each gradient times 1/S into its slot (FlatModel::StoreGradient)
//      and start no exchange;
//   3. CheckGradients: this worker's stored gradients are checked for inf/nan, and a one-float
//      flag is all-reduced over the workers, so that all of them take the same decision;
//   4. no inf/nan anywhere: the trainer starts the exchange (every stored tensor marked ready)
//      and the step goes on as in fp32; S doubles after kGrowthInterval such steps in a row.
//      Otherwise the step is skipped by every worker: no exchange, no optimizer or strategy
//      step; the step still counts (its data is consumed, the learning-rate schedule moves on),
//      and S halves.
// S is a power of two, so scaling and unscaling are exact: a step without inf/nan computes the
// same gradients, bit for bit, as without scaling (barring subnormals). spec.testing.lossScaling
// runs steps 2-4 without autocast on any device, and spec.testing.infGradientStep writes an inf
// into one worker's gradient at one step, so that CPU-only machines test the skip.
//
// Thread-safety: one thread (the trainer's); the hooks only read gradient_scale().
#ifndef HPTRAIN_RUNTIME_TRAIN_PRECISION_H_
#define HPTRAIN_RUNTIME_TRAIN_PRECISION_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/comm/bucketed_reducer.h"
#include "runtime/comm/communicator.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/flat_model.h"

namespace hptrain::train {

// The dtype autocast runs the lower-precision operations in for spec.precision: kBFloat16,
// kHalf, or kFloat for fp32 (no autocast). An unknown name is InvalidArgument naming
// spec.precision.
absl::StatusOr<c10::ScalarType> AutocastDtype(const std::string& precision);

// Enables autocast to `dtype` for `device`'s type (CPU or CUDA) for its lifetime, and restores
// the previous enabled state and dtype when it ends; the cache of casted weights is cleared when
// the outermost guard ends (the weights change every step). kFloat does nothing. Not copyable.
class AutocastGuard {
 public:
  AutocastGuard(const torch::Device& device, c10::ScalarType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

  // Whether autocast is enabled for `type` in this thread, and the dtype it casts to there.
  static bool Enabled(c10::DeviceType type);
  static c10::ScalarType Dtype(c10::DeviceType type);

 private:
  bool active_ = false;
  c10::DeviceType type_ = c10::DeviceType::CPU;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Float;
};

// Dynamic loss scaling's state machine (GradScaler's defaults), independent of any device.
class LossScaler {
 public:
  static constexpr float kInitScale = 65536.0f;  // 2^16
  static constexpr float kGrowthFactor = 2.0f;
  static constexpr float kBackoffFactor = 0.5f;
  static constexpr int kGrowthInterval = 2000;

  struct Options {
    float init_scale = kInitScale;
    float growth_factor = kGrowthFactor;
    float backoff_factor = kBackoffFactor;
    int growth_interval = kGrowthInterval;  // good steps in a row before the scale grows
  };

  LossScaler() : LossScaler(Options()) {}
  explicit LossScaler(const Options& options) : options_(options), scale_(options.init_scale) {}

  // What the loss is multiplied by before backward, and what the gradients are multiplied by
  // as they are stored (1 / scale).
  float scale() const { return scale_; }
  float inverse_scale() const { return 1.0f / scale_; }

  // After every step, with whether any worker's gradient had an inf or nan. Returns whether the
  // step is applied (false: skipped, counted, the scale backs off and the run of good steps
  // restarts); a good step that completes growth_interval in a row grows the scale.
  bool Update(bool found_inf);

  int64_t skipped_steps() const { return skipped_; }
  int good_steps() const { return good_; }  // applied steps in a row since the scale last changed

 private:
  Options options_;
  float scale_;
  int good_ = 0;
  int64_t skipped_ = 0;
};

// Whether n floats are all finite (no inf, no nan).
bool AllFinite(const float* data, size_t n);

// spec.precision (and its testing knobs) for one worker's trainer.
class MixedPrecision {
 public:
  // For a worker of rank `rank` training on `device`. fp16 on the CPU is InvalidArgument naming
  // spec.precision (CheckDevice refuses it earlier with the same words).
  static absl::StatusOr<std::unique_ptr<MixedPrecision>> Create(const job::JobSpec& spec,
                                                                const torch::Device& device,
                                                                int rank);

  // The guard to hold around the forward and the loss (does nothing for fp32).
  std::unique_ptr<AutocastGuard> Autocast() const {
    return std::make_unique<AutocastGuard>(device_, dtype_);
  }
  c10::ScalarType autocast_dtype() const { return dtype_; }

  // Loss scaling (fp16, spec.testing.lossScaling): the autograd hooks then only store the
  // gradients (times gradient_scale()), and the exchange starts after CheckGradients.
  bool scales_loss() const { return scaler_.has_value(); }
  float gradient_scale() const { return scaler_ ? scaler_->inverse_scale() : 1.0f; }
  // The loss to call backward on: times the scale under loss scaling, else `loss` itself.
  torch::Tensor ScaleLoss(const torch::Tensor& loss) const;

  // Under loss scaling, every worker after backward of global step `step`: checks the gradients
  // this worker stored (the tensors whose `stored` entry is set: their slots in `reducer`'s
  // host buffer, or on the device route `flat`'s device gradients), all-reduces the verdict
  // over `comm` and updates the scale. Returns whether the step is applied (the same on every
  // worker); a failed all-reduce is returned as its error.
  absl::StatusOr<bool> CheckGradients(int64_t step, FlatModel& flat,
                                      comm::BucketedReducer& reducer,
                                      const std::vector<char>& stored, comm::Communicator& comm);

  // Skipped steps so far, and the current loss scale (0 without loss scaling).
  int64_t skipped_steps() const { return scaler_ ? scaler_->skipped_steps() : 0; }
  float loss_scale() const { return scaler_ ? scaler_->scale() : 0.0f; }

 private:
  MixedPrecision(torch::Device device, c10::ScalarType dtype) : device_(device), dtype_(dtype) {}

  torch::Device device_;
  c10::ScalarType dtype_;
  std::optional<LossScaler> scaler_;
  int64_t inf_step_ = -1;  // spec.testing.infGradientStep on this worker's rank; -1: none
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_PRECISION_H_
