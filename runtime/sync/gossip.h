// gossip: decentralised training by pairwise model exchange (docs/algorithms.md §4), with no
// all-reduce and no server during training.
//
// Every worker steps its own optimizer on its own mean gradient (as localsgd: the reducer scales
// the summed gradient by B / b_i before the division by B); momentum buffers stay local. After each
// local step the trigger (gossip_trigger.h) decides whether this worker requests an exchange, the
// peer is uniform among the others from the worker's own SplitMix64 stream (seeded from the job's
// seed and the rank), and the handshake (gossip_protocol.h) pairs the workers. Variants:
//   pairwise (default): both partners send their model (S bytes each way) and both set
//     x ← 0.5·(x_lo + x_hi), the two models in rank order, so they end bit-identical; both
//     restart their trigger (x_ref ← x, s ← 0).
//   push (Jin et al.'s gossiping SGD): the initiator sends its model (S one way), the target sets
//     x ← 0.5·(x_lo + x_hi), the initiator keeps its own; both restart their trigger.
//   easgd (elastic averaging): rank 0 also holds the center x̃ (the initial model); a triggered
//     worker exchanges with it (S each way): d = α(x − x̃), x ← x − d, x̃ ← x̃ + d, α = 0.9/N.
//     Rank 0 serves every request of the step, in rank order.
// Synchronize (before every evaluation and checkpoint) replaces every model by the average of
// all (one all-reduce), so the evaluated model is the average model; the triggers restart.
// The handshake is asynchronous by default (gossip_async_protocol.h: each worker answers
// requests at its own step boundaries; easgd's center serves every queued request at once), or
// in lock step with `lockstep` (gossip_protocol.h: the same pairs on every run).
#ifndef HPTRAIN_RUNTIME_SYNC_GOSSIP_H_
#define HPTRAIN_RUNTIME_SYNC_GOSSIP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/base/splitmix64.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/p2p_channel.h"
#include "runtime/job/job_spec.h"
#include "runtime/sync/gossip_async_protocol.h"
#include "runtime/sync/gossip_protocol.h"
#include "runtime/sync/gossip_trigger.h"
#include "runtime/sync/strategy.h"

namespace hptrain::sync {

enum class GossipVariant { kPairwise, kPush, kEasgd };

struct GossipOptions {
  GossipTriggerOptions trigger;
  GossipVariant variant = GossipVariant::kPairwise;
  // The handshake: false (default), asynchronous (gossip_async_protocol.h: no per-step
  // synchronisation, a slow worker exchanges less often); true, in lock step (gossip_protocol.h:
  // request words from every worker at every step, reproducible bit for bit).
  bool lockstep = false;
  uint64_t seed = 42;  // the job's seed; each rank draws peers from its own stream
};

// Builds the options from spec.strategy (defaults of docs/algorithms.md §4b for unset fields) and
// the job's seed.
GossipOptions GossipOptionsFor(const StrategyOptions& strategy, uint64_t seed);
GossipOptions GossipOptionsFor(const job::JobSpec& job);

class GossipStrategy : public Strategy, public SummingReducer, public ModelAverager {
 public:
  // `comm` must have a point-to-point transport (Communicator::transport()) when size() > 1.
  GossipStrategy(comm::Communicator* comm, const GossipOptions& options);

  std::string name() const override { return "gossip"; }
  GradientReducer* reducer() override { return this; }
  ModelAverager* averager() override { return this; }
  absl::Status ReduceSum(const StepInfo& step, int bucket, absl::Span<float> gradients) override;
  absl::Status Start(absl::Span<float> parameters, int64_t step,
                     const CheckpointSections& restored) override;
  // The trigger, and an exchange when it fires or a request is served; the model's buffers
  // travel with its parameters. Never a synchronization of all workers (returns false).
  absl::StatusOr<bool> Average(const StepInfo& step, const ModelView& model) override;
  absl::Status Synchronize(int64_t steps_done, absl::Span<float> parameters) override;
  StrategyStats stats() const override;

  // Exchanges this worker took part in (as initiator or target; easgd: with the center).
  int64_t exchanges() const { return exchanges_; }
  // Point-to-point byte counters (payload = models; control = request words); null when the
  // job has one worker.
  const comm::P2pCounters* counters() const { return channel_ ? &channel_->counters() : nullptr; }
  const GossipTrigger& trigger() const { return trigger_; }
  // The partner of the last step's exchange (easgd: 0, the center's holder), or -1.
  int last_partner() const { return last_partner_; }
  // Called after every exchange this worker takes part in (for tracing), with the partner and
  // the model it then holds (easgd's center holder: its unchanged x).
  using ExchangeObserver = std::function<void(int partner, absl::Span<const float> x)>;
  void set_exchange_observer(ExchangeObserver observer) { observer_ = std::move(observer); }

 private:
  int PickPeer();
  // x := (x + peer) / 2, summed in rank order (partner's rank against ours).
  void AverageWithPeer(int partner, absl::Span<float> x, const float* peer);
  // pairwise: v and the partner's swapped (`peer` receives it) and both set to their average;
  // push: the initiator's v goes one way and the target averages it in.
  absl::Status Mix(int partner, bool initiator, absl::Span<float> v, std::vector<float>* peer);
  absl::Status Elastic(bool due, absl::Span<float> x);
  // The asynchronous handshake's step boundary.
  absl::Status AsyncStep(bool due, absl::Span<float> x);
  // The exchange with `partner` (`initiator`: this worker asked), as the variant says.
  absl::Status Exchange(int partner, bool initiator, absl::Span<float> x);
  absl::Status AfterStep(const StepInfo& step, absl::Span<float> parameters);
  // easgd, rank 0: x̃ moves toward `other` by α (and x toward x̃ when `own`: other is x).
  void MoveCenter(const float* other, bool own, absl::Span<float> x);
  // easgd, rank 0 serving `worker`: x̃ out, the worker's x in, x̃ moves toward it.
  absl::Status ServeCenter(int worker, absl::Span<float> x);
  // easgd, another rank: x out, x̃ in, x ← x − α(x − x̃).
  absl::Status ExchangeWithCenter(absl::Span<float> x);

  comm::Communicator* comm_;
  GossipOptions options_;
  std::unique_ptr<comm::P2pChannel> channel_;
  std::unique_ptr<GossipProtocol> protocol_;
  std::unique_ptr<AsyncGossipProtocol> async_;
  GossipTrigger trigger_;
  SplitMix64 rng_;
  std::vector<float> peer_;    // the partner's model during an exchange
  absl::Span<float> buffers_;  // the model's buffers (ModelView::buffers), exchanged with it
  std::vector<float> peer_buffers_;
  std::vector<float> center_;  // easgd, rank 0: x̃
  int64_t exchanges_ = 0;
  int64_t steps_ = 0;
  int last_partner_ = -1;
  ExchangeObserver observer_;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_GOSSIP_H_
