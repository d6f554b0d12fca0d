// localsgd: Local SGD (Lin et al., ICLR 2020; docs/algorithms.md §6) with a fixed interval H
// (`interval`, default 8). Every worker steps its own optimizer on its own mean gradient every
// step; every H steps the models are averaged. Momentum buffers stay local.
//
// The reducer scales the worker's summed gradient G_i by B / b_i, so that after the division by B
// (SummingReducer) the local optimizer sees G_i / b_i, the worker's mean gradient.
//
// The average is weighted by the samples each worker processed since the last one,
// w_i = Σ_h b_i,h / Σ_h B (1/N with equal batches). With plain SGD at H = 1 this gives
// x − η·Σ_i (b_i/B)·(G_i/b_i) = x − η·Σ_i G_i / B, SSGD's weighted aggregation, for any allocation;
// a plain mean would weight a worker with a small slice as much as one with a large one. Momentum
// and weight decay are linear, so at H = 1 the weighted mean of the local momenta follows SSGD's
// momentum too. The equality holds up to rounding only: the gradient is scaled by B / b_i and
// back, and parameters are averaged where SSGD sums gradients.
//
// Bytes per worker: one ring all-reduce of the parameters, 2(N−1)/N · 4P, every H steps.
// Synchronize (before every evaluation and checkpoint) averages as well, so both see one model;
// the interval then restarts. BatchNorm buffers are averaged by the trainer at every averaging
// (Average returns true) and every evaluation.
#include <algorithm>

#include "kernels/update/update.h"
#include "runtime/base/status.h"
#include "runtime/sync/registry.h"

namespace hptrain::sync {
namespace {

class LocalSgd : public Strategy, public SummingReducer, public ModelAverager {
 public:
  LocalSgd(comm::Communicator* comm, int interval) : comm_(comm), interval_(interval) {
    traits_ = DeclaredTraits(name());
  }

  std::string name() const override { return "localsgd"; }
  GradientReducer* reducer() override { return this; }
  ModelAverager* averager() override { return this; }

  absl::Status ReduceSum(const StepInfo& step, int, absl::Span<float> gradients) override {
    if (step.local_batch <= 0) {
      std::fill(gradients.begin(), gradients.end(), 0.0f);
    } else {
      kernels::Scale(gradients.data(), gradients.size(),
                     static_cast<float>(step.global_batch) / static_cast<float>(step.local_batch));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Average(const StepInfo& step, const ModelView& model) override {
    local_samples_ += step.local_batch;
    global_samples_ += step.global_batch;
    if (++steps_since_average_ < interval_) return false;
    HPTRAIN_RETURN_IF_ERROR(AverageNow(model.parameters));
    return true;
  }

  absl::Status Synchronize(int64_t, absl::Span<float> parameters) override {
    if (steps_since_average_ == 0) return absl::OkStatus();
    return AverageNow(parameters);
  }

  StrategyStats stats() const override {
    StrategyStats s;
    s.interval = interval_;
    return s;
  }

 private:
  absl::Status AverageNow(absl::Span<float> parameters) {
    const float weight =
        global_samples_ > 0
            ? static_cast<float>(static_cast<double>(local_samples_) / global_samples_)
            : 1.0f / static_cast<float>(comm_->size());
    kernels::Scale(parameters.data(), parameters.size(), weight);
    HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSum(parameters.data(), parameters.size()),
                            "averaging the models after ", steps_since_average_, " local steps");
    steps_since_average_ = 0;
    local_samples_ = 0;
    global_samples_ = 0;
    return absl::OkStatus();
  }

  comm::Communicator* comm_;
  const int interval_;
  int steps_since_average_ = 0;
  int64_t local_samples_ = 0;   // Σ b_i since the last average
  int64_t global_samples_ = 0;  // Σ B since the last average
};

}  // namespace

bool local_sgd_registered = RegisterStrategy(
    "localsgd", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      // localsgd's parameter (strategy_descriptors.cc): interval.
      return std::make_unique<LocalSgd>(context.comm,
                                        static_cast<int>(context.options->Int("interval")));
    });

}  // namespace hptrain::sync
