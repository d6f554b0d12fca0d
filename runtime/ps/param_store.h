// ParamStore: the state of one parameter-server shard (docs/algorithms.md §5b): the parameters of its
// range, the job's optimizer over them, the model version, the rounds being aggregated and a
// mirror of every worker's copy. No gRPC here: the service (ps_service.h) and in-process tests
// call it directly.
//
// Rounds: version v means v optimizer steps applied. A push belongs to round t and is accepted
// while v ≤ t ≤ v + max_lead (the staleness bound). Each rank's pushes of a round must cover the
// shard's range exactly once, in whole tensors (the layout's pieces: shard_plan.h). When every rank has covered it, the pushes are
// summed in rank order (rank 0's values, then + rank 1's, ...), multiplied by 1/B, and the
// optimizer steps once with the round's learning rate: version v+1 is published and waiting pulls
// wake. Round v+1 may already be complete then; it is applied next.
//
// mp2's prediction is overlapped (mp2/prediction_state.h): a round's inference starts when the
// round before is applied, and a round whose pushes are complete before it has finished is applied
// by the first pull (or GetState) that needs it, which waits for the inference outside the lock.
// Pushes never wait for it.
//
// A pull is served at exactly min_version when the model has moved one version past it (the shard
// keeps the version before the current one while pushes may run ahead), so what a worker gets
// does not depend on how its pull and the other workers' pushes interleave.
//
// mp2 (ParamStoreConfig::mp2, docs/algorithms.md §1): pushes are parameter VALUES, each piece holding
// the values of the round's subset (mp2/schedule.h) or the whole piece when it is not predicted,
// cut by the schedule the push's fingerprint names. A round's pushes are averaged weighted by
// batch (Σ_i b_i·v_i in rank order, × 1/B) and handed to the shard's PredictionState, which
// predicts the complement; there is no optimizer. Pulls at bits 32 return the parameters (mode
// A); at kFreshBits (mode B) the averaged fresh values of the last round, which every worker
// feeds to its own PredictionState.
//
// Membership epochs (docs/elastic.md, "Parameter servers"): with ParamStoreConfig::elastic the
// world size is each Init's (layout.world_size, anything from 1 to the config's, the job's worker
// slots), and rounds complete when every rank of that world has pushed. Every Init names the
// membership epoch it starts; a later Init (rank 0 of a new epoch re-initialising the shard for
// its members) drops the pending rounds and mirrors and wakes every waiting Pull and GetState with
// Aborted. Pushes and pulls carry their epoch: one of another epoch than the shard's is refused
// (reason "membership"), so a push of a dead epoch still in flight never enters the new epoch's
// round; a pull of a newer epoch waits for that epoch's Init, as a pull before the first Init
// does. Non-elastic jobs are always in epoch 0.
//
// Every rejection leaves the parameters, the version and the round's accumulated pushes as they
// were, and its message names what was wrong in one line.
//
// Thread-safety: all methods may be called concurrently; one mutex guards the state, and Pull and
// GetState wait on a condition variable outside it.
#ifndef HPTRAIN_RUNTIME_PS_PARAM_STORE_H_
#define HPTRAIN_RUNTIME_PS_PARAM_STORE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/job/job_spec.h"
#include "runtime/ps/mp2/prediction_state.h"
#include "runtime/optim/optimizer.h"

namespace hptrain::ps {

// Pull bits for mp2 mode B: the fresh values of the last round applied.
inline constexpr int kFreshBits = 0;

struct Mp2StoreConfig {
  mp2::PredictionOptions prediction;
  const mp2::PredictorRunner* predictor = nullptr;  // null: the zero change; outlives the store
};

struct ParamStoreConfig {
  int shard = 0;
  // The job's workers; elastic: its worker slots, the most an Init may declare.
  int world_size = 1;
  // spec.elastic: every Init declares the world size of its membership epoch, 1 .. world_size.
  // Otherwise an Init must declare exactly world_size.
  bool elastic = false;
  int global_batch = 1;  // B: the aggregate is Σ pushes / B
  job::OptimizerSpec optimizer;
  int max_lead = 0;  // the staleness bound s: rounds up to version + s are accepted
  std::optional<Mp2StoreConfig> mp2;  // set: parameter averaging with prediction (mp2)
};

struct ShardLayoutInfo {
  int shard = 0;
  int shards = 1;
  int64_t begin = 0;
  int64_t end = 0;
  std::vector<int64_t> tensor_sizes;  // the shard's pieces (shard_plan.h); sum = end − begin
  int world_size = 0;
  int64_t membership_epoch = 0;  // the epoch this Init starts (docs/elastic.md); 0: not elastic
};

struct PushInfo {
  int rank = 0;
  int64_t step = 0;
  int64_t version = 0;  // the version the gradient was computed on
  int batch_size = 0;
  double lr = 0;
  int64_t begin = 0;
  int64_t end = 0;
  uint64_t schedule = 0;  // mp2: mp2::ScheduleFingerprint of the subsets pushed
  int64_t membership_epoch = 0;  // the epoch the pushing worker trains in
};

// A shard's parameters and optimizer state: "params", "momentum", "adam.m", "adam.v".
struct ShardState {
  int64_t version = 0;
  int64_t optimizer_steps = 0;
  std::map<std::string, std::vector<float>> sections;
};

struct PullResult {
  int64_t version = 0;
  std::vector<std::vector<uint8_t>> tensors;  // encoded, one per tensor of the shard
};

class ParamStore {
 public:
  // Called for every refused call with a short reason ("stale_step", "future_step", "size",
  // "duplicate", "rank", "lr", "uninitialised", "layout", "subset", "membership"), for a metric.
  using RejectObserver = std::function<void(const std::string& reason)>;
  // Called when a round is applied, with the seconds from its first push to its last.
  using RoundObserver = std::function<void(double aggregation_wait_seconds)>;

  explicit ParamStore(ParamStoreConfig config);

  void set_on_rejected(RejectObserver fn) { on_rejected_ = std::move(fn); }
  void set_on_round(RoundObserver fn) { on_round_ = std::move(fn); }
  // mp2: called after every round with its prediction statistics.
  void set_on_prediction(std::function<void(const mp2::RoundStats&)> fn) {
    on_prediction_ = std::move(fn);
  }

  // Sets the layout, the world size, the membership epoch and the state (sections["params"], plus
  // the optimizer's sections when resuming) at `state.version`; clears pending rounds and mirrors.
  // On a shard already initialised it also wakes every waiting Pull and GetState with Aborted.
  // Errors: InvalidArgument when the layout is not this shard's or disagrees with the job (world
  // size), or a section has the wrong size; FailedPrecondition for an epoch older than the
  // shard's. A refused Init changes nothing.
  absl::Status Init(int rank, const ShardLayoutInfo& layout, const ShardState& state);

  // Takes one push (see the class comment). Returns the version after it (which may have moved on
  // if the push completed a round). FailedPrecondition for a push of another membership epoch.
  absl::StatusOr<int64_t> Push(const PushInfo& push,
                               const std::vector<std::vector<uint8_t>>& tensors);

  // Waits until initialised for `membership_epoch` (or a later one) and the version is
  // ≥ min_version (DeadlineExceeded after `timeout`, Cancelled on Shutdown or once `*cancelled` is
  // true and WakeWaiters was called, Aborted when the shard is re-initialised meanwhile), then
  // encodes the shard for `rank` at `bits` (ps_codec.h), updating its mirror. A delta (bits < 32)
  // needs an earlier full pull by the same rank. FailedPrecondition for a pull of an epoch older
  // than the shard's.
  absl::StatusOr<PullResult> Pull(int rank, int64_t min_version, int bits,
                                  std::chrono::milliseconds timeout, int64_t membership_epoch = 0,
                                  const std::atomic<bool>* cancelled = nullptr);

  // Waits for version `version` (as Pull, in whichever epoch the shard is in) and returns the
  // state at it; FailedPrecondition once the model has moved past it.
  absl::StatusOr<ShardState> GetState(int64_t version, std::chrono::milliseconds timeout,
                                      const std::atomic<bool>* cancelled = nullptr);

  // Wakes every waiting call with Cancelled; later waits fail at once.
  void Shutdown();
  // Wakes every waiting call to look at its `cancelled` flag again (LocalPsConnection's
  // CancelPending); the others go on waiting.
  void WakeWaiters();

  int64_t version() const;
  bool initialised() const;
  int64_t membership_epoch() const;
  int world_size() const;  // the current epoch's (the config's before the first Init)
  int waiting() const;     // Pull and GetState calls waiting now; for tests and diagnostics
  // The PS's mirror of `rank`'s copy (empty before its first pull); for tests and diagnostics.
  std::vector<float> Mirror(int rank) const;
  int64_t push_bytes() const { return push_bytes_.load(); }  // payload bytes taken in pushes
  int64_t pull_bytes() const { return pull_bytes_.load(); }  // payload bytes sent in pulls

 private:
  struct Round {
    double lr = 0;
    bool have_lr = false;
    std::vector<int> batch;                   // per rank, b_i (mp2)
    std::vector<std::vector<float>> sums;     // per rank, the shard's range (allocated lazily)
    std::vector<std::vector<char>> covered;   // per rank, per tensor
    std::vector<int> tensors_covered;         // per rank
    int ranks_complete = 0;
    std::chrono::steady_clock::time_point first_push;
  };

  absl::Status Reject(const std::string& reason, absl::Status status);
  // Applies complete rounds in order. Called with mu_ held.
  void ApplyReadyRounds();
  // mp2's round: the weighted average of the pushed values, then the prediction.
  void ApplyMp2Round(int64_t step, Round& round);
  // The number of values tensor t of a push for `step` carries.
  int64_t PushedSize(int t, int64_t step) const;
  // mp2 mode B's pull (kFreshBits), with mu_ held and the version reached.
  absl::StatusOr<PullResult> PullFresh(int rank, int64_t version);
  // mp2: the next round has every push but is not applied: its overlapped inference had not
  // finished when its last push came. mu_ held.
  bool RoundWaitsForPrediction() const;
  // Waits, with mu_ held through `lock`, until the shard is initialised for `epoch` (−1: any) and
  // the version is ≥ `version`; in mp2 it applies the rounds whose inference it waited for.
  // Aborted when the shard is re-initialised during the wait, FailedPrecondition when it was
  // initialised for a later epoch than `epoch`.
  absl::Status WaitForVersion(std::unique_lock<std::mutex>& lock, int64_t version, int64_t epoch,
                              std::chrono::milliseconds timeout, const char* what,
                              const std::atomic<bool>* cancelled);
  // The refusal of a call of `epoch` by a shard in another epoch (reason "membership").
  absl::Status WrongEpoch(const std::string& what, int64_t epoch);

  const ParamStoreConfig config_;
  RejectObserver on_rejected_;
  RoundObserver on_round_;
  std::function<void(const mp2::RoundStats&)> on_prediction_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool initialised_ = false;
  bool shutdown_ = false;
  int world_ = 0;                  // the current epoch's world size (Init's)
  int64_t membership_epoch_ = 0;   // the epoch of the last Init
  int64_t inits_ = 0;              // Inits taken: a wait that sees it change was re-initialised
  int waiting_ = 0;                // calls inside WaitForVersion
  ShardLayoutInfo layout_;
  std::vector<int64_t> tensor_offsets_;  // offset of each tensor within the shard
  std::vector<float> params_;
  std::vector<float> previous_params_;  // version_ − 1's, kept when max_lead > 0
  std::unique_ptr<optim::Optimizer> optimizer_;
  int64_t version_ = 0;
  std::map<int64_t, Round> rounds_;
  std::vector<std::vector<float>> mirrors_;  // per rank; empty before its first full pull
  // mp2: the prediction state of the shard, and the fresh values of the last round applied.
  std::unique_ptr<mp2::PredictionState> prediction_;
  std::vector<std::vector<float>> fresh_;
  std::atomic<int64_t> push_bytes_{0};
  std::atomic<int64_t> pull_bytes_{0};
};

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_PARAM_STORE_H_
