// topk: top-k sparsification with error feedback (the Top-k baseline of algorithms.md §6).
//
// Per bucket, the gradients plus the residual left from earlier steps are x = g + r; the
// k = ceil(density · n) entries of largest |x| are sent as (index, value) pairs through an
// all-gather-v (sparse_allgather.h) and summed in rank order on every worker; what was not sent
// stays in r. Every tensor is sparsified (error feedback delivers small ones over a few steps).
// During `warmupEpochs` the density follows DGC's exponential warm-up (density_schedule.h); at
// density ≥ 0.5 the bucket is all-reduced dense, so density 1.0 is exactly ssgd.
//
// Bytes per worker per step: about (N-1) · (8k + 32) for the pairs, plus 8 bytes per ring step
// for the sizes; at density 0.01 on LeNet-5 about 4.0 % of ssgd's 2(N-1)/N · 4P.
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/topk/topk.h"
#include "runtime/base/status.h"
#include "runtime/sync/density_schedule.h"
#include "runtime/sync/registry.h"
#include "runtime/sync/sparse_allgather.h"

namespace hptrain::sync {
namespace {

class TopK : public Strategy {
 public:
  explicit TopK(const StrategyContext& context) : spec_(*context.job), comm_(context.comm) {}
  std::string name() const override { return "topk"; }

  absl::Status Init(const GradientLayout& layout) override {
    feedback_ = spec_.strategy.error_feedback.value_or(true);
    residual_.resize(layout.buckets.size());
    for (size_t k = 0; k < layout.buckets.size(); ++k) {
      if (feedback_) residual_[k].assign(layout.buckets[k].end - layout.buckets[k].begin, 0.0f);
    }
    return absl::OkStatus();
  }

  absl::Status ReduceGradients(const StepInfo& step, int bucket,
                               absl::Span<float> gradients) override {
    const int64_t n = static_cast<int64_t>(gradients.size());
    float* x = gradients.data();
    std::vector<float>& r = residual_[bucket];
    if (feedback_) {
      for (int64_t i = 0; i < n; ++i) x[i] += r[i];
    }
    const double density =
        WarmupDensity(spec_.strategy.density, spec_.strategy.warmup_epochs, step.epoch_clock);
    if (density >= kDenseAboveDensity) {
      if (feedback_) std::fill(r.begin(), r.end(), 0.0f);
      tally_.Add(4.0 * n, 4.0 * n);
      return comm_->AllReduceSum(x, gradients.size());
    }
    const int64_t k = kernels::DgcTargetCount(n, density);
    indices_.resize(k);
    values_.resize(k);
    kernels::TopKExact(x, n, k, indices_.data(), values_.data());
    if (feedback_) {
      r.assign(x, x + n);
      for (int32_t i : indices_) r[i] = 0.0f;
    }
    size_t block = 0;
    HPTRAIN_RETURN_IF_ERROR(SparseAllGatherSum(*comm_, indices_, values_, n, x, &block),
                            "top-k exchange of ", k, " of ", n, " elements");
    tally_.Add(4.0 * n, static_cast<double>(block));
    return absl::OkStatus();
  }

  StrategyStats stats() const override {
    StrategyStats s;
    s.compression_ratio = tally_.ratio();
    return s;
  }

 private:
  const job::JobSpec& spec_;
  comm::Communicator* comm_;
  bool feedback_ = true;
  std::vector<std::vector<float>> residual_;
  std::vector<float> values_;
  std::vector<int32_t> indices_;
  CompressionTally tally_;
};

}  // namespace

bool topk_registered = RegisterStrategy(
    "topk", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      HPTRAIN_RETURN_IF_ERROR(CheckDensity(*context.job));
      return std::make_unique<TopK>(context);
    });

}  // namespace hptrain::sync
