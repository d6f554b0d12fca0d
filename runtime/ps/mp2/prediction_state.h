// PredictionState: the model of one shard's range as MP² evolves it, round by round
// (docs/algorithms.md §1b, "PS, round t"). The PS keeps one per shard; in mode B every worker keeps the
// same one and, fed the same fresh values, reaches bit-identical parameters.
//
// State: the parameters W of the range (its pieces, shard_plan.h), a ring of the last K full
// snapshots of W (Hist), and the next round t. Round t, given the fresh values (the averaged
// pushes: Subset(t) of each predicted piece, whole pieces otherwise):
//   1. for each predicted piece, the complement ∁S_t is predicted from Hist, one batched inference
//      (the predictor, or the zero change: W[∁S_t] stays);
//   2. calibration (optional, off by default): the scalar a = ⟨Δ̂, Δ⟩ / ⟨Δ̂, Δ̂⟩ fitted on S_t, where the true change
//      Δ = fresh − W and the predicted one Δ̂ are both known, clamped to [0, kMaxCalibration],
//      scales the complement's predicted change (no fit while ⟨Δ̂, Δ̂⟩ = 0: a = 1);
//   3. the complement takes W + damping·a·(x̂ − W), the predicted change x̂ − W scaled by the
//      damping d ∈ [0, 1] (and a; 1 without calibration);
//   4. W[S_t] = fresh (whole pieces: W = fresh), W joins Hist, t += 1.
// Damping: an element is refreshed once every C rounds, so between refreshes the predictor keeps
// moving it on what it saw before, with no feedback from the gradients at the positions it moves
// it to — a momentum method whose velocity is up to C − 1 steps late. On LeNet-5 at lr 0.05 and
// momentum 0.9 the full predicted change (d = 1) overshoots and costs 4 points of accuracy in one
// epoch; the job's default d = 0.25 keeps the run within noise of the zero change
// (examples/predictors/README.md).
// Until K rounds have been applied, Hist is filled with copies of the initial W (a constant history,
// whose predicted change is within 1e-8 of zero).
//
// Deterministic: the same inputs give bit-identical results in every process (the predictor's
// per-element forward is fixed, calibration sums in index order in double).
//
// Overlapped (PredictionOptions::overlapped, what jobs use): step 1 of round t reads only the
// history, which is complete once round t − 1 is applied, so the inference of round t starts in
// the background right then (and at Reset), while the workers compute and push round t; Apply(t)
// waits for it if it has not finished. The arithmetic, and so every result, is the same as
// without overlap, bit for bit. PredictionReady() says whether Apply would wait, and
// PendingPrediction() gives the inference to wait on outside a caller's lock.
//
// Thread-safety: none (the caller serialises); the background inference touches only its own
// copy of the history.
#ifndef HPTRAIN_RUNTIME_PS_MP2_PREDICTION_STATE_H_
#define HPTRAIN_RUNTIME_PS_MP2_PREDICTION_STATE_H_

#include <cstdint>
#include <future>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "runtime/ps/mp2/predictor.h"
#include "runtime/ps/mp2/schedule.h"

namespace hptrain::ps::mp2 {

inline constexpr double kMaxCalibration = 4.0;

struct PredictionOptions {
  double push_ratio = 0.1;
  int history = kDefaultHistory;  // K
  uint64_t seed = 0;              // of the schedule
  bool calibration = false;
  double damping = 1.0;           // d: the share of the predicted change applied
  int threads = 1;                // for inference
  bool overlapped = false;        // the inference of round t runs as soon as round t − 1 is applied
};

struct RoundStats {
  double inference_seconds = 0;  // predictor time of the round (in the background when overlapped)
  int64_t predicted = 0;         // elements predicted
  std::vector<double> calibration;  // per piece (1 where not predicted or not fitted)
};

class PredictionState {
 public:
  // `predictor` may be null: the zero change (the ablation); it must outlive the state and have
  // history K. `shard` keys the schedules (schedule.h).
  PredictionState(const PredictionOptions& options, int shard, std::vector<int64_t> piece_sizes,
                  const PredictorRunner* predictor);
  // Waits for an overlapped inference still running (it reads the predictor).
  ~PredictionState();
  PredictionState(const PredictionState&) = delete;
  PredictionState& operator=(const PredictionState&) = delete;

  // W := params at round `round` (the next round applied); the history restarts (K copies).
  absl::Status Reset(std::vector<float> params, int64_t round);
  // W := the newest of `snapshots` (K consecutive models of the range, oldest first), which become
  // the history: for evaluating a predictor on recorded runs.
  absl::Status ResetHistory(const std::vector<std::vector<float>>& snapshots, int64_t round);

  int pieces() const { return static_cast<int>(schedules_.size()); }
  int64_t piece_offset(int piece) const { return offsets_[piece]; }
  const SubsetSchedule& schedule(int piece) const { return schedules_[piece]; }
  // Elements of piece `piece` pushed (and, in mode B, pulled) in round `round`.
  int64_t PushSize(int piece, int64_t round) const;
  // Σ PushSize over the pieces.
  int64_t RoundSize(int64_t round) const;

  // Applies round `round` (must be the next one). fresh[p] has PushSize(p, round) values.
  // InvalidArgument (nothing changed) for the wrong round or sizes.
  absl::Status Apply(int64_t round, const std::vector<std::vector<float>>& fresh,
                     RoundStats* stats = nullptr);

  const std::vector<float>& params() const { return params_; }
  int64_t round() const { return round_; }

  // True when Apply(round()) would not wait for an inference: none is needed (no predictor, or
  // nothing predicted) or the overlapped one has finished.
  bool PredictionReady() const;
  // The overlapped inference of round(), to wait on (valid only while PredictionReady() is false).
  std::shared_future<void> PendingPrediction() const;

 private:
  // One round's inference: x̂ for every element of every predicted piece.
  struct Inference {
    int64_t round = 0;
    std::vector<std::vector<float>> predicted;  // per piece; empty where not predicted
    double seconds = 0;
    std::shared_future<void> done;
  };
  // Copies the history of the predicted pieces and runs the predictor on it for round round_,
  // on a thread of its own when `background`, else before returning. Null without a predictor or
  // when no piece is predicted.
  std::shared_ptr<Inference> StartInference(bool background) const;

  PredictionOptions options_;
  const PredictorRunner* predictor_;
  std::vector<SubsetSchedule> schedules_;
  std::vector<int64_t> offsets_;  // pieces() + 1
  std::vector<float> params_;
  std::vector<std::vector<float>> history_;  // K snapshots, ring
  int64_t newest_ = 0;                       // index of the newest snapshot in history_
  int64_t round_ = 0;
  std::shared_ptr<Inference> inference_;     // overlapped: round round_'s, running or done
};

}  // namespace hptrain::ps::mp2

#endif  // HPTRAIN_RUNTIME_PS_MP2_PREDICTION_STATE_H_
