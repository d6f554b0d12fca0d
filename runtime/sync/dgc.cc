// dgc: Deep Gradient Compression (Lin et al., ICLR 2018; docs/algorithms.md §6).
//
// Per bucket: with `clipNorm` T set, local gradient clipping first (below); momentum correction
// u = m·u + g, v = v + u (kernels/topk/dgc.h); a threshold from a 1 % sample of |v| selects
// between 0.8·k and 1.3·k entries (k = density · n); the selected (index, value) pairs go
// through the sparse all-gather and are summed on every worker; v is cleared where sent, and so is
// u (momentum factor masking) unless `momentumMasking` is false. Tensors under 4096 elements are
// not sparsified (DGC sends small layers dense): their momentum u = m·u + g is all-reduced every
// step at 4 bits with error feedback (small_tensors.h); momentum is linear, so the sum of the
// workers' u is the momentum of the summed gradients. Because momentum happens here, the optimizer
// runs without momentum (applies_momentum). Warm-up: DGC's exponential density schedule over
// `warmupEpochs` (density_schedule.h); at density ≥ 0.5 the whole bucket is all-reduced dense.
// With `sparseEncoding: compact` the pairs travel in 4 bytes instead of 8 (16-bit block offsets,
// fp16 values), and what fp16 rounding takes off a sent value stays in v.
//
// Momentum factor masking stops a sent element's momentum from pushing on with gradients that
// were already applied, but it also discards that momentum: an element sent every τ steps keeps
// 1 − m(1 − m^τ)/((1 − m)τ) of what momentum SGD would apply to a steady gradient (0.91 at
// τ = 100, 0.56 at τ = 20, 1 − m at τ = 1), and at density 1 masking leaves plain SGD. Without
// masking, u runs on as momentum SGD's buffer, and at density 1 DGC is momentum SGD up to rounding
// (weight decay aside: the optimizer applies it outside the momentum). One epoch of the demo job
// shows the cost: with masking the gap to ssgd stays near 1 point from density 0.01 to 0.05
// (docs/benchmarks/accuracy-density); without, it shrinks with density as topk's does
// (accuracy-dgc-unmasked).
//
// Local clipping (DGC's, before accumulation): the worker's mean gradient g/b (g is the sum over
// its b samples) is clipped to the global bound T scaled by N^{-1/2}. A bucket of n of the model's
// P elements is clipped to its share of that bound, T·N^{-1/2}·sqrt(n/P), so buckets that are all
// at their bound make a model gradient of norm exactly T·N^{-1/2}; with one bucket (LeNet-5, the
// MLP) that is the whole-gradient clipping of the paper. Buckets are reduced while backward runs,
// which is why the norm is not taken over the whole model.
//
// Bytes per worker per step, L large and S small elements: about (N-1) · (8k + 32) with
// k ≤ 1.3 · density · L (compact: (N-1) · (4k + 32 + 4·ceil(L / 65536))), plus the small tensors'
// 2(N-1)/N · (S/2 + 8·ceil(S/512)).
//
// On a GPU with the NCCL back end (the SPARSE encoding: job::ExchangesOnDevice) the buckets stay
// in device memory: the same steps with the kernels' CUDA twins and the same blocks and bytes over
// NCCL (device/sparse_device.h).
#include "kernels/topk/dgc.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/topk/topk.h"
#include "runtime/base/status.h"
#include "runtime/sync/density_schedule.h"
#include "runtime/sync/device/sparse_device.h"
#include "runtime/sync/registry.h"
#include "runtime/sync/small_tensors.h"
#include "runtime/sync/sparse_allgather.h"

namespace hptrain::sync {
namespace {

// dgc's parameters (strategy_descriptors.cc), as validated.
struct DgcOptions {
  SparseOptions sparse;
  double clip_norm = 0;  // 0: no clipping
  bool momentum_masking = true;
  SparseWire wire = SparseWire::kPairs;
};

DgcOptions DgcOptionsOf(const StrategyOptions& options) {
  DgcOptions dgc;
  dgc.sparse = SparseOptionsOf(options);
  dgc.clip_norm = options.Number("clipNorm");
  dgc.momentum_masking = options.Bool("momentumMasking");
  dgc.wire = SparseWireOf(options);
  return dgc;
}

class Dgc : public Strategy, public SummingReducer {
 public:
  // With a device communicator and the SPARSE encoding, the buckets are device buffers.
  Dgc(const StrategyContext& context, const DgcOptions& options)
      : seed_(context.seed),
        options_(options),
        comm_(context.comm),
        device_comm_(options.wire == SparseWire::kPairs ? context.device_comm : nullptr),
        wire_(options.wire),
        momentum_(static_cast<float>(context.optimizer.momentum)),
        masking_(options.momentum_masking) {
    traits_ = DeclaredTraits(name());
    traits_.reduces_on_device = device_comm_ != nullptr;
  }
  std::string name() const override { return "dgc"; }
  GradientReducer* reducer() override { return this; }

  absl::Status Init(const GradientLayout& layout) override {
    if (device_comm_ != nullptr) {
      DeviceSparseReducer::Options options;
      options.dgc = true;
      options.momentum = momentum_;
      options.masking = masking_;
      options.clip_norm = options_.clip_norm;
      options.seed = seed_;
      HPTRAIN_ASSIGN_OR_RETURN(device_, DeviceSparseReducer::Create(layout, device_comm_, options));
      return absl::OkStatus();
    }
    small_.Init(layout, comm_, seed_, /*error_feedback=*/true);
    model_elements_ = 0;
    for (const auto& b : layout.buckets) model_elements_ += b.end - b.begin;
    const size_t buckets = layout.buckets.size();
    u_.resize(buckets);
    v_.resize(buckets);
    small_u_.resize(buckets);
    for (size_t k = 0; k < buckets; ++k) {
      u_[k].assign(small_.large_count(static_cast<int>(k)), 0.0f);
      v_[k].assign(small_.large_count(static_cast<int>(k)), 0.0f);
      small_u_[k].assign(small_.small_count(static_cast<int>(k)), 0.0f);
    }
    return absl::OkStatus();
  }

  absl::Status ReduceSum(const StepInfo& step, int bucket, absl::Span<float> gradients) override {
    const double density =
        WarmupDensity(options_.sparse.density, options_.sparse.warmup_epochs, step.epoch_clock);
    if (device_ != nullptr) return device_->Reduce(step, bucket, gradients, density, &tally_);
    Clip(step, gradients);
    small_.Split(bucket, gradients);
    // Small tensors: plain momentum, u = m·u + g, and u is what gets summed.
    absl::Span<float> small = small_.small();
    std::vector<float>& small_u = small_u_[bucket];
    for (size_t i = 0; i < small.size(); ++i) {
      small_u[i] = momentum_ * small_u[i] + small[i];
      small[i] = small_u[i];
    }
    absl::Span<float> large = small_.large();
    const int64_t n = static_cast<int64_t>(large.size());
    std::vector<float>& u = u_[bucket];
    std::vector<float>& v = v_[bucket];
    kernels::DgcMomentumCorrection(large.data(), n, momentum_, u.data(), v.data());
    if (density >= kDenseAboveDensity) {
      std::copy(v.begin(), v.end(), large.begin());
      if (masking_) std::fill(u.begin(), u.end(), 0.0f);
      std::fill(v.begin(), v.end(), 0.0f);
      return small_.FinishDense(bucket, gradients, &tally_);
    }
    size_t wire = 0;
    if (n > 0) {
      kernels::DgcThresholdOptions options;
      options.density = density;
      const kernels::ThresholdSelection selection =
          kernels::DgcSelect(v.data(), n, options, seed_ + bucket, step.step);
      indices_.resize(selection.count);
      values_.resize(selection.count);
      const int64_t count = kernels::PackSelection(v.data(), n, selection, indices_.data(),
                                                   values_.data(), selection.count);
      indices_.resize(count);
      values_.resize(count);
      RoundForWire(wire_, &values_, &rests_);
      kernels::DgcMaskSelected(indices_.data(), count, masking_ ? u.data() : nullptr, v.data());
      if (wire_ == SparseWire::kCompact) {  // v keeps what fp16 rounding took off
        for (int64_t j = 0; j < count; ++j) v[indices_[j]] = rests_[j];
      }
      HPTRAIN_RETURN_IF_ERROR(
          SparseAllGatherSum(*comm_, wire_, indices_, values_, n, large.data(), &wire),
          "DGC exchange of ", count, " of ", n, " elements");
    }
    return small_.FinishSparse(step.step, bucket, gradients, wire, &tally_);
  }

  int64_t UnsavedStateValues() const override {  // momentum and accumulation, u and v
    int64_t n = 0;
    for (const auto* state : {&u_, &v_, &small_u_}) {
      for (const auto& part : *state) n += static_cast<int64_t>(part.size());
    }
    return n;
  }

  StrategyStats stats() const override {
    StrategyStats s;
    s.compression_ratio = tally_.ratio();
    return s;
  }

 private:
  // Local clipping of one bucket of summed gradients (see the top of the file); off when
  // clipNorm is 0 or the worker has no samples this step.
  void Clip(const StepInfo& step, absl::Span<float> gradients) const {
    const double bound = options_.clip_norm;
    if (bound <= 0 || step.local_batch <= 0 || gradients.empty() || model_elements_ == 0) return;
    const double share = std::sqrt(static_cast<double>(gradients.size()) / model_elements_);
    const double max_norm = step.local_batch *
                            kernels::DgcLocalClipNorm(static_cast<float>(bound), comm_->size()) *
                            share;
    kernels::ClipToNorm(gradients.data(), static_cast<int64_t>(gradients.size()),
                        static_cast<float>(max_norm));
  }

  const uint64_t seed_;  // spec.seed
  const DgcOptions options_;
  comm::Communicator* comm_;
  comm::Communicator* device_comm_;  // null: host buffers (no NCCL, or the compact encoding)
  SparseWire wire_;
  float momentum_;
  bool masking_;               // momentum factor masking: clear u where sent
  size_t model_elements_ = 0;  // P, over all buckets
  SmallTensorExchange small_;
  std::vector<std::vector<float>> u_, v_;    // per bucket, over its large tensors
  std::vector<std::vector<float>> small_u_;  // per bucket, the small tensors' momentum
  std::vector<float> values_;
  std::vector<float> rests_;  // what fp16 rounding took off each sent value (compact), else 0
  std::vector<int32_t> indices_;
  CompressionTally tally_;
  std::unique_ptr<DeviceSparseReducer> device_;  // the device route (sparse_device.h)
};

}  // namespace

bool dgc_registered = RegisterStrategy(
    "dgc", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      const StrategyOptions& options = *context.options;
      return std::make_unique<Dgc>(context, DgcOptionsOf(options));
    });

}  // namespace hptrain::sync
