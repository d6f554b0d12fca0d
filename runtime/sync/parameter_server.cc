// ps, hps and mp2: training through the parameter server (docs/algorithms.md §5 and §1; runtime/ps).
//
// Every step each worker pushes its summed gradient (Σ over its b_i samples) for each bucket as
// soon as backward produced it, split by shard and by tensor; the shards sum the N pushes in rank
// order, divide by B and step the job's optimizer, and the worker pulls the new parameters: the
// strategy is an updater (updater.h), the trainer runs no optimizer of its own.
//
//   ps   BSP: fp32 pushes and pulls, the pull of version t+1 at the end of step t (staleness 0).
//   hps  H-PS: (b) staleness s (0 or 1, default 1): pushes leave asynchronously and the pull of
//        version t+1 runs in the background during step t+1, so step t+1 computes on version
//        ≥ t = (t+1) − s; (c) flexible quantization, `bits` (default 8; 2, 4, 8, 16, 32 or
//        dynamic): pushes are stochastically quantized with error feedback, pulls are deltas
//        against the PS's mirror of this worker's copy (ps_codec.h); with `dynamic` the bits are
//        chosen after every epoch from this worker's measured times (§5b (3)). (a) H-PS batch
//        allocation is spec.rebalance, as for every strategy.
//   hps with staleness 0 and bits 32 is ps, bit for bit.
//
// With staleness 1 and SGD the worker does not compute step t+1 on the model of step t as
// pulled, w_t: a gradient one step late with momentum 0.9 does not train (LeNet-5 at the demo's
// lr 0.05 stays at chance, as it does in PyTorch with the same delay). It computes on the OD-SGD
// estimate of w_{t+1}: w_t + m·(lr_t/lr_{t−1})·(w_t − w_{t−1}) − lr_t·(g_i + wd·w_t), the global
// momentum step (exact, from the last two versions) plus its own mean gradient g_i = G_i/b_i of
// round t in place of the global one. The pulled copy w_t itself (base_) is what the PS mirrors.
//
//   mp2  MP² (docs/algorithms.md §1b): every worker steps its own optimizer on its own mean
//        gradient (momentum stays local; a reducer), then (a model averager) pushes the parameter
//        VALUES of the round's subset S_t of every predicted tensor (runtime/ps/mp2/schedule.h:
//        ρ = pushRatio of each tensor over 4096 elements, shared permutation, no indices travel) and
//        the other tensors whole. The shard averages them (weighted by batch), predicts the
//        complement (mp2/prediction_state.h) and publishes the next version. Mode A pulls the
//        model as hps does: at pullBits (default 8) the rounded delta against the PS's mirror of
//        this worker's copy (ps_codec.h), at 32 the model whole; mode B pulls only the round's
//        averaged fresh values and runs the same prediction locally, reaching the PS's model bit
//        for bit. At pushRatio 1 nothing is predicted: a PS averaging parameters every step.
//        Bytes per worker per round (docs/algorithms.md §1c): push 4·(Σ|S_t,l| + small), pull
//        Σ PsPayloadBytes(n, pullBits) over the tensors (mode A; 4P at 32) or the same as the push
//        (mode B).
//        Local progress (localProgress, default false; docs/algorithms.md §1g): the worker keeps,
//        for every element of a predicted tensor, the carry r = the sum of its own local steps
//        since the element was last pushed (r = local − base_ after each step; 0 for S_t), and
//        computes on base_ + r: an element's push carries every local step since its last one
//        (per element, local SGD with period C, staggered), where without it the pull throws the
//        complement's steps away. base_ stays what the shard's mirror holds; r travels to the
//        shards only inside the pushed values.
//
// Membership changes (docs/elastic.md, "Parameter servers"): the strategy is made for one
// membership epoch (world_ is its communicator's size; the connection stamps every call with the
// epoch, ps_connection.h). Its Start re-initialises shards that already served an earlier epoch,
// as at the job's start: rank 0's Init (with the broadcast ps.* sections, or the parameters)
// declares the new world size, and the other ranks' initial pulls wait for it. After the
// worker's PsConnection::CancelPending the calls still in flight end at once, so the strategy of
// the old epoch is destroyed without waiting for a round that will never complete.
//
// Before every evaluation and checkpoint (Synchronize) the copy is brought to the model of
// exactly the steps done, in fp32; the checkpoint of rank 0 also carries every shard's
// parameters and optimizer state ("ps.params", "ps.momentum", ...), from which Start
// re-initialises the shards on --resume. With local progress Synchronize also averages the
// carries over the workers (an all-reduce, weighted by batch as the shard's average is): every
// rank then holds base_ + r̄, the workers' average model, which the evaluation sees and every
// worker continues from (r := r̄, as local SGD's synchronization does); the shard's model
// catches up at each element's next push. A run resumed from a checkpoint starts from the
// shard's model (r = 0): the carries are not in the checkpoint.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "kernels/update/update.h"
#include "runtime/base/status.h"
#include "runtime/ps/mp2/job_options.h"
#include "runtime/ps/mp2/prediction_state.h"
#include "runtime/ps/mp2/predictor.h"
#include "runtime/ps/ps_codec.h"
#include "runtime/ps/ps_connection.h"
#include "runtime/ps/shard_plan.h"
#include "runtime/sync/registry.h"

namespace hptrain::sync {
namespace {

using Clock = std::chrono::steady_clock;
using PullFuture = std::future<absl::StatusOr<ps::PullResult>>;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct PsOptions {
  std::string name;
  int staleness = 0;
  int bits = 32;
  bool dynamic_bits = false;
  // mp2
  bool mp2 = false;
  bool mode_b = false;
  ps::mp2::PredictionOptions prediction;
  std::shared_ptr<const ps::mp2::PredictorRunner> predictor;  // mode B; null: the zero change
  bool local_progress = false;  // keep the local steps of unpushed elements (carry_)
};

// Adds seconds to a total that several threads add to.
void AddSeconds(std::atomic<double>& total, double seconds) {
  double current = total.load();
  while (!total.compare_exchange_weak(current, current + seconds)) {
  }
}

// Waits for every future, returning the first error; the futures are consumed.
absl::Status WaitAll(std::vector<std::future<absl::Status>>& futures) {
  absl::Status first;
  for (auto& f : futures) {
    absl::Status s = f.get();
    if (first.ok() && !s.ok()) first = s;
  }
  futures.clear();
  return first;
}

class ParameterServerStrategy : public Strategy,
                                public SummingReducer,
                                public ModelAverager,
                                public Updater {
 public:
  ParameterServerStrategy(const StrategyContext& context, PsOptions options)
      : seed_(context.seed),
        optimizer_(context.optimizer),
        rank_(context.comm->rank()),
        world_(context.comm->size()),
        ps_(context.ps),
        options_(std::move(options)),
        bits_(options_.bits),
        comm_(context.comm) {
    traits_ = DeclaredTraits(name());
  }

  ~ParameterServerStrategy() override {
    // Background calls end before the strategy does; their results no longer matter.
    (void)WaitAll(pushes_);
    (void)WaitAll(previous_pushes_);
    for (auto& f : pending_pull_) f.wait();
  }

  std::string name() const override { return options_.name; }
  // ps, hps: an updater (the parameters come from the shards). mp2: a reducer (this worker's own
  // mean gradient for its local step) and an averager (the round that replaces the model by the
  // shards').
  GradientReducer* reducer() override { return options_.mp2 ? this : nullptr; }
  ModelAverager* averager() override { return options_.mp2 ? this : nullptr; }
  Updater* updater() override { return options_.mp2 ? nullptr : this; }

  // mp2: G_i scaled by B / b_i, so that the division by B gives the local mean G_i / b_i.
  absl::Status ReduceSum(const StepInfo& step, int bucket, absl::Span<float> gradients) override {
    return HandleGradients(step, bucket, gradients);
  }
  // ps, hps: the bucket's push.
  std::shared_ptr<comm::Work> Accumulate(const StepInfo& step, int bucket,
                                         const comm::BufferRef& gradients) override {
    return comm::Work::Done(
        HandleGradients(step, bucket, absl::MakeSpan(gradients.floats(), gradients.count)));
  }
  // mp2: every round gives the workers the shards' model (with local progress plus each one's
  // carry on the elements it did not push): a synchronization point, after which the trainer
  // averages BatchNorm buffers.
  absl::StatusOr<bool> Average(const StepInfo& step, const ModelView& model) override {
    HPTRAIN_RETURN_IF_ERROR(AfterStep(step, model.parameters));
    return true;
  }
  absl::StatusOr<bool> Update(const StepInfo& step, absl::Span<float> parameters) override {
    HPTRAIN_RETURN_IF_ERROR(AfterStep(step, parameters));
    return false;
  }

  absl::Status Init(const GradientLayout& layout) override;
  absl::Status Start(absl::Span<float> parameters, int64_t step,
                     const CheckpointSections& restored) override;
  absl::Status Synchronize(int64_t steps_done, absl::Span<float> parameters) override;
  absl::Status SaveState(int64_t steps_done, CheckpointSections* sections) override;
  absl::Status OnEpochEnd(const EpochTiming& timing) override;

  StrategyStats stats() const override {
    StrategyStats s;
    s.compression_ratio = tally_.ratio();
    s.bits = options_.mp2 ? 32 : bits_;  // mp2 pushes fp32 values; pullBits is the pull's
    s.staleness = staleness_;
    s.max_staleness = max_staleness_;
    return s;
  }

 private:
  // A bucket of this worker's summed gradients: mp2 scales it, ps and hps push it.
  absl::Status HandleGradients(const StepInfo& step, int bucket, absl::Span<float> gradients);
  // After the step (mp2: after the local optimizer step): the pull, or mp2's round.
  absl::Status AfterStep(const StepInfo& step, absl::Span<float> parameters);
  // The pieces (flat order) of [begin, end), which holds whole pieces.
  std::pair<int, int> TensorsOf(int64_t begin, int64_t end) const;
  absl::Status InitShard(int s, int64_t step, absl::Span<float> parameters,
                         const CheckpointSections& restored);
  // Encodes the pieces of [begin, end) (inside one shard) from the bucket `gradients`, which
  // starts at flat offset `base`, and starts their push.
  absl::Status StartPush(const StepInfo& step, int shard, int64_t begin, int64_t end,
                         const float* gradients, int64_t base);
  // Starts the push of encoded `tensors` covering [begin, end) of `shard` in the background
  // (pushes_); `schedule` is mp2's fingerprint, 0 otherwise.
  void SendPush(const StepInfo& step, int shard, int64_t begin, int64_t end, uint64_t schedule,
                std::vector<std::vector<uint8_t>> tensors);
  std::vector<PullFuture> StartPulls(int64_t min_version, int bits);
  // Waits for `pulls`, applies them to `parameters` and sets local_version_.
  absl::Status ApplyPulls(std::vector<PullFuture>& pulls, absl::Span<float> parameters,
                          int bits);
  absl::Status PullAll(int64_t min_version, int bits, absl::Span<float> parameters) {
    std::vector<PullFuture> pulls = StartPulls(min_version, bits);
    return ApplyPulls(pulls, parameters, bits);
  }
  // Times a wait of the trainer thread on communication.
  template <typename Fn>
  absl::Status Exposed(Fn&& fn) {
    const auto start = Clock::now();
    absl::Status s = fn();
    exposed_seconds_ += Since(start);
    return s;
  }

  // parameters := base_, or with compensation the estimate of the next model (see the top).
  void SetParameters(const StepInfo* step, absl::Span<float> parameters);

  // mp2: pushes the round's subsets of `parameters` (this worker's model after its local step)
  // and pulls the next version into base_ (with local progress, after updating carry_).
  absl::Status Mp2Round(const StepInfo& step, absl::Span<const float> parameters);
  absl::Status PushValues(const StepInfo& step, int shard, absl::Span<const float> parameters);
  // Mode B: applies the fresh values pulled from every shard to the local prediction states.
  absl::Status ApplyFresh(std::vector<PullFuture>& pulls, int64_t round);
  // mp2 with local progress: carry_ := parameters − base_ on every predicted piece, 0 on the
  // round's subsets.
  void UpdateCarry(const StepInfo& step, absl::Span<const float> parameters);
  // Synchronize with local progress: carry_ := the workers' carries averaged, weighted by batch.
  absl::Status AverageCarries();

  const uint64_t seed_;                      // spec.seed
  const optim::OptimizerOptions optimizer_;  // spec.optimizer
  const int rank_;
  const int world_;
  ps::PsConnection* ps_;
  const PsOptions options_;
  int bits_;

  ps::ShardPlan plan_;
  std::vector<GradientLayout::Range> buckets_;
  std::vector<int64_t> sizes_;    // piece sizes in flat order (shard_plan.h)
  std::vector<int64_t> offsets_;  // piece offsets in flat order (size + 1)
  std::vector<float> residual_;   // error feedback of quantized pushes, flat
  CompressionTally tally_;

  std::vector<float> base_;       // the copy as pulled: what the PS's mirror of this worker holds
  // Compensation (staleness 1, SGD): the copy of the version before base_'s, the learning rate
  // of the round before, and this round's summed gradient.
  bool compensate_ = false;
  std::vector<float> previous_base_;
  int64_t previous_version_ = -1;
  double previous_lr_ = 0;
  std::vector<float> own_gradient_;

  int64_t local_version_ = 0;  // the model version of this worker's copy
  bool exact_ = true;          // the copy is that version's parameters, not a delta's rounding
  int64_t staleness_ = 0;
  int64_t max_staleness_ = 0;

  std::vector<std::future<absl::Status>> pushes_;           // this step's pushes
  std::vector<std::future<absl::Status>> previous_pushes_;  // the step before's (staleness 1)
  std::vector<PullFuture> pending_pull_;                    // the next version, in flight
  int pending_pull_bits_ = 32;

  // mp2: one prediction state per shard (its schedules; in mode B also its model).
  std::vector<std::unique_ptr<ps::mp2::PredictionState>> mp2_states_;
  uint64_t mp2_fingerprint_ = 0;
  // mp2 with local progress: per element of a predicted piece, this worker's local steps since
  // the element's last push (flat; 0 elsewhere; empty without local progress or predicted
  // pieces); the parameters are base_ + carry_ between rounds. carry_weight_: b_i / B of the
  // last round (the weight of this worker's carry in AverageCarries).
  comm::Communicator* const comm_;
  std::vector<float> carry_;
  double carry_weight_ = 0;

  // This epoch's times, for bits: dynamic.
  std::atomic<double> comm_seconds_{0};  // inside push and pull calls (overlapped or not)
  double exposed_seconds_ = 0;           // the trainer thread waited for them
};

absl::Status ParameterServerStrategy::Init(const GradientLayout& layout) {
  if (ps_ == nullptr) {
    return absl::FailedPreconditionError("no parameter-server connection for this worker");
  }
  std::vector<GradientLayout::Range> tensors = layout.tensors;
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.begin < b.begin; });
  std::vector<int64_t> tensor_sizes;
  size_t expected = 0;
  for (const auto& t : tensors) {
    if (t.begin != expected || t.end <= t.begin) {
      return absl::InternalError("gradient tensors are not contiguous");
    }
    tensor_sizes.push_back(static_cast<int64_t>(t.end - t.begin));
    expected = t.end;
  }
  HPTRAIN_ASSIGN_OR_RETURN(plan_, ps::PlanShards(tensor_sizes, ps_->shards()));
  // Pushes and pulls move pieces: the tensors, cut at the shard boundaries.
  sizes_ = plan_.pieces;
  offsets_.assign(1, 0);
  for (int64_t n : sizes_) offsets_.push_back(offsets_.back() + n);
  buckets_ = layout.buckets;
  if (options_.mp2) {
    for (int s = 0; s < ps_->shards(); ++s) {
      mp2_states_.push_back(std::make_unique<ps::mp2::PredictionState>(
          options_.prediction, s, plan_.shards[s].piece_sizes,
          options_.mode_b ? options_.predictor.get() : nullptr));
    }
    mp2_fingerprint_ =
        ps::mp2::ScheduleFingerprint(options_.prediction.seed, options_.prediction.push_ratio);
    bool predicted = false;
    for (const auto& state : mp2_states_) {
      for (int p = 0; p < state->pieces(); ++p) predicted |= state->schedule(p).predicted();
    }
    // At ρ = 1 (or with no tensor over 4096 elements) everything is pushed: no carry.
    if (options_.local_progress && predicted) carry_.assign(plan_.total, 0.0f);
  }
  if (!options_.mp2 && (bits_ < 32 || options_.dynamic_bits)) {
    residual_.assign(plan_.total, 0.0f);  // error feedback of quantized pushes
  }
  base_.assign(plan_.total, 0.0f);
  compensate_ = options_.staleness > 0 && optimizer_.type == optim::OptimizerType::kSgd &&
                !optimizer_.nesterov;
  if (compensate_) own_gradient_.assign(plan_.total, 0.0f);
  return absl::OkStatus();
}

std::pair<int, int> ParameterServerStrategy::TensorsOf(int64_t begin, int64_t end) const {
  auto first = std::lower_bound(offsets_.begin(), offsets_.end(), begin);
  auto last = std::lower_bound(offsets_.begin(), offsets_.end(), end);
  return {static_cast<int>(first - offsets_.begin()), static_cast<int>(last - offsets_.begin())};
}

absl::Status ParameterServerStrategy::InitShard(int s, int64_t step,
                                                absl::Span<float> parameters,
                                                const CheckpointSections& restored) {
  const ps::ShardRange& range = plan_.shards[s];
  ps::ShardLayoutInfo layout;
  layout.shard = s;
  layout.shards = ps_->shards();
  layout.begin = range.begin;
  layout.end = range.end;
  layout.tensor_sizes = range.piece_sizes;
  layout.world_size = world_;
  ps::ShardState state;
  state.version = step;
  state.optimizer_steps = step;
  auto slice = [&](const std::vector<float>& all) {
    return std::vector<float>(all.begin() + range.begin, all.begin() + range.end);
  };
  auto saved = restored.find("ps.params");
  if (saved != restored.end()) {
    // Resuming: the shards' parameters and optimizer state as the checkpoint recorded them.
    for (const auto& [name, values] : restored) {
      if (name.rfind("ps.", 0) != 0) continue;
      if (static_cast<int64_t>(values.size()) != plan_.total) {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint section ", name, " has ", values.size(), " values, the model ",
            plan_.total));
      }
      state.sections[name.substr(3)] = slice(values);
    }
  } else {
    state.sections["params"] =
        std::vector<float>(parameters.begin() + range.begin, parameters.begin() + range.end);
  }
  return ps_->Init(s, rank_, layout, state);
}

absl::Status ParameterServerStrategy::Start(absl::Span<float> parameters, int64_t step,
                                            const CheckpointSections& restored) {
  if (static_cast<int64_t>(parameters.size()) != plan_.total) {
    return absl::InternalError("the parameters differ from the gradient layout");
  }
  // A start after earlier steps (a change of members) begins afresh: calls still in flight are
  // the old epoch's, their results no longer matter, and the error feedback is dropped.
  (void)WaitAll(previous_pushes_);
  (void)WaitAll(pushes_);
  for (auto& f : pending_pull_) f.wait();
  pending_pull_.clear();
  std::fill(residual_.begin(), residual_.end(), 0.0f);
  previous_version_ = -1;
  if (rank_ == 0) {
    std::vector<std::future<absl::Status>> inits;
    for (int s = 0; s < ps_->shards(); ++s) {
      inits.push_back(std::async(std::launch::async, [this, s, step, parameters, &restored] {
        return InitShard(s, step, parameters, restored);
      }));
    }
    HPTRAIN_RETURN_IF_ERROR(WaitAll(inits));
  }
  // Every worker starts from the shards' parameters (the mirrors start from the same copy).
  HPTRAIN_RETURN_IF_ERROR(PullAll(step, 32, absl::MakeSpan(base_)), "initial pull");
  for (int s = 0; s < static_cast<int>(mp2_states_.size()); ++s) {
    const ps::ShardRange& range = plan_.shards[s];
    HPTRAIN_RETURN_IF_ERROR(mp2_states_[s]->Reset(
        std::vector<float>(base_.begin() + range.begin, base_.begin() + range.end), step));
  }
  std::fill(carry_.begin(), carry_.end(), 0.0f);  // a resumed run starts without one
  carry_weight_ = 1.0 / world_;
  SetParameters(nullptr, parameters);
  if (local_version_ != step) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the parameter server is at model version ", local_version_, ", this worker at step ",
        step));
  }
  return absl::OkStatus();
}

absl::Status ParameterServerStrategy::StartPush(const StepInfo& step, int shard, int64_t begin,
                                                int64_t end, const float* gradients,
                                                int64_t base) {
  auto [first, last] = TensorsOf(begin, end);
  std::vector<std::vector<uint8_t>> tensors;
  const uint64_t seed = seed_ * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(rank_) + 1;
  for (int t = first; t < last; ++t) {
    const int64_t n = sizes_[t];
    float* residual = residual_.empty() ? nullptr : residual_.data() + offsets_[t];
    absl::StatusOr<std::vector<uint8_t>> bytes =
        ps::EncodeGradient(gradients + (offsets_[t] - base), residual, n, bits_, seed,
                           static_cast<uint64_t>(step.step) * 4096 + static_cast<uint64_t>(t));
    HPTRAIN_RETURN_IF_ERROR(bytes.status(), "encoding the gradient of tensor ", t);
    tally_.Add(4.0 * n, static_cast<double>(ps::PsPayloadBytes(n, bits_)));
    tensors.push_back(*std::move(bytes));
  }
  SendPush(step, shard, begin, end, 0, std::move(tensors));
  return absl::OkStatus();
}

void ParameterServerStrategy::SendPush(const StepInfo& step, int shard, int64_t begin,
                                       int64_t end, uint64_t schedule,
                                       std::vector<std::vector<uint8_t>> tensors) {
  ps::PushInfo push;
  push.rank = rank_;
  push.step = step.step;
  push.version = local_version_;
  push.batch_size = step.local_batch;
  push.lr = step.lr;
  push.begin = begin;
  push.end = end;
  push.schedule = schedule;
  pushes_.push_back(std::async(std::launch::async, [this, shard, push,
                                                    tensors = std::move(tensors)] {
    const auto start = Clock::now();
    absl::Status s = ps_->Push(shard, push, tensors).status();
    AddSeconds(comm_seconds_, Since(start));
    return s;
  }));
}

absl::Status ParameterServerStrategy::HandleGradients(const StepInfo& step, int bucket,
                                                      absl::Span<float> gradients) {
  if (options_.mp2) {
    // The local optimizer steps on this worker's mean gradient G_i / b_i (after the division by B).
    const float factor = step.local_batch > 0 ? static_cast<float>(step.global_batch) /
                                                    static_cast<float>(step.local_batch)
                                              : 0.0f;
    kernels::Scale(gradients.data(), gradients.size(), factor);
    return absl::OkStatus();
  }
  const int64_t base = static_cast<int64_t>(buckets_[bucket].begin);
  const int64_t end = static_cast<int64_t>(buckets_[bucket].end);
  if (compensate_) std::copy(gradients.begin(), gradients.end(), own_gradient_.begin() + base);
  for (int s = 0; s < ps_->shards(); ++s) {
    const int64_t b = std::max(base, plan_.shards[s].begin);
    const int64_t e = std::min(end, plan_.shards[s].end);
    if (b < e) HPTRAIN_RETURN_IF_ERROR(StartPush(step, s, b, e, gradients.data(), base));
  }
  // Synchronous: the bucket's pushes are done when backward's exchange is (as an all-reduce's
  // would be). Pipelined: they complete while the next step computes.
  if (options_.staleness == 0) return WaitAll(pushes_);
  return absl::OkStatus();
}

std::vector<PullFuture> ParameterServerStrategy::StartPulls(int64_t min_version, int bits) {
  std::vector<PullFuture> pulls;
  for (int s = 0; s < ps_->shards(); ++s) {
    pulls.push_back(std::async(std::launch::async, [this, s, min_version, bits] {
      const auto start = Clock::now();
      absl::StatusOr<ps::PullResult> r = ps_->Pull(s, rank_, min_version, bits);
      AddSeconds(comm_seconds_, Since(start));
      return r;
    }));
  }
  return pulls;
}

absl::Status ParameterServerStrategy::ApplyPulls(std::vector<PullFuture>& pulls,
                                                 absl::Span<float> parameters, int bits) {
  std::vector<absl::StatusOr<ps::PullResult>> results;
  for (auto& f : pulls) results.push_back(f.get());
  pulls.clear();
  int64_t version = -1;
  for (int s = 0; s < static_cast<int>(results.size()); ++s) {
    HPTRAIN_RETURN_IF_ERROR(results[s].status());
    const ps::ShardRange& range = plan_.shards[s];
    if (static_cast<int>(results[s]->tensors.size()) != range.last_piece - range.first_piece) {
      return absl::DataLossError(absl::StrCat("pull from parameter-server shard ", s, ": ",
                                              results[s]->tensors.size(), " tensors, expected ",
                                              range.last_piece - range.first_piece));
    }
    for (int t = range.first_piece; t < range.last_piece; ++t) {
      const std::string what = absl::StrCat("pull from parameter-server shard ", s, ", tensor ", t);
      HPTRAIN_ASSIGN_OR_RETURN(
          comm::EncodedView view,
          ps::DecodePsTensor(results[s]->tensors[t - range.first_piece], sizes_[t],
                             what.c_str()));
      ps::ApplyPulled(view, parameters.data() + offsets_[t]);
    }
    version = version < 0 ? results[s]->version : std::min(version, results[s]->version);
  }
  local_version_ = version;
  exact_ = bits == 32;
  return absl::OkStatus();
}

absl::Status ParameterServerStrategy::AfterStep(const StepInfo& step,
                                                absl::Span<float> parameters) {
  const int64_t next = step.step + 1;  // the step the copy is for
  absl::Span<float> base = absl::MakeSpan(base_);
  if (options_.mp2) {
    HPTRAIN_RETURN_IF_ERROR(Mp2Round(step, parameters), "MP² round of step ", step.step);
  } else if (options_.staleness == 0) {
    HPTRAIN_RETURN_IF_ERROR(Exposed([&] { return WaitAll(pushes_); }));
    HPTRAIN_RETURN_IF_ERROR(Exposed([&] { return PullAll(next, bits_, base); }),
                            "pull after step ", step.step);
  } else {
    // The pushes of the step before must have arrived (this step's may still be on their way).
    HPTRAIN_RETURN_IF_ERROR(Exposed([&] { return WaitAll(previous_pushes_); }));
    previous_pushes_ = std::move(pushes_);
    pushes_.clear();
    if (compensate_) {
      previous_base_ = base_;
      previous_version_ = local_version_;
    }
    if (!pending_pull_.empty()) {
      HPTRAIN_RETURN_IF_ERROR(
          Exposed([&] { return ApplyPulls(pending_pull_, base, pending_pull_bits_); }),
          "pull after step ", step.step);
    }
    if (local_version_ < next - options_.staleness) {
      HPTRAIN_RETURN_IF_ERROR(
          Exposed([&] { return PullAll(next - options_.staleness, bits_, base); }),
          "pull after step ", step.step);
    }
    // The next version arrives in the background while step `next` computes.
    pending_pull_ = StartPulls(next, bits_);
    pending_pull_bits_ = bits_;
  }
  SetParameters(&step, parameters);
  staleness_ = next - local_version_;
  max_staleness_ = std::max(max_staleness_, staleness_);
  return absl::OkStatus();
}

absl::Status ParameterServerStrategy::PushValues(const StepInfo& step, int shard,
                                                 absl::Span<const float> parameters) {
  const ps::ShardRange& range = plan_.shards[shard];
  const ps::mp2::PredictionState& state = *mp2_states_[shard];
  std::vector<std::vector<uint8_t>> tensors;
  std::vector<float> values;
  for (int p = 0; p < state.pieces(); ++p) {
    const int64_t n = state.PushSize(p, step.step);
    values.resize(static_cast<size_t>(n));
    state.schedule(p).Gather(step.step, parameters.data() + range.begin + state.piece_offset(p),
                             values.data());
    HPTRAIN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ps::EncodeValues(values.data(), n));
    tally_.Add(4.0 * static_cast<double>(state.schedule(p).size()), 4.0 * static_cast<double>(n));
    tensors.push_back(std::move(bytes));
  }
  SendPush(step, shard, range.begin, range.end, mp2_fingerprint_, std::move(tensors));
  return absl::OkStatus();
}

absl::Status ParameterServerStrategy::ApplyFresh(std::vector<PullFuture>& pulls,
                                                 int64_t round) {
  std::vector<absl::StatusOr<ps::PullResult>> results;
  for (auto& f : pulls) results.push_back(f.get());
  pulls.clear();
  for (int s = 0; s < static_cast<int>(results.size()); ++s) {
    HPTRAIN_RETURN_IF_ERROR(results[s].status());
    if (results[s]->version != round + 1) {
      return absl::InternalError(absl::StrCat("fresh pull from parameter-server shard ", s,
                                              " is of model version ", results[s]->version,
                                              ", expected ", round + 1));
    }
    ps::mp2::PredictionState& state = *mp2_states_[s];
    if (static_cast<int>(results[s]->tensors.size()) != state.pieces()) {
      return absl::DataLossError(absl::StrCat("fresh pull from parameter-server shard ", s, ": ",
                                              results[s]->tensors.size(), " tensors, expected ",
                                              state.pieces()));
    }
    std::vector<std::vector<float>> fresh(static_cast<size_t>(state.pieces()));
    for (int p = 0; p < state.pieces(); ++p) {
      const std::string what =
          absl::StrCat("fresh pull from parameter-server shard ", s, ", tensor ", p);
      HPTRAIN_ASSIGN_OR_RETURN(comm::EncodedView view,
                               ps::DecodePsTensor(results[s]->tensors[p],
                                                  state.PushSize(p, round), what.c_str()));
      fresh[p].resize(static_cast<size_t>(state.PushSize(p, round)));
      ps::DecodeInto(view, fresh[p].data());
    }
    HPTRAIN_RETURN_IF_ERROR(state.Apply(round, fresh), "shard ", s);
    const std::vector<float>& model = state.params();
    std::copy(model.begin(), model.end(), base_.begin() + plan_.shards[s].begin);
  }
  return absl::OkStatus();
}

void ParameterServerStrategy::UpdateCarry(const StepInfo& step,
                                          absl::Span<const float> parameters) {
  for (int s = 0; s < ps_->shards(); ++s) {
    const ps::mp2::PredictionState& state = *mp2_states_[s];
    for (int p = 0; p < state.pieces(); ++p) {
      const ps::mp2::SubsetSchedule& schedule = state.schedule(p);
      if (!schedule.predicted()) continue;
      const int64_t offset = plan_.shards[s].begin + state.piece_offset(p);
      float* r = carry_.data() + offset;
      const float* local = parameters.data() + offset;
      const float* base = base_.data() + offset;
      const int64_t n = schedule.size();
      for (int64_t e = 0; e < n; ++e) r[e] = local[e] - base[e];
      // The pushed elements' progress has just left in the push.
      for (int32_t e : schedule.Subset(step.step)) r[e] = 0.0f;
    }
  }
  carry_weight_ = step.global_batch > 0 ? static_cast<double>(step.local_batch) /
                                              static_cast<double>(step.global_batch)
                                        : 1.0 / world_;
}

absl::Status ParameterServerStrategy::AverageCarries() {
  // Σ_i (b_i/B)·r_i; elements outside the predicted pieces are 0 on every rank and stay so.
  kernels::Scale(carry_.data(), carry_.size(), static_cast<float>(carry_weight_));
  const auto start = Clock::now();
  absl::Status s = comm_->AllReduceSum(carry_.data(), carry_.size());
  AddSeconds(comm_seconds_, Since(start));
  return s;
}

absl::Status ParameterServerStrategy::Mp2Round(const StepInfo& step,
                                               absl::Span<const float> parameters) {
  for (int s = 0; s < ps_->shards(); ++s) {
    HPTRAIN_RETURN_IF_ERROR(PushValues(step, s, parameters));
  }
  // Before the pull replaces base_: the carry is measured against the copy the step started from.
  if (!carry_.empty()) UpdateCarry(step, parameters);
  HPTRAIN_RETURN_IF_ERROR(Exposed([&] { return WaitAll(pushes_); }));
  const int64_t next = step.step + 1;
  if (!options_.mode_b) {
    // At pullBits < 32 a delta against the mirror: base_ is what the mirror holds.
    return Exposed([&] { return PullAll(next, bits_, absl::MakeSpan(base_)); });
  }
  std::vector<PullFuture> pulls = StartPulls(next, ps::kFreshBits);
  HPTRAIN_RETURN_IF_ERROR(Exposed([&] { return ApplyFresh(pulls, step.step); }));
  local_version_ = next;
  exact_ = true;
  return absl::OkStatus();
}

absl::Status ParameterServerStrategy::Synchronize(int64_t steps_done,
                                                  absl::Span<float> parameters) {
  HPTRAIN_RETURN_IF_ERROR(Exposed([&] { return WaitAll(previous_pushes_); }));
  HPTRAIN_RETURN_IF_ERROR(Exposed([&] { return WaitAll(pushes_); }));
  absl::Span<float> base = absl::MakeSpan(base_);
  if (!pending_pull_.empty()) {
    HPTRAIN_RETURN_IF_ERROR(
        Exposed([&] { return ApplyPulls(pending_pull_, base, pending_pull_bits_); }));
  }
  if (local_version_ != steps_done || !exact_) {
    HPTRAIN_RETURN_IF_ERROR(Exposed([&] { return PullAll(steps_done, 32, base); }),
                            "synchronizing after step ", steps_done);
  }
  previous_version_ = -1;  // the next estimate starts afresh from this exact model
  SetParameters(nullptr, parameters);
  if (!carry_.empty()) {
    // The same model on every rank: base_ + the carries averaged (see the top).
    HPTRAIN_RETURN_IF_ERROR(Exposed([&] { return AverageCarries(); }),
                            "averaging the carried progress after step ", steps_done);
    for (size_t i = 0; i < carry_.size(); ++i) parameters[i] += carry_[i];
  }
  if (local_version_ != steps_done) {
    return absl::InternalError(absl::StrCat("after ", steps_done,
                                            " steps the parameter server is at model version ",
                                            local_version_));
  }
  return absl::OkStatus();
}

void ParameterServerStrategy::SetParameters(const StepInfo* step, absl::Span<float> parameters) {
  if (!compensate_ || step == nullptr) {
    std::copy(base_.begin(), base_.end(), parameters.begin());
    // mp2 with local progress, after a round: base_ + the carry (0 on the round's subsets).
    if (step != nullptr && !carry_.empty()) {
      for (size_t i = 0; i < carry_.size(); ++i) parameters[i] += carry_[i];
    }
    return;
  }
  const float m = static_cast<float>(optimizer_.momentum);
  const float wd = static_cast<float>(optimizer_.weight_decay);
  const float lr = static_cast<float>(step->lr);
  const float inverse_batch = step->local_batch > 0 ? 1.0f / step->local_batch : 0.0f;
  // The global momentum step w_t − w_{t−1}, when base_ and previous_base_ are consecutive.
  const bool momentum = m != 0 && previous_version_ >= 0 &&
                        previous_version_ + 1 == local_version_ && previous_lr_ > 0;
  const float velocity = momentum ? m * static_cast<float>(step->lr / previous_lr_) : 0.0f;
  for (size_t i = 0; i < base_.size(); ++i) {
    const float w = base_[i];
    float estimate = w - lr * (own_gradient_[i] * inverse_batch + wd * w);
    if (momentum) estimate += velocity * (w - previous_base_[i]);
    parameters[i] = estimate;
  }
  previous_lr_ = step->lr;
}

absl::Status ParameterServerStrategy::SaveState(int64_t steps_done,
                                                CheckpointSections* sections) {
  for (int s = 0; s < ps_->shards(); ++s) {
    absl::StatusOr<ps::ShardState> state = ps_->GetState(s, steps_done);
    HPTRAIN_RETURN_IF_ERROR(state.status(), "checkpoint state");
    const ps::ShardRange& range = plan_.shards[s];
    for (const auto& [name, values] : state->sections) {
      std::vector<float>& all = (*sections)["ps." + name];
      all.resize(plan_.total);
      if (static_cast<int64_t>(values.size()) != range.size()) {
        return absl::DataLossError(absl::StrCat("parameter-server shard ", s, " state \"", name,
                                                "\" has ", values.size(), " values, expected ",
                                                range.size()));
      }
      std::copy(values.begin(), values.end(), all.begin() + range.begin);
    }
  }
  return absl::OkStatus();
}

absl::Status ParameterServerStrategy::OnEpochEnd(const EpochTiming& timing) {
  const double comp = timing.compute_seconds;
  const double comm = comm_seconds_;
  const double exposed = exposed_seconds_ + timing.exposed_comm_seconds;
  comm_seconds_ = 0;
  exposed_seconds_ = 0;
  if (!options_.dynamic_bits) return absl::OkStatus();
  // docs/algorithms.md §5b (3): halve when communication shows, double when it is well hidden.
  if (exposed > 0.1 * comp && bits_ > 2) {
    bits_ /= 2;
  } else if (comm < 0.5 * comp && bits_ < 16) {
    bits_ *= 2;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context,
                                                 PsOptions options) {
  if (context.ps == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "strategy ", options.name, " needs the job's parameter server (none connected)"));
  }
  return std::make_unique<ParameterServerStrategy>(context, std::move(options));
}

}  // namespace

// Registered at start-up; hptrain_sync is linked whole-archive so this object is kept.
bool ps_registered = RegisterStrategy(
    "ps", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      PsOptions options;
      options.name = "ps";
      return Create(context, options);
    });

bool hps_registered = RegisterStrategy(
    "hps", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      // hps's parameters (strategy_descriptors.cc), as validated: bits and staleness.
      const StrategyOptions& spec = *context.options;
      PsOptions options;
      options.name = "hps";
      options.staleness = static_cast<int>(spec.Int("staleness"));
      options.dynamic_bits = spec.String("bits") == "dynamic";
      options.bits = options.dynamic_bits ? 8 : static_cast<int>(spec.Int("bits"));
      return Create(context, options);
    });

bool mp2_registered = RegisterStrategy(
    "mp2", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      const StrategyOptions& spec = *context.options;
      PsOptions options;
      options.name = "mp2";
      options.mp2 = true;
      options.mode_b = spec.String("mode") == "B";
      // Mode A's pulls; mode B pulls the fresh values, fp32.
      options.bits = options.mode_b ? 32 : static_cast<int>(spec.Int("pullBits"));
      options.prediction = ps::mp2::PredictionOptionsFor(spec, context.seed);
      options.local_progress = spec.Bool("localProgress");
      if (options.mode_b) {
        // Mode B predicts on every worker, with the PS's predictor.
        HPTRAIN_ASSIGN_OR_RETURN(options.predictor, ps::mp2::OpenPredictor(spec));
      }
      return Create(context, options);
    });

}  // namespace hptrain::sync
