// dgc: Deep Gradient Compression (Lin et al., ICLR 2018; algorithms.md §6).
//
// Per bucket: momentum correction u = m·u + g, v = v + u (kernels/topk/dgc.h); a threshold from a
// 1 % sample of |v| selects between 0.8·k and 1.3·k entries (k = density · n); the selected
// (index, value) pairs go through the sparse all-gather and are summed on every worker; momentum
// factor masking clears u and v where sent. Every tensor is sparsified (the accumulation in v
// delivers small ones over a few steps). Because momentum happens here, the optimizer runs
// without momentum (applies_momentum). Warm-up: DGC's exponential density schedule over
// `warmupEpochs` (density_schedule.h); at density ≥ 0.5 v is all-reduced dense.
//
// Bytes per worker per step: about (N-1) · (8k + 32), k ≤ 1.3 · density · n.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/topk/dgc.h"
#include "kernels/topk/topk.h"
#include "runtime/base/status.h"
#include "runtime/sync/density_schedule.h"
#include "runtime/sync/registry.h"
#include "runtime/sync/sparse_allgather.h"

namespace hptrain::sync {
namespace {

class Dgc : public Strategy {
 public:
  explicit Dgc(const StrategyContext& context)
      : spec_(*context.job),
        comm_(context.comm),
        momentum_(static_cast<float>(context.job->optimizer.momentum)) {}
  std::string name() const override { return "dgc"; }
  bool applies_momentum() const override { return true; }

  absl::Status Init(const GradientLayout& layout) override {
    u_.resize(layout.buckets.size());
    v_.resize(layout.buckets.size());
    for (size_t k = 0; k < layout.buckets.size(); ++k) {
      u_[k].assign(layout.buckets[k].end - layout.buckets[k].begin, 0.0f);
      v_[k].assign(layout.buckets[k].end - layout.buckets[k].begin, 0.0f);
    }
    return absl::OkStatus();
  }

  absl::Status ReduceGradients(const StepInfo& step, int bucket,
                               absl::Span<float> gradients) override {
    const int64_t n = static_cast<int64_t>(gradients.size());
    std::vector<float>& u = u_[bucket];
    std::vector<float>& v = v_[bucket];
    kernels::DgcMomentumCorrection(gradients.data(), n, momentum_, u.data(), v.data());
    const double density =
        WarmupDensity(spec_.strategy.density, spec_.strategy.warmup_epochs, step.epoch_clock);
    if (density >= kDenseAboveDensity) {
      std::copy(v.begin(), v.end(), gradients.begin());
      std::fill(u.begin(), u.end(), 0.0f);
      std::fill(v.begin(), v.end(), 0.0f);
      tally_.Add(4.0 * n, 4.0 * n);
      return comm_->AllReduceSum(gradients.data(), gradients.size());
    }
    kernels::DgcThresholdOptions options;
    options.density = density;
    const kernels::ThresholdSelection selection =
        kernels::DgcSelect(v.data(), n, options, spec_.seed + bucket, step.step);
    indices_.resize(selection.count);
    values_.resize(selection.count);
    const int64_t count = kernels::PackSelection(v.data(), n, selection, indices_.data(),
                                                 values_.data(), selection.count);
    indices_.resize(count);
    values_.resize(count);
    kernels::DgcMaskSelected(indices_.data(), count, u.data(), v.data());
    size_t block = 0;
    HPTRAIN_RETURN_IF_ERROR(
        SparseAllGatherSum(*comm_, indices_, values_, n, gradients.data(), &block),
        "DGC exchange of ", count, " of ", n, " elements");
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
  float momentum_;
  std::vector<std::vector<float>> u_, v_;
  std::vector<float> values_;
  std::vector<int32_t> indices_;
  CompressionTally tally_;
};

}  // namespace

bool dgc_registered = RegisterStrategy(
    "dgc", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      HPTRAIN_RETURN_IF_ERROR(CheckDensity(*context.job));
      return std::make_unique<Dgc>(context);
    });

}  // namespace hptrain::sync
