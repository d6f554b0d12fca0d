#include "runtime/ps/param_store.h"

#include <algorithm>
#include <cstdlib>
#include <future>

#include "absl/strings/str_cat.h"
#include "kernels/update/update.h"
#include "runtime/base/status.h"
#include "runtime/comm/encoded_tensor.h"
#include "runtime/job/optimizer_options.h"
#include "runtime/ps/ps_codec.h"

namespace hptrain::ps {

using Clock = std::chrono::steady_clock;

ParamStore::ParamStore(ParamStoreConfig config)
    : config_(std::move(config)), world_(config_.world_size) {}

absl::Status ParamStore::Reject(const std::string& reason, absl::Status status) {
  if (on_rejected_) on_rejected_(reason);
  return status;
}

absl::Status ParamStore::WrongEpoch(const std::string& what, int64_t epoch) {
  return Reject("membership", absl::FailedPreconditionError(absl::StrCat(
                                  what, " of membership epoch ", epoch, " to a shard in epoch ",
                                  membership_epoch_, " (parameter-server shard ", config_.shard,
                                  ")")));
}

absl::Status ParamStore::Init(int rank, const ShardLayoutInfo& layout, const ShardState& state) {
  std::lock_guard<std::mutex> lock(mu_);
  auto bad = [&](const std::string& why) {
    return Reject("layout", absl::InvalidArgumentError(absl::StrCat(
                                "init of parameter-server shard ", config_.shard, " by rank ",
                                rank, ": ", why)));
  };
  if (layout.shard != config_.shard) {
    return bad(absl::StrCat("the layout is for shard ", layout.shard));
  }
  if (!config_.elastic && layout.world_size != config_.world_size) {
    return bad(absl::StrCat("the layout is for ", layout.world_size, " workers, the job has ",
                            config_.world_size));
  }
  if (config_.elastic && (layout.world_size < 1 || layout.world_size > config_.world_size)) {
    return bad(absl::StrCat("the layout is for ", layout.world_size,
                            " workers, the job has 1 to ", config_.world_size));
  }
  if (layout.membership_epoch < 0) return bad("negative membership epoch");
  if (initialised_ && layout.membership_epoch < membership_epoch_) {
    return WrongEpoch(absl::StrCat("init by rank ", rank), layout.membership_epoch);
  }
  int64_t total = 0;
  for (int64_t n : layout.tensor_sizes) {
    if (n < 1) return bad("a tensor has no elements");
    total += n;
  }
  if (layout.begin < 0 || layout.end - layout.begin != total || total == 0) {
    return bad(absl::StrCat("range [", layout.begin, ", ", layout.end, ") does not hold its ",
                            layout.tensor_sizes.size(), " tensors of ", total, " elements"));
  }
  if (state.version < 0 || state.optimizer_steps < 0) return bad("negative version");
  auto params = state.sections.find("params");
  if (params == state.sections.end() || static_cast<int64_t>(params->second.size()) != total) {
    return bad(absl::StrCat("\"params\" must hold ", total, " values"));
  }
  auto optimizer =
      std::make_unique<optim::Optimizer>(job::OptimizerOptionsFor(config_.optimizer), total);
  for (const auto& [name, values] : state.sections) {
    if (name == "params") continue;
    auto slots = optimizer->state();
    auto slot = slots.find(name);
    if (slot == slots.end()) {
      return bad(absl::StrCat("section \"", name, "\" is not state of the job's optimizer"));
    }
    if (static_cast<int64_t>(values.size()) != total) {
      return bad(absl::StrCat("section \"", name, "\" has ", values.size(), " values, expected ",
                              total));
    }
    *slot->second = values;
  }
  optimizer->set_steps(state.optimizer_steps);
  layout_ = layout;
  tensor_offsets_.assign(1, 0);
  for (int64_t n : layout.tensor_sizes) tensor_offsets_.push_back(tensor_offsets_.back() + n);
  params_ = params->second;
  previous_params_.clear();
  optimizer_ = std::move(optimizer);
  version_ = state.version;
  rounds_.clear();
  world_ = layout.world_size;
  membership_epoch_ = layout.membership_epoch;
  mirrors_.assign(world_, {});
  fresh_.clear();
  if (config_.mp2.has_value()) {
    prediction_ = std::make_unique<mp2::PredictionState>(
        config_.mp2->prediction, config_.shard, layout.tensor_sizes, config_.mp2->predictor);
    HPTRAIN_RETURN_IF_ERROR(prediction_->Reset(params_, version_));
  }
  initialised_ = true;
  ++inits_;  // waits of the previous Init end with Aborted
  cv_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParamStore::Push(const PushInfo& push,
                                         const std::vector<std::vector<uint8_t>>& tensors) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised_) {
    return Reject("uninitialised",
                  absl::FailedPreconditionError(absl::StrCat(
                      "push to parameter-server shard ", config_.shard,
                      " before rank 0 initialised it")));
  }
  const std::string who = absl::StrCat("push of rank ", push.rank, " for step ", push.step);
  if (push.membership_epoch != membership_epoch_) return WrongEpoch(who, push.membership_epoch);
  if (push.rank < 0 || push.rank >= world_) {
    return Reject("rank", absl::InvalidArgumentError(absl::StrCat(
                              who, ": rank out of range, the job has ", world_, " workers")));
  }
  if (push.step < version_) {
    return Reject("stale_step", absl::FailedPreconditionError(absl::StrCat(
                                    "stale ", who, ": shard ", config_.shard,
                                    " is at model version ", version_)));
  }
  if (push.step > version_ + config_.max_lead) {
    return Reject("future_step",
                  absl::FailedPreconditionError(absl::StrCat(
                      "future ", who, ": shard ", config_.shard, " is at model version ",
                      version_, " and the staleness bound is ", config_.max_lead)));
  }
  if (push.batch_size < 0) {
    return Reject("size", absl::InvalidArgumentError(
                              absl::StrCat(who, ": negative batch size ", push.batch_size)));
  }
  // The range must be whole tensors of this shard.
  auto find = [&](int64_t offset) -> int {
    auto it = std::lower_bound(tensor_offsets_.begin(), tensor_offsets_.end(),
                               offset - layout_.begin);
    if (it == tensor_offsets_.end() || *it != offset - layout_.begin) return -1;
    return static_cast<int>(it - tensor_offsets_.begin());
  };
  const int first = find(push.begin);
  const int last = find(push.end);
  if (first < 0 || last < 0 || last <= first) {
    return Reject("size", absl::InvalidArgumentError(absl::StrCat(
                              who, ": range [", push.begin, ", ", push.end,
                              ") is not whole tensors of shard ", config_.shard, " [",
                              layout_.begin, ", ", layout_.end, ")")));
  }
  if (static_cast<int>(tensors.size()) != last - first) {
    return Reject("size", absl::InvalidArgumentError(
                              absl::StrCat(who, ": ", tensors.size(), " tensors for [", push.begin,
                                           ", ", push.end, "), which holds ", last - first)));
  }
  if (config_.mp2.has_value()) {
    const uint64_t expected = mp2::ScheduleFingerprint(config_.mp2->prediction.seed,
                                                       config_.mp2->prediction.push_ratio);
    if (push.schedule != expected) {
      return Reject("subset", absl::InvalidArgumentError(absl::StrCat(
                                  who, ": push of the wrong subset, cut by schedule ",
                                  push.schedule, ", shard ", config_.shard, "'s is ", expected,
                                  " (spec.seed or spec.strategy.pushRatio differ)")));
    }
  }
  std::vector<comm::EncodedView> views;
  int64_t payload = 0;
  for (int k = 0; k < last - first; ++k) {
    const std::string what = absl::StrCat(who, ", tensor ", first + k);
    const int64_t expected = PushedSize(first + k, push.step);
    absl::StatusOr<comm::EncodedView> view =
        DecodePsTensor(tensors[k], expected, what.c_str());
    if (!view.ok()) {
      if (config_.mp2.has_value()) {
        return Reject("subset", absl::InvalidArgumentError(absl::StrCat(
                                    "push of the wrong subset: ", view.status().message(),
                                    " (round ", push.step, "'s subset)")));
      }
      return Reject("size", view.status());
    }
    payload += static_cast<int64_t>(view->payload_bytes);
    views.push_back(*view);
  }
  auto existing = rounds_.find(push.step);
  if (existing != rounds_.end()) {
    const Round& round = existing->second;
    if (!round.covered[push.rank].empty()) {
      for (int t = first; t < last; ++t) {
        if (round.covered[push.rank][t]) {
          return Reject("duplicate", absl::AlreadyExistsError(absl::StrCat(
                                         "duplicate ", who, ": tensor ", t, " of shard ",
                                         config_.shard, " was already pushed")));
        }
      }
    }
    if (round.have_lr && round.lr != push.lr) {
      return Reject("lr", absl::InvalidArgumentError(absl::StrCat(
                              who, ": learning rate ", push.lr, " differs from the round's ",
                              round.lr)));
    }
  }
  // Accepted: from here on nothing fails.
  Round& round = rounds_[push.step];
  if (round.sums.empty()) {
    round.sums.resize(world_);
    round.covered.resize(world_);
    round.tensors_covered.assign(world_, 0);
    round.batch.assign(world_, 0);
    round.first_push = Clock::now();
  }
  round.lr = push.lr;
  round.have_lr = true;
  round.batch[push.rank] = push.batch_size;
  std::vector<float>& sum = round.sums[push.rank];
  if (sum.empty()) sum.assign(params_.size(), 0.0f);
  std::vector<char>& covered = round.covered[push.rank];
  if (covered.empty()) covered.assign(layout_.tensor_sizes.size(), 0);
  for (int k = 0; k < last - first; ++k) {
    DecodeInto(views[k], sum.data() + tensor_offsets_[first + k]);
    covered[first + k] = 1;
  }
  round.tensors_covered[push.rank] += last - first;
  if (round.tensors_covered[push.rank] == static_cast<int>(layout_.tensor_sizes.size())) {
    ++round.ranks_complete;
  }
  push_bytes_ += payload;
  ApplyReadyRounds();
  return version_;
}

void ParamStore::ApplyReadyRounds() {
  bool applied = false;
  for (auto it = rounds_.find(version_);
       it != rounds_.end() && it->second.ranks_complete == world_;
       it = rounds_.find(version_)) {
    Round& round = it->second;
    if (config_.mp2.has_value()) {
      // The round's inference is still running: the pull that needs the round applies it
      // (WaitForVersion), woken here.
      if (!prediction_->PredictionReady()) {
        cv_.notify_all();
        break;
      }
      ApplyMp2Round(it->first, round);
      const double wait = std::chrono::duration<double>(Clock::now() - round.first_push).count();
      rounds_.erase(it);
      ++version_;
      applied = true;
      if (on_round_) on_round_(wait);
      continue;
    }
    std::vector<float>& g = round.sums[0];
    for (int r = 1; r < world_; ++r) {
      const std::vector<float>& other = round.sums[r];
      for (size_t i = 0; i < g.size(); ++i) g[i] += other[i];
    }
    kernels::Scale(g.data(), g.size(), 1.0f / static_cast<float>(config_.global_batch));
    if (config_.max_lead > 0) previous_params_ = params_;
    optimizer_->Step(params_.data(), g.data(), round.lr);
    const double wait = std::chrono::duration<double>(Clock::now() - round.first_push).count();
    rounds_.erase(it);
    ++version_;
    applied = true;
    if (on_round_) on_round_(wait);
  }
  if (applied) cv_.notify_all();
}

int64_t ParamStore::PushedSize(int t, int64_t step) const {
  if (!config_.mp2.has_value()) return layout_.tensor_sizes[t];
  return prediction_->PushSize(t, step);
}

void ParamStore::ApplyMp2Round(int64_t step, Round& round) {
  const float inverse_batch = 1.0f / static_cast<float>(config_.global_batch);
  std::vector<std::vector<float>> fresh(layout_.tensor_sizes.size());
  for (size_t t = 0; t < fresh.size(); ++t) {
    const int64_t n = prediction_->PushSize(static_cast<int>(t), step);
    std::vector<float>& average = fresh[t];
    average.assign(static_cast<size_t>(n), 0.0f);
    for (int r = 0; r < world_; ++r) {
      const float weight = static_cast<float>(round.batch[r]);
      const float* values = round.sums[r].data() + tensor_offsets_[t];
      for (int64_t i = 0; i < n; ++i) average[i] += weight * values[i];
    }
    kernels::Scale(average.data(), average.size(), inverse_batch);
  }
  mp2::RoundStats stats;
  // The sizes were checked at every push, and the round is the state's next: this cannot fail.
  absl::Status applied = prediction_->Apply(step, fresh, &stats);
  if (!applied.ok()) std::abort();
  params_ = prediction_->params();
  fresh_ = std::move(fresh);
  if (on_prediction_) on_prediction_(stats);
}

bool ParamStore::RoundWaitsForPrediction() const {
  if (!config_.mp2.has_value() || prediction_ == nullptr) return false;
  auto it = rounds_.find(version_);
  return it != rounds_.end() && it->second.ranks_complete == world_;
}

absl::Status ParamStore::WaitForVersion(std::unique_lock<std::mutex>& lock, int64_t version,
                                        int64_t epoch, std::chrono::milliseconds timeout,
                                        const char* what, const std::atomic<bool>* cancelled) {
  const Clock::time_point deadline = Clock::now() + timeout;
  // The Init this wait belongs to: the first one of `epoch` or later it sees (-1: none yet).
  int64_t init = -1;
  auto admitted = [&] {
    if (init < 0 && initialised_ && (epoch < 0 || membership_epoch_ >= epoch)) init = inits_;
    return init >= 0;
  };
  // Done waiting: the version is reached, or the Init waited in is gone or of a later epoch.
  auto done = [&] {
    return admitted() &&
           (inits_ != init || (epoch >= 0 && membership_epoch_ != epoch) || version_ >= version);
  };
  auto interrupted = [&] { return shutdown_ || (cancelled != nullptr && cancelled->load()); };
  bool reached = false;
  ++waiting_;
  for (;;) {
    reached = cv_.wait_until(lock, deadline,
                             [&] { return interrupted() || done() || RoundWaitsForPrediction(); });
    if (interrupted() || !reached || done()) break;
    // mp2: the next round has every push and waits for its inference, which runs outside the lock
    // (or has finished since the last push); this caller applies the round once it has finished.
    bool finished = true;
    if (!prediction_->PredictionReady()) {
      std::shared_future<void> pending = prediction_->PendingPrediction();
      lock.unlock();
      finished = pending.wait_until(deadline) == std::future_status::ready;
      lock.lock();
    }
    ApplyReadyRounds();
    if (!finished && !done()) {
      reached = false;
      break;
    }
  }
  --waiting_;
  if (shutdown_) return absl::CancelledError("the parameter server is shutting down");
  if (cancelled != nullptr && cancelled->load()) {
    return absl::CancelledError(absl::StrCat(what, ": cancelled"));
  }
  if (init >= 0 && inits_ != init) {
    return absl::AbortedError(absl::StrCat(what, ": parameter-server shard ", config_.shard,
                                           " re-initialised for membership epoch ",
                                           membership_epoch_));
  }
  if (init >= 0 && epoch >= 0 && membership_epoch_ != epoch) {
    return WrongEpoch(what, epoch);
  }
  if (!reached) {
    if (!initialised_) {
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": parameter-server shard ", config_.shard, " was not initialised within ",
          timeout.count() / 1000.0, " s"));
    }
    if (init < 0) {
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": parameter-server shard ", config_.shard,
          " was not initialised for membership epoch ", epoch, " within ",
          timeout.count() / 1000.0, " s (it is in epoch ", membership_epoch_, ")"));
    }
    return absl::DeadlineExceededError(absl::StrCat(
        what, ": parameter-server shard ", config_.shard, " did not reach model version ",
        version, " within ", timeout.count() / 1000.0, " s (it is at ", version_,
        RoundWaitsForPrediction() ? "; the predictor's inference has not finished"
                                  : "; a worker has not pushed",
        ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PullResult> ParamStore::Pull(int rank, int64_t min_version, int bits,
                                            std::chrono::milliseconds timeout,
                                            int64_t membership_epoch,
                                            const std::atomic<bool>* cancelled) {
  std::unique_lock<std::mutex> lock(mu_);
  const std::string who = absl::StrCat("pull of rank ", rank);
  // The rank is checked against the slots first and the epoch's world once the wait is over (a
  // pull may wait for the Init of its epoch).
  auto bad_rank = [&](int workers) {
    return Reject("rank", absl::InvalidArgumentError(absl::StrCat(
                              who, ": rank out of range, the job has ", workers, " workers")));
  };
  if (rank < 0 || rank >= config_.world_size) return bad_rank(config_.world_size);
  if (membership_epoch < 0 || (initialised_ && membership_epoch < membership_epoch_)) {
    return WrongEpoch(who, membership_epoch);
  }
  const bool fresh = bits == kFreshBits && config_.mp2.has_value();
  if (!fresh && !ValidPsBits(bits)) {
    return Reject("size", absl::InvalidArgumentError(
                              absl::StrCat(who, ": bits ", bits, " is not 2, 4, 8, 16 or 32")));
  }
  HPTRAIN_RETURN_IF_ERROR(
      WaitForVersion(lock, min_version, membership_epoch, timeout, who.c_str(), cancelled));
  if (rank >= world_) return bad_rank(world_);
  if (fresh) return PullFresh(rank, min_version);
  std::vector<float>& mirror = mirrors_[rank];
  if (mirror.empty()) {
    if (bits != 32) {
      return Reject("uninitialised", absl::FailedPreconditionError(absl::StrCat(
                                         who, ": a delta needs a full pull (bits 32) first")));
    }
    mirror.assign(params_.size(), 0.0f);
  }
  PullResult result;
  result.version = version_;
  const float* params = params_.data();
  if (version_ == min_version + 1 && !previous_params_.empty()) {
    result.version = min_version;  // the version asked for, not whichever is newest
    params = previous_params_.data();
  }
  int64_t payload = 0;
  for (size_t t = 0; t < layout_.tensor_sizes.size(); ++t) {
    const int64_t n = layout_.tensor_sizes[t];
    absl::StatusOr<std::vector<uint8_t>> bytes =
        EncodeForPull(params + tensor_offsets_[t], mirror.data() + tensor_offsets_[t], n, bits);
    HPTRAIN_RETURN_IF_ERROR(bytes.status(), who, ", tensor ", t);
    payload += static_cast<int64_t>(bytes->size() - comm::kEncodedHeaderBytes);
    result.tensors.push_back(*std::move(bytes));
  }
  pull_bytes_ += payload;
  return result;
}

absl::StatusOr<PullResult> ParamStore::PullFresh(int rank, int64_t version) {
  if (version_ != version || fresh_.empty()) {
    return Reject("stale_step", absl::FailedPreconditionError(absl::StrCat(
                                    "fresh pull of rank ", rank, " for model version ", version,
                                    ": shard ", config_.shard, " is at version ", version_,
                                    fresh_.empty() ? " and has applied no round yet" : "")));
  }
  PullResult result;
  result.version = version_;
  int64_t payload = 0;
  for (const std::vector<float>& values : fresh_) {
    HPTRAIN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                             EncodeValues(values.data(), static_cast<int64_t>(values.size())));
    payload += static_cast<int64_t>(bytes.size() - comm::kEncodedHeaderBytes);
    result.tensors.push_back(std::move(bytes));
  }
  pull_bytes_ += payload;
  return result;
}

absl::StatusOr<ShardState> ParamStore::GetState(int64_t version,
                                                std::chrono::milliseconds timeout,
                                                const std::atomic<bool>* cancelled) {
  std::unique_lock<std::mutex> lock(mu_);
  HPTRAIN_RETURN_IF_ERROR(WaitForVersion(lock, version, -1, timeout, "state", cancelled));
  if (version_ != version) {
    return absl::FailedPreconditionError(absl::StrCat(
        "state of model version ", version, ": shard ", config_.shard, " is already at ",
        version_));
  }
  ShardState state;
  state.version = version_;
  state.optimizer_steps = optimizer_->steps();
  state.sections["params"] = params_;
  if (config_.mp2.has_value()) return state;  // no optimizer: the workers step their own
  for (const auto& [name, values] : optimizer_->state()) state.sections[name] = *values;
  return state;
}

void ParamStore::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  cv_.notify_all();
}

void ParamStore::WakeWaiters() {
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

int64_t ParamStore::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

std::vector<float> ParamStore::Mirror(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < 0 || rank >= static_cast<int>(mirrors_.size())) return {};
  return mirrors_[rank];
}

bool ParamStore::initialised() const {
  std::lock_guard<std::mutex> lock(mu_);
  return initialised_;
}

int64_t ParamStore::membership_epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return membership_epoch_;
}

int ParamStore::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

int ParamStore::world_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return world_;
}

}  // namespace hptrain::ps
