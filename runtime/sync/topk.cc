// topk: top-k sparsification with error feedback (the Top-k baseline of docs/algorithms.md §6).
//
// Per bucket, the large tensors' gradients plus the residual left from earlier steps are
// x = g + r; the k = ceil(density · n) entries of largest |x| are sent as (index, value) pairs
// through an all-gather-v (sparse_allgather.h) and summed in rank order on every worker; what was
// not sent stays in r. With `sparseEncoding: compact` the pairs travel in 4 bytes instead of 8
// (16-bit block offsets, fp16 values), and what fp16 rounding takes off a sent value stays in r.
// Tensors under 4096 elements are not sparsified but all-reduced at 4 bits with error feedback
// (small_tensors.h). During `warmupEpochs` the density follows DGC's exponential warm-up
// (density_schedule.h); at density ≥ 0.5 the whole bucket is all-reduced dense, so density 1.0 is
// exactly ssgd.
//
// Bytes per worker per step, L large and S small elements: about (N-1) · (8k + 32) for the pairs
// (k = ceil(density · L); compact: (N-1) · (4k + 32 + 4·ceil(L / 65536))), plus 8 bytes per ring
// step for the sizes, plus the small tensors' 2(N-1)/N · (S/2 + 8·ceil(S/512)); at density 0.01
// on LeNet-5 about 4.6 % of ssgd's 2(N-1)/N · 4P (compact: 2.7 %).
//
// On a GPU with the NCCL back end (the SPARSE encoding: job::ExchangesOnDevice) the buckets stay
// in device memory: the same steps with the kernels' CUDA twins and the same blocks and bytes over
// NCCL (device/sparse_device.h).
#include "kernels/topk/topk.h"

#include <memory>
#include <vector>

#include "runtime/base/status.h"
#include "runtime/sync/density_schedule.h"
#include "runtime/sync/device/sparse_device.h"
#include "runtime/sync/registry.h"
#include "runtime/sync/small_tensors.h"
#include "runtime/sync/sparse_allgather.h"

namespace hptrain::sync {
namespace {

// topk's parameters (strategy_descriptors.cc), as validated.
struct TopkOptions {
  SparseOptions sparse;
  bool error_feedback = true;
  SparseWire wire = SparseWire::kPairs;
};

TopkOptions TopkOptionsOf(const StrategyOptions& options) {
  TopkOptions topk;
  topk.sparse = SparseOptionsOf(options);
  topk.error_feedback = options.Bool("errorFeedback");
  topk.wire = SparseWireOf(options);
  return topk;
}

class TopK : public Strategy, public SummingReducer {
 public:
  // With a device communicator and the SPARSE encoding, the buckets are device buffers.
  TopK(const StrategyContext& context, const TopkOptions& options)
      : seed_(context.seed),
        options_(options),
        comm_(context.comm),
        device_comm_(options.wire == SparseWire::kPairs ? context.device_comm : nullptr),
        wire_(options.wire) {
    traits_ = DeclaredTraits(name());
    traits_.reduces_on_device = device_comm_ != nullptr;
  }
  std::string name() const override { return "topk"; }
  GradientReducer* reducer() override { return this; }

  absl::Status Init(const GradientLayout& layout) override {
    feedback_ = options_.error_feedback;
    if (device_comm_ != nullptr) {
      DeviceSparseReducer::Options options;
      options.error_feedback = feedback_;
      options.seed = seed_;
      HPTRAIN_ASSIGN_OR_RETURN(device_, DeviceSparseReducer::Create(layout, device_comm_, options));
      return absl::OkStatus();
    }
    small_.Init(layout, comm_, seed_, feedback_);
    residual_.resize(layout.buckets.size());
    for (size_t k = 0; k < layout.buckets.size(); ++k) {
      if (feedback_) residual_[k].assign(small_.large_count(static_cast<int>(k)), 0.0f);
    }
    return absl::OkStatus();
  }

  absl::Status ReduceSum(const StepInfo& step, int bucket, absl::Span<float> gradients) override {
    const double density =
        WarmupDensity(options_.sparse.density, options_.sparse.warmup_epochs, step.epoch_clock);
    if (device_ != nullptr) return device_->Reduce(step, bucket, gradients, density, &tally_);
    small_.Split(bucket, gradients);
    if (density >= kDenseAboveDensity) {
      FoldResidual(residual_[bucket], small_.large());
      return small_.FinishDense(bucket, gradients, &tally_);
    }
    size_t wire = 0;
    HPTRAIN_RETURN_IF_ERROR(SendLarge(bucket, density, small_.large(), &wire));
    return small_.FinishSparse(step.step, bucket, gradients, wire, &tally_);
  }

  int64_t UnsavedStateValues() const override {  // the error-feedback residuals
    int64_t n = 0;
    for (const auto& r : residual_) n += static_cast<int64_t>(r.size());
    return n;
  }

  StrategyStats stats() const override {
    StrategyStats s;
    s.compression_ratio = tally_.ratio();
    return s;
  }

 private:
  absl::Status SendLarge(int bucket, double density, absl::Span<float> x, size_t* wire) {
    const int64_t n = static_cast<int64_t>(x.size());
    if (n == 0) return absl::OkStatus();
    FoldResidual(residual_[bucket], x);
    const int64_t k = kernels::DgcTargetCount(n, density);
    indices_.resize(k);
    values_.resize(k);
    kernels::TopKExact(x.data(), n, k, indices_.data(), values_.data());
    RoundForWire(wire_, &values_, &rests_);
    if (feedback_) {  // r = x where not sent; where sent, what fp16 rounding left (else 0)
      std::vector<float>& r = residual_[bucket];
      r.assign(x.begin(), x.end());
      for (int64_t j = 0; j < k; ++j) r[indices_[j]] = rests_[j];
    }
    HPTRAIN_RETURN_IF_ERROR(SparseAllGatherSum(*comm_, wire_, indices_, values_, n, x.data(), wire),
                            "top-k exchange of ", k, " of ", n, " elements");
    return absl::OkStatus();
  }

  const uint64_t seed_;  // spec.seed
  const TopkOptions options_;
  comm::Communicator* comm_;
  comm::Communicator* device_comm_;  // null: host buffers (no NCCL, or the compact encoding)
  SparseWire wire_;
  bool feedback_ = true;
  std::unique_ptr<DeviceSparseReducer> device_;  // the device route (sparse_device.h)
  SmallTensorExchange small_;
  std::vector<std::vector<float>> residual_;  // per bucket, over its large tensors; empty if off
  std::vector<float> values_;
  std::vector<float> rests_;  // what fp16 rounding took off each sent value (compact), else 0
  std::vector<int32_t> indices_;
  CompressionTally tally_;
};

}  // namespace

bool topk_registered = RegisterStrategy(
    "topk", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      const StrategyOptions& options = *context.options;
      return std::make_unique<TopK>(context, TopkOptionsOf(options));
    });

}  // namespace hptrain::sync
