// multistep: multi-step delayed parameter update (algorithms.md §3b, without the sub-tensor
// priority scheduler and with delay 0 only).
//
// The strategy owns the parameters (the trainer runs no optimizer) and keeps, beside the worker's
// model x_i (the trainer's flat parameters), the global model x̄ and global momentum m̄ (identical
// on every rank), the local momentum m_i and the accumulator A_i. One round of H steps:
//   1. At the round's first bucket, H is fixed: 1 during the first `warmupEpochs` epochs (SSGD),
//      else the current interval; so is the learning rate η, the one of the round's first step
//      (a schedule change inside a round takes effect at the next round).
//   2. Every step, ReduceGradients adds the worker's summed gradient G_i (b_i samples) to A_i.
//      Steps h < H then take a local step in AfterOptimizerStep on the mean gradient:
//      d = G_i/b_i + λ·x_i + μ·(x_i − x̄);  m_i = β·m_i + d;  x_i −= η·m_i.
//   3. At step H, ReduceGradients all-reduces each bucket of A_i as soon as backward produced it;
//      AfterOptimizerStep divides by B (Ā = Σ_i A_i / B, the weighted aggregation of DESIGN.md),
//      takes the delayed global step in PyTorch SGD order, m̄ = β·m̄ + (Ā + H·λ·x̄); x̄ −= η·m̄,
//      and corrects the local state: x_i ← x̄, m_i ← m̄.
// With H = 1 the round is exactly SSGD's step (same bucketed all-reduce, same division, same
// update kernel), bit for bit. Synchronize (before every evaluation and checkpoint) ends an open
// round early as a round of the h steps done, so evaluations and checkpoints see x̄.
//
// Interval: an integer `interval` is fixed. `interval: adaptive` (or unset) follows AdaComm at
// every epoch end: F_0 is the mean training loss of the last warm-up epoch (the first epoch
// without warm-up), F the loss smoothed by an EMA of 0.9, H = clamp(ceil(sqrt(F / F_0)·H_0),
// hMin, hMax) with H_0 = 8; the new H applies from the next round.
//
// Bytes per worker: one ring all-reduce of 4P bytes per round, 2(N−1)/N · 4P / H per step; the
// adaptive interval reads the epoch loss the trainer already all-reduced, at no extra bytes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/update/update.h"
#include "runtime/base/status.h"
#include "runtime/sync/registry.h"

namespace hptrain::sync {
namespace {

constexpr double kLossEma = 0.9;

class Multistep : public Strategy {
 public:
  explicit Multistep(const StrategyContext& context)
      : comm_(context.comm), spec_(*context.job) {
    const job::StrategySpec& s = spec_.strategy;
    adaptive_ = s.interval == 0;
    h_min_ = s.h_min > 0 ? s.h_min : job::kMultistepHMin;
    h_max_ = s.h_max > 0 ? s.h_max : job::kMultistepHMax;
    interval_ = adaptive_ ? std::clamp(job::kMultistepH0, h_min_, h_max_) : s.interval;
    h0_ = interval_;
  }

  std::string name() const override { return "multistep"; }
  bool owns_parameters() const override { return true; }

  absl::Status Init(const GradientLayout& layout) override {
    buckets_ = layout.buckets;
    // Buckets come in backward's order (the last layers' first), so the flat size is the
    // largest end, not the last bucket's.
    size_t n = 0;
    for (const auto& bucket : buckets_) n = std::max(n, bucket.end);
    global_.assign(n, 0.0f);
    global_momentum_.assign(n, 0.0f);
    accumulator_.assign(n, 0.0f);
    gradient_.assign(n, 0.0f);
    if (spec_.optimizer.momentum != 0.0) local_momentum_.assign(n, 0.0f);
    return absl::OkStatus();
  }

  absl::Status Start(absl::Span<float> parameters, int64_t,
                     const CheckpointSections& restored) override {
    if (parameters.size() != global_.size()) {
      return absl::InternalError(absl::StrCat("multistep: ", parameters.size(),
                                              " parameters, the layout has ", global_.size()));
    }
    std::copy(parameters.begin(), parameters.end(), global_.begin());
    auto momentum = restored.find("multistep.momentum");
    if (momentum != restored.end()) {
      if (momentum->second.size() != global_momentum_.size()) {
        return absl::FailedPreconditionError(
            "checkpoint section multistep.momentum does not match this model");
      }
      global_momentum_ = momentum->second;
      momentum_started_ = true;
    }
    auto state = restored.find("multistep.state");
    if (state != restored.end() && state->second.size() == 4) {
      interval_ = static_cast<int>(state->second[0]);
      have_f0_ = state->second[1] != 0.0f;
      f0_ = state->second[2];
      loss_ema_ = state->second[3];
    }
    if (!local_momentum_.empty()) local_momentum_ = global_momentum_;
    return absl::OkStatus();
  }

  absl::Status ReduceGradients(const StepInfo& step, int bucket,
                               absl::Span<float> gradients) override {
    if (bucket == 0 && done_in_round_ == 0) {  // a round starts
      warmup_ = step.epoch_clock < spec_.strategy.warmup_epochs;
      round_length_ = warmup_ ? 1 : interval_;
      round_lr_ = step.lr;
    }
    const size_t begin = buckets_[bucket].begin;
    float* a = accumulator_.data() + begin;
    if (done_in_round_ == 0) {
      std::memcpy(a, gradients.data(), gradients.size() * sizeof(float));
    } else {
      for (size_t i = 0; i < gradients.size(); ++i) a[i] += gradients[i];
    }
    if (done_in_round_ + 1 < round_length_) {  // a local step follows
      std::memcpy(gradient_.data() + begin, gradients.data(), gradients.size() * sizeof(float));
      return absl::OkStatus();
    }
    return Annotate(comm_->AllReduceSum(a, gradients.size()),
                    absl::StrCat("multistep round all-reduce, bucket ", bucket));
  }

  absl::Status AfterOptimizerStep(const StepInfo& step, absl::Span<float> parameters) override {
    round_batch_ = step.global_batch;
    // A round of local steps ends here; a warm-up round (one SSGD step) keeps ssgd's buffers.
    synchronized_ = ++done_in_round_ == round_length_ && round_length_ > 1;
    if (done_in_round_ == round_length_) return GlobalUpdate(parameters);
    LocalStep(step.local_batch, parameters);
    return absl::OkStatus();
  }

  bool synchronized_models() const override { return synchronized_; }

  absl::Status Synchronize(int64_t, absl::Span<float> parameters) override {
    if (done_in_round_ == 0) return absl::OkStatus();
    for (size_t k = 0; k < buckets_.size(); ++k) {
      HPTRAIN_RETURN_IF_ERROR(
          comm_->AllReduceSum(accumulator_.data() + buckets_[k].begin,
                              buckets_[k].end - buckets_[k].begin),
          "multistep: all-reduce of a round ended after ", done_in_round_, " steps, bucket ", k);
    }
    return GlobalUpdate(parameters);
  }

  absl::Status OnEpochEnd(const EpochTiming& timing) override {
    if (!adaptive_ || timing.epoch + 1 < spec_.strategy.warmup_epochs) return absl::OkStatus();
    // EpochTiming::train_loss is the mean over all ranks, the same on each: every rank takes
    // the same decision without a collective of its own.
    const double loss = timing.train_loss;
    if (!std::isfinite(loss)) return absl::OkStatus();  // keep H; the run is diverging anyway
    if (!have_f0_) {
      have_f0_ = true;
      f0_ = loss;
      loss_ema_ = loss;
      return absl::OkStatus();
    }
    loss_ema_ = kLossEma * loss_ema_ + (1.0 - kLossEma) * loss;
    if (f0_ <= 0) return absl::OkStatus();
    // The 1e-9 keeps a constant loss at H_0 despite the EMA's rounding (ceil(8.0000000001) = 9).
    const double h = std::ceil(std::sqrt(loss_ema_ / f0_) * h0_ - 1e-9);
    interval_ = static_cast<int>(std::clamp(h, static_cast<double>(h_min_),
                                            static_cast<double>(h_max_)));
    return absl::OkStatus();
  }

  absl::Status SaveState(int64_t, CheckpointSections* sections) override {
    (*sections)["multistep.momentum"] = global_momentum_;
    (*sections)["multistep.state"] = {static_cast<float>(interval_), have_f0_ ? 1.0f : 0.0f,
                                      static_cast<float>(f0_), static_cast<float>(loss_ema_)};
    return absl::OkStatus();
  }

  StrategyStats stats() const override {
    StrategyStats s;
    s.interval = warmup_ ? 1 : interval_;
    return s;
  }

 private:
  void LocalStep(int local_batch, absl::Span<float> x) {
    const float inv = local_batch > 0 ? 1.0f / static_cast<float>(local_batch) : 0.0f;
    const float mu = static_cast<float>(spec_.strategy.mu);
    for (size_t i = 0; i < gradient_.size(); ++i) {
      gradient_[i] *= inv;
      if (mu != 0.0f) gradient_[i] += mu * (x[i] - global_[i]);
    }
    kernels::SgdStep(x.data(), gradient_.data(),
                     local_momentum_.empty() ? nullptr : local_momentum_.data(), x.size(),
                     UpdateParams(1.0));
  }

  // The delayed global step on the all-reduced accumulator of the `done_in_round_` steps, then
  // the correction x_i ← x̄, m_i ← m̄.
  absl::Status GlobalUpdate(absl::Span<float> x) {
    kernels::Scale(accumulator_.data(), accumulator_.size(),
                   1.0f / static_cast<float>(round_batch_));
    kernels::SgdParams p = UpdateParams(done_in_round_);
    p.first_step = !momentum_started_;
    kernels::SgdStep(global_.data(), accumulator_.data(),
                     global_momentum_.empty() ? nullptr : global_momentum_.data(), global_.size(),
                     p);
    momentum_started_ = true;
    std::copy(global_.begin(), global_.end(), x.begin());
    if (!local_momentum_.empty()) local_momentum_ = global_momentum_;
    done_in_round_ = 0;
    return absl::OkStatus();
  }

  // The job's SGD with weight decay `steps`·λ (the global step covers that many local steps).
  kernels::SgdParams UpdateParams(double steps) const {
    kernels::SgdParams p;
    p.lr = static_cast<float>(round_lr_);
    p.momentum = static_cast<float>(spec_.optimizer.momentum);
    p.weight_decay = static_cast<float>(steps * spec_.optimizer.weight_decay);
    p.nesterov = spec_.optimizer.nesterov;
    return p;
  }

  comm::Communicator* comm_;
  const job::JobSpec& spec_;
  bool adaptive_ = false;
  int h_min_ = 1;
  int h_max_ = 1;
  int h0_ = 1;
  int interval_ = 1;  // H of the next round outside warm-up

  std::vector<GradientLayout::Range> buckets_;
  std::vector<float> global_;           // x̄
  std::vector<float> global_momentum_;  // m̄
  std::vector<float> local_momentum_;   // m_i (empty without momentum)
  std::vector<float> accumulator_;      // A_i, all-reduced in the round's last step
  std::vector<float> gradient_;         // this step's G_i, for the local step
  bool momentum_started_ = false;       // m̄ has had a first step (torch: buf = d at first)

  // The round in progress. Written by ReduceGradients (communicator thread) at the round's
  // first bucket and by AfterOptimizerStep (trainer thread); the reducer's step hand-off
  // orders the two.
  bool warmup_ = false;
  int round_length_ = 1;
  int done_in_round_ = 0;
  bool synchronized_ = false;  // the last AfterOptimizerStep ended a round of local steps
  double round_lr_ = 0;
  int round_batch_ = 0;

  // AdaComm.
  bool have_f0_ = false;
  double f0_ = 0;
  double loss_ema_ = 0;
};

}  // namespace

bool multistep_registered = RegisterStrategy(
    "multistep", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      const job::JobSpec& spec = *context.job;
      if (spec.optimizer.type != "sgd") {
        return absl::InvalidArgumentError(absl::StrCat(
            "spec.optimizer.type: strategy multistep takes optimizer sgd, got ",
            spec.optimizer.type));
      }
      if (spec.strategy.delay != 0) {
        return absl::UnimplementedError("spec.strategy.delay: only 0 is supported yet");
      }
      return std::make_unique<Multistep>(context);
    });

}  // namespace hptrain::sync
