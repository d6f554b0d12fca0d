// gossip: see gossip.h and docs/algorithms.md §4.
//
// Bytes per exchange (§4c): pairwise and easgd move the model, S = 4P bytes, each way; push moves
// S one way. The request words add 8 bytes per pair of workers and direction per step (counted
// as control bytes by the P2pChannel, apart from the payload).
#include "runtime/sync/gossip.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/update/update.h"
#include "runtime/base/status.h"
#include "runtime/sync/registry.h"

namespace hptrain::sync {
namespace {

uint64_t RankSeed(uint64_t seed, int rank) {
  return seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL * static_cast<uint64_t>(rank + 1);
}

}  // namespace

GossipOptions GossipOptionsFor(const job::JobSpec& job) {
  return GossipOptionsFor(job.strategy, job.seed);
}

GossipOptions GossipOptionsFor(const StrategyOptions& s, uint64_t seed) {
  // gossip's parameters (strategy_descriptors.cc), as validated.
  GossipOptions options;
  options.trigger.threshold = s.Number("threshold");
  options.trigger.max_interval = static_cast<int>(s.Int("maxInterval"));
  options.trigger.min_interval = static_cast<int>(s.Int("minInterval"));
  options.trigger.period = static_cast<int>(s.Int("period"));  // unset: 0, adaptive
  // Self-calibration (§4g) unless the job sets θ or a fixed period, or turns it off.
  options.trigger.calibrate =
      s.Has("calibrate") ? s.Bool("calibrate") : !s.Has("threshold") && !s.Has("period");
  options.trigger.calibration_period = s.Int("targetInterval");  // K
  options.trigger.calibration_steps = s.Int("calibrationSteps");
  options.trigger.calibration_factor = 1.0;  // θ = median δ over K steps
  if (s.String("variant") == "push") options.variant = GossipVariant::kPush;
  if (s.String("variant") == "easgd") options.variant = GossipVariant::kEasgd;
  options.seed = seed;
  options.lockstep = s.Bool("lockstep");
  return options;
}

GossipStrategy::GossipStrategy(comm::Communicator* comm, const GossipOptions& options)
    : comm_(comm),
      options_(options),
      trigger_(options.trigger),
      rng_(RankSeed(options.seed, comm->rank())) {
  traits_ = DeclaredTraits(name());
  if (comm_->size() > 1 && comm_->transport() != nullptr) {
    channel_ = std::make_unique<comm::P2pChannel>(comm_->transport());
    protocol_ = std::make_unique<GossipProtocol>(channel_.get());
  }
}

absl::Status GossipStrategy::ReduceSum(const StepInfo& step, int, absl::Span<float> gradients) {
  if (step.local_batch <= 0) {
    std::fill(gradients.begin(), gradients.end(), 0.0f);
  } else {
    kernels::Scale(gradients.data(), gradients.size(),
                   static_cast<float>(step.global_batch) / static_cast<float>(step.local_batch));
  }
  return absl::OkStatus();
}

absl::Status GossipStrategy::Start(absl::Span<float> parameters, int64_t,
                                   const CheckpointSections&) {
  if (comm_->size() > 1 && channel_ == nullptr) {
    return absl::FailedPreconditionError(
        "strategy gossip needs point-to-point channels, which this communicator back end lacks");
  }
  trigger_.Reset(parameters);
  peer_.resize(parameters.size());
  if (options_.variant == GossipVariant::kEasgd && comm_->rank() == 0) {
    center_.assign(parameters.begin(), parameters.end());
  }
  if (!options_.lockstep && channel_ != nullptr && async_ == nullptr) {
    channel_->StartInbox();
    const bool center = options_.variant == GossipVariant::kEasgd && comm_->rank() == 0;
    async_ = std::make_unique<AsyncGossipProtocol>(channel_.get(), /*serve_all=*/center);
  }
  return absl::OkStatus();
}

int GossipStrategy::PickPeer() {
  const int me = comm_->rank();
  int peer = static_cast<int>(rng_.Below(static_cast<uint64_t>(comm_->size() - 1)));
  return peer >= me ? peer + 1 : peer;
}

absl::StatusOr<bool> GossipStrategy::Average(const StepInfo& step, const ModelView& model) {
  buffers_ = model.buffers;
  HPTRAIN_RETURN_IF_ERROR(AfterStep(step, model.parameters));
  return false;
}

absl::Status GossipStrategy::AfterStep(const StepInfo& step, absl::Span<float> parameters) {
  ++steps_;
  last_partner_ = -1;
  if (async_ != nullptr) {
    // Requests are served even by a worker whose own trigger never fires.
    const bool due = trigger_.can_fire() && trigger_.Step(parameters);
    return Annotate(AsyncStep(due, parameters), absl::StrCat("gossip at step ", step.step));
  }
  if (channel_ == nullptr || !trigger_.can_fire()) return absl::OkStatus();
  const bool due = trigger_.Step(parameters);
  if (options_.variant == GossipVariant::kEasgd) {
    return Annotate(Elastic(due, parameters), absl::StrCat("gossip (easgd) at step ", step.step));
  }
  const int target = due && !protocol_->waiting() ? PickPeer() : -1;
  auto pairing = protocol_->Round(target);
  if (!pairing.ok()) {
    return Annotate(pairing.status(), absl::StrCat("gossip at step ", step.step));
  }
  if (pairing->partner < 0) return absl::OkStatus();
  last_partner_ = pairing->partner;
  absl::Status status = Exchange(pairing->partner, pairing->initiator, parameters);
  return Annotate(status, absl::StrCat("gossip at step ", step.step));
}

void GossipStrategy::AverageWithPeer(int partner, absl::Span<float> x, const float* peer) {
  // x_lo + x_hi in rank order: the same operations on both partners, so they end bit-identical.
  const bool low = comm_->rank() < partner;
  const float* lo = low ? x.data() : peer;
  const float* hi = low ? peer : x.data();
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * (lo[i] + hi[i]);
}

absl::Status GossipStrategy::Elastic(bool due, absl::Span<float> x) {
  const int n = comm_->size();
  const int me = comm_->rank();
  // Requests go to the center's holder, rank 0; every rank learns who asked this step.
  std::vector<int64_t> words(n, due ? 0 : -1), requests(n, -1);
  HPTRAIN_RETURN_IF_ERROR(channel_->ExchangeWords(words, absl::MakeSpan(requests)),
                          "gossip requests");
  requests[me] = due ? 0 : -1;
  if (me != 0) {
    if (!due) return absl::OkStatus();
    last_partner_ = 0;
    HPTRAIN_RETURN_IF_ERROR(ExchangeWithCenter(x));
    ++exchanges_;
    trigger_.Reset(x);
    return absl::OkStatus();
  }
  // Rank 0 serves the step's requests in rank order, its own first.
  for (int i = 0; i < n; ++i) {
    if (requests[i] < 0) continue;
    if (i != 0) {
      HPTRAIN_RETURN_IF_ERROR(ServeCenter(i, x));
      continue;
    }
    MoveCenter(x.data(), /*own=*/true, x);
    ++exchanges_;
    trigger_.Reset(x);
  }
  return absl::OkStatus();
}

absl::Status GossipStrategy::ExchangeWithCenter(absl::Span<float> x) {
  const size_t bytes = x.size() * sizeof(float);
  HPTRAIN_RETURN_IF_ERROR(channel_->Transfer(0, x.data(), bytes, peer_.data(), bytes));
  const float alpha = 0.9f / static_cast<float>(comm_->size());
  for (size_t k = 0; k < x.size(); ++k) x[k] -= alpha * (x[k] - peer_[k]);
  return absl::OkStatus();
}

absl::Status GossipStrategy::ServeCenter(int worker, absl::Span<float> x) {
  const size_t bytes = x.size() * sizeof(float);
  HPTRAIN_RETURN_IF_ERROR(
      channel_->Transfer(worker, center_.data(), bytes, peer_.data(), bytes));
  MoveCenter(peer_.data(), /*own=*/false, x);
  return absl::OkStatus();
}

absl::Status GossipStrategy::AsyncStep(bool due, absl::Span<float> x) {
  const bool center = options_.variant == GossipVariant::kEasgd && comm_->rank() == 0;
  if (center && due) {  // the center's holder moves toward x̃ without a message
    MoveCenter(x.data(), /*own=*/true, x);
    ++exchanges_;
    trigger_.Reset(x);
  }
  auto pick = [&]() -> int {
    if (!due || center) return -1;
    return options_.variant == GossipVariant::kEasgd ? 0 : PickPeer();
  };
  auto exchange = [&](int partner, bool initiator) {
    return Exchange(partner, initiator, x);
  };
  HPTRAIN_RETURN_IF_ERROR(async_->Boundary(pick, exchange));
  if (!async_->partners().empty()) last_partner_ = async_->partners().back();
  return absl::OkStatus();
}

void GossipStrategy::MoveCenter(const float* other, bool own, absl::Span<float> x) {
  const float alpha = 0.9f / static_cast<float>(comm_->size());
  for (size_t k = 0; k < x.size(); ++k) {
    const float d = alpha * (other[k] - center_[k]);
    if (own) x[k] -= d;
    center_[k] += d;
  }
}

absl::Status GossipStrategy::Mix(int partner, bool initiator, absl::Span<float> v,
                                 std::vector<float>* peer) {
  const size_t bytes = v.size() * sizeof(float);
  peer->resize(v.size());
  const bool push = options_.variant == GossipVariant::kPush;
  if (push && initiator) return channel_->Transfer(partner, v.data(), bytes, nullptr, 0);
  HPTRAIN_RETURN_IF_ERROR(channel_->Transfer(partner, push ? nullptr : v.data(), push ? 0 : bytes,
                                             peer->data(), bytes));
  AverageWithPeer(partner, v, peer->data());
  return absl::OkStatus();
}

// One exchange of either handshake (pairwise, push, easgd's with the center), S = 4P bytes each
// way (push: one way), and the model's buffers after the parameters (pairwise, push).
absl::Status GossipStrategy::Exchange(int partner, bool initiator, absl::Span<float> x) {
  switch (options_.variant) {
    case GossipVariant::kPairwise:
    case GossipVariant::kPush:
      HPTRAIN_RETURN_IF_ERROR(Mix(partner, initiator, x, &peer_));
      if (!buffers_.empty()) {
        HPTRAIN_RETURN_IF_ERROR(Mix(partner, initiator, buffers_, &peer_buffers_));
      }
      break;
    case GossipVariant::kEasgd:
      if (comm_->rank() == 0) {
        // The center's holder keeps its own x and trigger when it serves a worker.
        HPTRAIN_RETURN_IF_ERROR(ServeCenter(partner, x));
        if (observer_) observer_(partner, x);
        return absl::OkStatus();
      }
      HPTRAIN_RETURN_IF_ERROR(ExchangeWithCenter(x));
      break;
  }
  ++exchanges_;
  trigger_.Reset(x);
  if (observer_) observer_(partner, x);
  return absl::OkStatus();
}

absl::Status GossipStrategy::Synchronize(int64_t, absl::Span<float> parameters) {
  if (comm_->size() == 1) return absl::OkStatus();
  if (async_ != nullptr) {
    // No request may be left waiting while every worker sits in the all-reduce.
    auto exchange = [&](int partner, bool initiator) {
      return Exchange(partner, initiator, parameters);
    };
    HPTRAIN_RETURN_IF_ERROR(async_->Quiesce(exchange), "gossip: before averaging the models");
  }
  kernels::Scale(parameters.data(), parameters.size(), 1.0f / static_cast<float>(comm_->size()));
  HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSum(parameters.data(), parameters.size()),
                          "gossip: averaging the models");
  trigger_.Reset(parameters);
  return absl::OkStatus();
}

StrategyStats GossipStrategy::stats() const {
  StrategyStats s;
  // Local steps per exchange so far (hptrain_sync_interval).
  s.interval =
      static_cast<int>(std::max<int64_t>(1, exchanges_ > 0 ? steps_ / exchanges_ : steps_));
  s.exchanges = exchanges_;
  const bool adaptive = options_.trigger.period <= 0 && !trigger_.calibrating();
  s.gossip_threshold = adaptive ? trigger_.threshold() : 0.0;
  return s;
}

bool gossip_registered = RegisterStrategy(
    "gossip", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      return std::make_unique<GossipStrategy>(context.comm, GossipOptionsFor(*context.options, context.seed));
    });

}  // namespace hptrain::sync
