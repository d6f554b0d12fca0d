// multistep: multi-step delayed parameter update (docs/algorithms.md §3b), with delay 0 or 1, an
// optionally compressed round all-reduce, and the sub-tensor priority scheduler (uncompressed,
// delay 0; see StrategyTraits::supports_scheduler below).
//
// The strategy is an updater (updater.h: the trainer runs no optimizer) and keeps, beside the
// worker's model x_i (the trainer's flat parameters), the global model x̄ and global momentum m̄
// (identical on every rank), the local momentum m_i and the accumulator A_i. One round of H steps:
//   1. At the round's first bucket, H is fixed: 1 during the first `warmupEpochs` epochs (SSGD),
//      else the current interval; so is the learning rate η, the one of the round's first step
//      (a schedule change inside a round takes effect at the next round).
//   2. `update: average` (the default; docs/algorithms.md §3b's "standard local-SGD averaging"),
//      a round of H ≥ 2 steps: every step is a local step in Update on the worker's mean gradient,
//      d = G_i/b_i + λ·x_i + μ·(x_i − x̄);  m_i = β·m_i + d;  x_i −= η·m_i.
//      After the H-th, the models are averaged with the weights of the samples each worker took
//      (w_i = Σ_h b_i,h / Σ_h B_h, the weighted aggregation of docs/design.md): the round
//      all-reduce carries A_i = w_i·(x̄ − x_i), then x̄ −= Σ_i A_i, the global momentum becomes
//      the round's mean velocity m̄ = Σ_i A_i / (η·H) (one step's units), and the correction
//      x_i ← x̄, m_i ← m̄ follows. A round of one step (warm-up, interval 1, an adaptive interval
//      of 1) is the delayed round below with H = 1: SSGD's step on m̄.
//   3. `update: delayed` (and every round with H = 1, and every round with delay 1): every step,
//      Accumulate adds the worker's summed gradient G_i (b_i samples) to A_i; steps h < H take the
//      local step above. At step H, Accumulate all-reduces each bucket of A_i as soon as backward
//      produced it; Update divides by B (Ā = Σ_i A_i / B), takes the delayed global step in
//      PyTorch SGD order, m̄ = β·m̄ + (Ā + H·λ·x̄); x̄ −= η·m̄, and corrects: x_i ← x̄, m_i ← m̄.
// With H = 1 (and no compression) the round is exactly SSGD's step (same bucketed all-reduce,
// same division, same update kernel), bit for bit. Synchronize (before every evaluation and
// checkpoint) ends an open round early as a round of the h steps done, so evaluations and
// checkpoints see x̄. BatchNorm buffers are averaged by the trainer at the end of every round of
// local steps with delay 0 (Update returns true) and at every evaluation.
//
// Why average by default: on the 1.3 M-parameter MLP (Fashion-MNIST, 4 workers, batch 512,
// lr 0.1, 2 epochs) the delayed global step ends at 81.1 % against ssgd's 85.5 % and averaging
// at 86.4 %, with the same bytes (docs/algorithms.md §3g has the figures).
//
// Interval: an integer `interval` is fixed. `interval: adaptive` (or unset) follows AdaComm at
// every epoch end: F_0 is the mean training loss of the last warm-up epoch (the first epoch
// without warm-up), F the loss smoothed by an EMA of 0.9, H = clamp(ceil(sqrt(F / F_0)·H_0),
// hMin, hMax) with H_0 = 8; the new H applies from the next round.
//
// Delay 1 (`delay: 1`, SSD-SGD's overlap, docs/algorithms.md §3b "Optional delay D = 1"), outside
// warm-up: at step H of round r backward all-reduces nothing; Update hands A_r to a
// thread of the strategy, which all-reduces it on the same Communicator while round r+1 starts
// at once from the worker's current x_i (no correction). The communicator is free for it then:
// Accumulate issues no collective during a round, a delayed round never reports a
// synchronization (so the trainer averages no buffers), and the trainer calls Synchronize
// before any collective of its own (evaluations, checkpoints, the epoch loss). At the END of
// round r+1 (a fixed step, the same on every rank, never "whenever it lands") the worker waits
// for Ā_r, takes the global step with it exactly as delay 0 does (round r's H, η and B), rebases
// x_i ← x̄ + (x_i − x_i^{start of r+1}) and m_i ← m̄, and starts the all-reduce of A_{r+1}. The
// first delayed round (after warm-up or a Synchronize) has nothing to wait for at its end: it only
// starts its exchange. Synchronize drains: it waits for and applies the pending round, all-reduces
// and applies the open one, then x_i ← x̄, m_i ← m̄ on every rank. A failed background all-reduce
// is reported at the next wait, naming its round. Checkpoints follow a Synchronize, so nothing is
// in flight when one is written and the sections below suffice; a resumed run restarts the
// pipeline as the original did after that Synchronize.
//
// Compression (`compression: {type: quantized, bits: b}` or `{type: fp16}`): the round-end
// all-reduce of A_i goes through the compressed ring (Communicator::AllReduceSumCompressed) with
// the quantized and fp16 strategies' codecs and their defaults: one codec per reducer bucket,
// error feedback on (a round's encoding error is added to the next round's accumulator),
// quantization buckets of 512 elements with stochastic rounding keyed by the job seed, the
// bucket, the rank and the step. Every round-end all-reduce is compressed, including the warm-up
// steps (rounds of H = 1: a warm-up step is then the quantized strategy's step bit for bit, not
// ssgd's), delay 1's background exchange and the short round Synchronize ends. Nothing else is:
// the trainer's loss and buffer all-reduces stay fp32. stats() reports b (16 for fp16, 32 without
// compression) and the accumulator's fp32 bytes over its encoding's as the compression ratio.
//
// Bytes per worker: one ring all-reduce of 4P bytes per round, 2(N−1)/N · 4P / H per step, for
// either delay; compressed, 2(N−1)/N · EncodedBytes of each bucket per round (chunk rounding
// aside: each rank sends all but one of the N ring chunks in each of the two passes). The
// adaptive interval reads the epoch loss the trainer already all-reduced, at no extra bytes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/update/update.h"
#include "runtime/base/status.h"
#include "runtime/optim/optimizer.h"
#include "runtime/sync/codecs/half_codec.h"
#include "runtime/sync/codecs/quantize_codec.h"
#include "runtime/sync/registry.h"

namespace hptrain::sync {
namespace {

constexpr double kLossEma = 0.9;
// The quantized strategy's defaults, so that a compressed warm-up step is its step.
constexpr int64_t kQuantizationBucket = 512;

// How the round all-reduce travels: 32 = fp32, 16 = fp16, 1..8 = quantized.
struct Compression {
  int bits = 32;
};

struct MultistepOptions {
  bool adaptive = true;  // interval: adaptive (AdaComm)
  int interval = 0;      // the fixed interval when not adaptive
  int h_min = 1;         // bounds of the adaptive interval
  int h_max = 32;
  double warmup_epochs = 0;
  double mu = 0;        // proximal correction
  int delay = 0;        // 0 or 1
  bool average = true;  // update: average (local-SGD averaging) or delayed
  Compression compression;
};

// One round of local steps, and what its global step needs once A is all-reduced.
struct Round {
  int64_t index = 0;           // rounds started since Start, for messages
  int64_t first_step = 0;      // global step of its first step
  int length = 1;              // H
  int done = 0;                // steps taken so far
  double lr = 0;               // η of its first step
  int batch = 0;               // B of its last step
  bool warmup = false;         // an SSGD step of the warm-up
  bool delayed = false;        // delay 1: all-reduced in the background during the next round
  bool average = false;        // update average: every step local, the models averaged at its end
  int64_t local_samples = 0;   // Σ b_i over its steps (the averaging weight's numerator)
  int64_t global_samples = 0;  // Σ B over its steps
};

class Multistep : public Strategy, public Updater {
 public:
  Multistep(const StrategyContext& context, const MultistepOptions& options)
      : comm_(context.comm),
        seed_(context.seed),
        optimizer_(context.optimizer),
        options_(options),
        compression_(options.compression) {
    traits_ = DeclaredTraits(name());
    // The scheduler runs a round's uncompressed all-reduce, delay 0 (see PlanScheduledStep).
    traits_.supports_scheduler = options.delay == 0 && options.compression.bits == 32;
    adaptive_ = options.adaptive;
    h_min_ = options.h_min;
    h_max_ = options.h_max;
    interval_ = adaptive_ ? std::clamp(job::kMultistepH0, h_min_, h_max_) : options.interval;
    h0_ = interval_;
  }

  // A background exchange still running (a run that ended on an error) must not outlive the
  // buffers it writes.
  ~Multistep() override {
    if (exchange_.joinable()) exchange_.join();
  }

  std::string name() const override { return "multistep"; }
  Updater* updater() override { return this; }

  absl::Status Init(const GradientLayout& layout) override {
    buckets_ = layout.buckets;
    // Buckets come in backward's order (the last layers' first), so the flat size is the
    // largest end, not the last bucket's.
    size_t n = 0;
    for (const auto& bucket : buckets_) n = std::max(n, bucket.end);
    global_.assign(n, 0.0f);
    accumulator_.assign(n, 0.0f);
    gradient_.assign(n, 0.0f);
    // The job's SGD twice: the global step on x̄ with m̄, the local steps on x_i with m_i. m_i
    // continues from zero, later from m̄, and never takes torch's first step (buf = d): its
    // optimizer counts as one step taken from the start.
    global_optimizer_ = std::make_unique<optim::Optimizer>(optimizer_, n);
    local_optimizer_ = std::make_unique<optim::Optimizer>(optimizer_, n);
    local_optimizer_->set_steps(1);
    global_momentum_ = global_optimizer_->StateVector("momentum");
    local_momentum_ = local_optimizer_->StateVector("momentum");
    if (options_.delay == 1) {
      pending_accumulator_.assign(n, 0.0f);
      round_start_.assign(n, 0.0f);
    }
    for (size_t k = 0; k < buckets_.size(); ++k) {
      const size_t size = buckets_[k].end - buckets_[k].begin;
      if (compression_.bits == 16) {
        halves_.push_back(std::make_unique<HalfCodec>(size));
      } else if (compression_.bits < 16) {
        quantizers_.push_back(std::make_unique<QuantizeCodec>(
            compression_.bits, kQuantizationBucket, size, seed_ + k, comm_->rank()));
      }
    }
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
      if (momentum->second.size() != global_.size()) {
        return absl::FailedPreconditionError(
            "checkpoint section multistep.momentum does not match this model");
      }
      if (global_momentum_ != nullptr) *global_momentum_ = momentum->second;
      global_optimizer_->set_steps(1);  // m̄ has had its first step
    }
    auto state = restored.find("multistep.state");
    if (state != restored.end() && state->second.size() == 4) {
      interval_ = static_cast<int>(state->second[0]);
      have_f0_ = state->second[1] != 0.0f;
      f0_ = state->second[2];
      loss_ema_ = state->second[3];
    }
    if (local_momentum_ != nullptr) *local_momentum_ = *global_momentum_;
    return absl::OkStatus();
  }

  std::shared_ptr<comm::Work> Accumulate(const StepInfo& step, int bucket,
                                         const comm::BufferRef& gradients) override {
    return comm::Work::Done(
        AccumulateBucket(step, bucket, absl::MakeSpan(gradients.floats(), gradients.count)));
  }

  absl::Status AccumulateBucket(const StepInfo& step, int bucket, absl::Span<float> gradients) {
    if (bucket == 0 && round_.done == 0) StartRound(step);
    const size_t begin = buckets_[bucket].begin;
    if (round_.average) {  // every step of the round is local; Update exchanges the models
      std::memcpy(gradient_.data() + begin, gradients.data(), gradients.size() * sizeof(float));
      return absl::OkStatus();
    }
    float* a = accumulator_.data() + begin;
    if (round_.done == 0) {
      std::memcpy(a, gradients.data(), gradients.size() * sizeof(float));
    } else {
      for (size_t i = 0; i < gradients.size(); ++i) a[i] += gradients[i];
    }
    if (round_.done + 1 < round_.length) {  // a local step follows
      std::memcpy(gradient_.data() + begin, gradients.data(), gradients.size() * sizeof(float));
      return absl::OkStatus();
    }
    // The round's last step. Delay 1 all-reduces in the background from Update on.
    if (round_.delayed) return absl::OkStatus();
    double wire = 0;
    HPTRAIN_RETURN_IF_ERROR(ReduceBucket(accumulator_.data(), bucket, step.step, &wire),
                            "multistep round all-reduce, bucket ", bucket);
    tally_.Add(4.0 * gradients.size(), wire);
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Update(const StepInfo& step, absl::Span<float> parameters) override {
    round_.batch = step.global_batch;
    if (round_.average) {
      ++round_.done;
      round_.local_samples += step.local_batch;
      round_.global_samples += step.global_batch;
      local_optimizer_->BeginStep();
      LocalStep(gradient_.data(), step.local_batch, round_.lr, parameters, 0, parameters.size());
      if (round_.done < round_.length) return false;
      HPTRAIN_RETURN_IF_ERROR(AverageRound(step.step, parameters));
      return true;
    }
    if (++round_.done < round_.length) {
      local_optimizer_->BeginStep();
      LocalStep(gradient_.data(), step.local_batch, round_.lr, parameters, 0, parameters.size());
      return false;
    }
    if (round_.delayed) {
      HPTRAIN_RETURN_IF_ERROR(EndDelayedRound(step.step, parameters));
      return false;
    }
    // A round of local steps ends here; a warm-up round (one SSGD step) keeps ssgd's buffers.
    GlobalStep(accumulator_, round_);
    Correct(parameters);
    return round_.length > 1;
  }

  // The priority scheduler (uncompressed, delay 0): a round's last step all-reduces A_i layer
  // by layer, and each layer takes its global step and correction as soon as its chunks are in;
  // a local step updates each layer as soon as backward has produced it. Every update is
  // element-wise, so a round gives what the bucketed path gives from the same sums.
  ScheduledStep PlanScheduledStep(const StepInfo& step, float*) override {
    if (round_.done == 0) StartRound(step);
    round_.batch = step.global_batch;
    ++round_.done;
    if (round_.average) {
      round_.local_samples += step.local_batch;
      round_.global_samples += step.global_batch;
    }
    scheduled_round_ = round_;
    ScheduledStep plan;
    plan.synchronizes = ScheduledLast() && round_.length > 1;
    if (ScheduledLast()) {
      // The step's layers finish on the scheduler thread; the trainer waits for them before
      // anything reads the round (Synchronize, the next plan). An averaged round's last step is
      // local too (PrepareRange takes it before the layer's exchange).
      if (round_.average) {
        local_optimizer_->BeginStep();
        BeginAverage();
      } else {
        global_optimizer_->BeginStep();
      }
      round_.done = 0;
    } else {
      local_optimizer_->BeginStep();
    }
    plan.exchange = ScheduledLast() ? accumulator_.data() : nullptr;
    return plan;
  }

  absl::Status PrepareRange(const StepInfo& step, size_t begin, size_t end,
                            const float* gradients) override {
    if (scheduled_round_.average) {
      if (!ScheduledLast()) return absl::OkStatus();  // FinishRange takes the local step
      // The round's last local step on this layer, then its displacement for the exchange. The
      // model is the span an earlier step of the round finished (a round averages after two
      // steps or more); the next forward reads this layer only once FinishRange is done.
      LocalStep(gradients, step.local_batch, scheduled_round_.lr, scheduled_parameters_, begin,
                end);
      Displace(scheduled_round_, scheduled_parameters_, begin, end);
      return absl::OkStatus();
    }
    float* a = accumulator_.data();
    if (scheduled_round_.done == 1) {  // the round's first step
      std::memcpy(a + begin, gradients + begin, (end - begin) * sizeof(float));
    } else {
      for (size_t i = begin; i < end; ++i) a[i] += gradients[i];
    }
    return absl::OkStatus();
  }

  absl::Status FinishRange(const StepInfo& step, size_t begin, size_t end,
                           const float* gradients, absl::Span<float> parameters) override {
    scheduled_parameters_ = parameters;
    if (!ScheduledLast()) {
      LocalStep(gradients, step.local_batch, scheduled_round_.lr, parameters, begin, end);
      return absl::OkStatus();
    }
    if (scheduled_round_.average) {
      AverageRange(scheduled_round_, begin, end);
      Correct(parameters, begin, end);
      return absl::OkStatus();
    }
    GlobalStepRange(accumulator_, scheduled_round_, begin, end);
    Correct(parameters, begin, end);
    return absl::OkStatus();
  }

  absl::Status Synchronize(int64_t steps_done, absl::Span<float> parameters) override {
    const bool drained = pending_;
    if (pending_) {
      HPTRAIN_RETURN_IF_ERROR(FinishExchange(), "multistep before step ", steps_done);
      GlobalStep(pending_accumulator_, pending_round_);
    }
    if (round_.done > 0 && round_.average) {
      return Annotate(AverageRound(steps_done - 1, parameters),
                      absl::StrCat("multistep: a round ended after ", round_.done, " steps"));
    }
    if (round_.done > 0) {
      double wire = 0;
      for (size_t k = 0; k < buckets_.size(); ++k) {
        // Keyed by the step the round's last gradient came from, as a full round's would be.
        HPTRAIN_RETURN_IF_ERROR(
            ReduceBucket(accumulator_.data(), k, steps_done - 1, &wire),
            "multistep: all-reduce of a round ended after ", round_.done, " steps, bucket ", k);
      }
      tally_.Add(4.0 * accumulator_.size(), wire);
      GlobalStep(accumulator_, round_);
    } else if (!drained) {
      return absl::OkStatus();  // x_i is x̄ already
    }
    Correct(parameters);
    return absl::OkStatus();
  }

  absl::Status OnEpochEnd(const EpochTiming& timing) override {
    if (!adaptive_ || timing.epoch + 1 < options_.warmup_epochs) return absl::OkStatus();
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
    // Without momentum the section keeps its size (zeros), as the format always had.
    (*sections)["multistep.momentum"] =
        global_momentum_ != nullptr ? *global_momentum_ : std::vector<float>(global_.size(), 0.0f);
    (*sections)["multistep.state"] = {static_cast<float>(interval_), have_f0_ ? 1.0f : 0.0f,
                                      static_cast<float>(f0_), static_cast<float>(loss_ema_)};
    return absl::OkStatus();
  }

  StrategyStats stats() const override {
    StrategyStats s;
    s.interval = round_.warmup ? 1 : interval_;
    s.bits = compression_.bits;
    s.compression_ratio = tally_.ratio();
    return s;
  }

 private:
  void StartRound(const StepInfo& step) {
    round_.index = rounds_started_++;
    round_.first_step = step.step;
    round_.warmup = step.epoch_clock < options_.warmup_epochs;
    round_.length = round_.warmup ? 1 : interval_;
    round_.delayed = !round_.warmup && options_.delay == 1;
    round_.lr = step.lr;
    round_.average = options_.average && !round_.warmup && round_.length > 1 && !round_.delayed;
    round_.local_samples = 0;
    round_.global_samples = 0;
  }

  // Update average, a round ends: x̄ ← Σ_i w_i·x_i with w_i = Σ_h b_i,h / Σ_h B_h, exchanged as
  // the weighted displacements w_i·(x̄ − x_i) in the round all-reduce (encoded as the job's
  // compression says), then m̄ ← (x̄_old − x̄)/(η·h) and the correction x_i ← x̄, m_i ← m̄.
  absl::Status AverageRound(int64_t last_step, absl::Span<float> x) {
    Displace(round_, x, 0, x.size());
    double wire = 0;
    for (size_t k = 0; k < buckets_.size(); ++k) {
      HPTRAIN_RETURN_IF_ERROR(ReduceBucket(accumulator_.data(), k, last_step, &wire),
                              "multistep model average, bucket ", k);
    }
    tally_.Add(4.0 * accumulator_.size(), wire);
    BeginAverage();
    AverageRange(round_, 0, x.size());
    Correct(x);
    return absl::OkStatus();
  }

  // This worker's weighted displacement w_i·(x̄ − x_i) on [begin, end) into the accumulator.
  void Displace(const Round& round, absl::Span<const float> x, size_t begin, size_t end) {
    const double weight = round.global_samples > 0
                              ? static_cast<double>(round.local_samples) /
                                    static_cast<double>(round.global_samples)
                              : 1.0 / comm_->size();
    const float w = static_cast<float>(weight);
    float* a = accumulator_.data();
    for (size_t i = begin; i < end; ++i) a[i] = w * (global_[i] - x[i]);
  }

  // m̄ is about to be written from an average: it counts as a momentum buffer that has had its
  // first step (a later round of one step continues it).
  void BeginAverage() {
    if (global_optimizer_->steps() < 1) global_optimizer_->set_steps(1);
  }

  // The average on [begin, end), the displacements all-reduced: x̄ −= Σ_i w_i·(x̄ − x_i), and the
  // global momentum becomes the mean velocity of the round, m̄ = that step / (η·h), in the
  // units of one step's momentum: a round of one step that follows continues SSGD's momentum.
  void AverageRange(const Round& round, size_t begin, size_t end) {
    const float* a = accumulator_.data();
    for (size_t i = begin; i < end; ++i) global_[i] -= a[i];
    const double scale = round.lr * round.done;
    if (global_momentum_ == nullptr || !(scale > 0)) return;  // η = 0: m̄ keeps its value
    const float inv = static_cast<float>(1.0 / scale);
    std::vector<float>& m = *global_momentum_;
    for (size_t i = begin; i < end; ++i) m[i] = a[i] * inv;
  }

  // The local step on elements [begin, end) from the summed gradients `g` (gradient_ itself
  // or the trainer's buffer): d = g/b_i + μ·(x_i − x̄), then the job's SGD with λ, the step
  // begun (local_optimizer_->BeginStep) already.
  void LocalStep(const float* g, int local_batch, double lr, absl::Span<float> x, size_t begin,
                 size_t end) {
    const float inv = local_batch > 0 ? 1.0f / static_cast<float>(local_batch) : 0.0f;
    const float mu = static_cast<float>(options_.mu);
    for (size_t i = begin; i < end; ++i) {
      gradient_[i] = g[i] * inv;
      if (mu != 0.0f) gradient_[i] += mu * (x[i] - global_[i]);
    }
    local_optimizer_->StepRange(x.data(), gradient_.data(), begin, end, lr);
  }

  // All-reduces bucket k of `accumulator` in place, encoded as the job's compression says, and
  // adds the bytes of its encoding to *wire.
  absl::Status ReduceBucket(float* accumulator, size_t k, int64_t step, double* wire) {
    const size_t begin = buckets_[k].begin;
    const size_t n = buckets_[k].end - begin;
    float* a = accumulator + begin;
    if (!quantizers_.empty()) {
      QuantizeCodec& q = *quantizers_[k];
      q.set_step(step);
      HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSumCompressed(a, n, q), "quantized at ", q.bits(),
                              " bits");
      *wire += static_cast<double>(q.EncodedBytes(n));
    } else if (!halves_.empty()) {
      HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSumCompressed(a, n, *halves_[k]), "fp16");
      *wire += static_cast<double>(halves_[k]->EncodedBytes(n));
    } else {
      HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSum(a, n));
      *wire += 4.0 * static_cast<double>(n);
    }
    return absl::OkStatus();
  }

  // The delayed global step on the all-reduced accumulator of `round`'s `done` steps.
  void GlobalStep(std::vector<float>& accumulator, const Round& round) {
    global_optimizer_->BeginStep();
    GlobalStepRange(accumulator, round, 0, global_.size());
  }

  // The same on elements [begin, end), the step begun (BeginStep) already. The job's SGD at
  // the round's rate with weight decay done·λ (a global step covers that many local steps).
  void GlobalStepRange(std::vector<float>& accumulator, const Round& round, size_t begin,
                       size_t end) {
    kernels::Scale(accumulator.data() + begin, end - begin,
                   1.0f / static_cast<float>(round.batch));
    global_optimizer_->StepRange(global_.data(), accumulator.data(), begin, end, round.lr,
                                 round.done);
  }

  // The parameter correction x_i ← x̄, m_i ← m̄; the next step starts a round.
  void Correct(absl::Span<float> x) {
    Correct(x, 0, x.size());
    round_.done = 0;
  }

  void Correct(absl::Span<float> x, size_t begin, size_t end) {
    std::copy(global_.begin() + begin, global_.begin() + end, x.begin() + begin);
    if (local_momentum_ != nullptr) {
      std::copy(global_momentum_->begin() + begin, global_momentum_->begin() + end,
                local_momentum_->begin() + begin);
    }
  }

  // Delay 1, round r+1 ends: apply round r's exchange and rebase onto it, then start this
  // round's exchange in the background.
  absl::Status EndDelayedRound(int64_t last_step, absl::Span<float> x) {
    if (pending_) {
      HPTRAIN_RETURN_IF_ERROR(FinishExchange(), "multistep at the end of round ", round_.index);
      GlobalStep(pending_accumulator_, pending_round_);
      // Keep this round's drift: its gradients are in A_{r+1}, whose global step comes next.
      for (size_t i = 0; i < x.size(); ++i) x[i] = global_[i] + (x[i] - round_start_[i]);
      if (local_momentum_ != nullptr) *local_momentum_ = *global_momentum_;
    }
    accumulator_.swap(pending_accumulator_);
    pending_round_ = round_;
    round_.done = 0;
    std::copy(x.begin(), x.end(), round_start_.begin());
    LaunchExchange(last_step);
    return absl::OkStatus();
  }

  // All-reduces pending_accumulator_ on exchange_, the only user of the communicator and the
  // codecs until FinishExchange joins it.
  void LaunchExchange(int64_t step) {
    pending_ = true;
    exchange_wire_ = 0;
    exchange_ = std::thread([this, step] {
      absl::Status status;
      for (size_t k = 0; k < buckets_.size() && status.ok(); ++k) {
        status = Annotate(ReduceBucket(pending_accumulator_.data(), k, step, &exchange_wire_),
                          absl::StrCat("bucket ", k));
      }
      exchange_status_ = std::move(status);
    });
  }

  absl::Status FinishExchange() {
    exchange_.join();
    pending_ = false;
    tally_.Add(4.0 * pending_accumulator_.size(), exchange_wire_);
    return Annotate(exchange_status_,
                    absl::StrCat("all-reduce of round ", pending_round_.index, " (steps ",
                                 pending_round_.first_step, " to ",
                                 pending_round_.first_step + pending_round_.done - 1,
                                 ") in the background"));
  }

  comm::Communicator* comm_;
  const uint64_t seed_;                      // spec.seed
  const optim::OptimizerOptions optimizer_;  // spec.optimizer: both SGDs
  const MultistepOptions options_;
  const Compression compression_;
  bool adaptive_ = false;
  int h_min_ = 1;
  int h_max_ = 1;
  int h0_ = 1;
  int interval_ = 1;  // H of the next round outside warm-up

  std::vector<GradientLayout::Range> buckets_;
  std::vector<float> global_;           // x̄
  // The job's SGD on x̄ and on x_i; their momentum buffers m̄ and m_i (null without momentum).
  std::unique_ptr<optim::Optimizer> global_optimizer_;
  std::unique_ptr<optim::Optimizer> local_optimizer_;
  std::vector<float>* global_momentum_ = nullptr;
  std::vector<float>* local_momentum_ = nullptr;
  std::vector<float> accumulator_;      // A_i of the open round, all-reduced at its end
  std::vector<float> gradient_;         // this step's G_i, for the local step
  // One codec per bucket (error feedback is kept per element of the bucket); none uncompressed.
  std::vector<std::unique_ptr<QuantizeCodec>> quantizers_;
  std::vector<std::unique_ptr<HalfCodec>> halves_;
  CompressionTally tally_;

  // The round in progress. Written by Accumulate (communicator thread) at the round's
  // first bucket and by Update (trainer thread); the reducer's step hand-off
  // orders the two.
  Round round_;
  int64_t rounds_started_ = 0;

  // The step planned for the priority scheduler (written by PlanScheduledStep while the
  // scheduler is idle, read by its hooks): the round as of that step (done counts it).
  Round scheduled_round_;
  // The planned step ends its round: an exchange, the global step and the correction.
  bool ScheduledLast() const { return scheduled_round_.done == scheduled_round_.length; }
  // The model as the scheduler's last FinishRange saw it (the trainer's flat parameters).
  absl::Span<float> scheduled_parameters_;

  // Delay 1. The previous round, whose accumulator exchange_ all-reduces; exchange_status_ and
  // exchange_wire_ are written by exchange_ and read after joining it.
  bool pending_ = false;
  Round pending_round_;
  std::vector<float> pending_accumulator_;
  std::vector<float> round_start_;  // x_i when the open round started
  std::thread exchange_;
  absl::Status exchange_status_;
  double exchange_wire_ = 0;

  // AdaComm.
  bool have_f0_ = false;
  double f0_ = 0;
  double loss_ema_ = 0;
};

// multistep's parameters (strategy_descriptors.cc), as validated.
MultistepOptions MultistepOptionsOf(const StrategyOptions& options) {
  MultistepOptions m;
  m.adaptive = options.String("interval") == "adaptive";
  m.interval = m.adaptive ? 0 : static_cast<int>(options.Int("interval"));
  m.h_min = static_cast<int>(options.Int("hMin"));
  m.h_max = static_cast<int>(options.Int("hMax"));
  m.warmup_epochs = options.Number("warmupEpochs");
  m.mu = options.Number("mu");
  m.delay = static_cast<int>(options.Int("delay"));
  m.average = options.String("update") == "average" && m.delay == 0;
  const std::string type = options.String("compression.type");
  if (type == "fp16") m.compression.bits = 16;
  if (type == "quantized") m.compression.bits = static_cast<int>(options.Int("compression.bits"));
  return m;
}

}  // namespace

bool multistep_registered = RegisterStrategy(
    "multistep", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      if (context.optimizer.type != optim::OptimizerType::kSgd) {
        return absl::InvalidArgumentError(
            "spec.optimizer.type: strategy multistep takes optimizer sgd, got adam");
      }
      return std::make_unique<Multistep>(context, MultistepOptionsOf(*context.options));
    });

}  // namespace hptrain::sync
