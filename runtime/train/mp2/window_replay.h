// Replaying a recorded window of full snapshots (dataset.h) through MP²'s online round logic, to
// judge a predictor by what it does to the model rather than by its one-step regression error
// (docs/algorithms.md §1b, "prediction-result-based" selection).
//
// Replay of a window s_0 .. s_{L−1} with history K, push ratio ρ and C = RoundsPerCycle(ρ):
//   1. the state starts from the window's first K snapshots (s_{K−1} is the model, all K the
//      history);
//   2. rounds j = 0 .. R−1, R = L − K, each with pushes as an online round has them: the
//      replayed model moved by the recorded run's true step s_{K+j} − s_{K+j−1} (what a worker's
//      local step from the PS's model does), its elements Subset(round) for every predicted
//      tensor, every other tensor whole; the rest of each predicted tensor is predicted (damped
//      and, with calibration, scaled) as the PS would do it;
//   3. the result is compared with the true s_{K+R−1} over the elements predicted in the last
//      round.
// After C rounds every element was last refreshed between 0 and C−1 rounds ago, the steady state
// of an online run, so the comparison includes compounded predictions; the zero change, which
// moves an element one step in C, falls behind the recorded run by the steps it missed.
//
// Three methods: a predictor (PredictionState with a PredictorRunner), the zero change
// (PredictionState with no predictor: the partial-sync ablation of §1d) and linear extrapolation
// x_K + (x_K − x_{K−1}), which has no network and is replayed by the same rules here.
//
// WindowJudge replays every window of a held-out dataset and scores a method by the mean error and
// the mean accuracy of the replayed models against that of the true snapshots.
//
// Nothing here uses libtorch; the network's accuracy is measured by a function the caller gives
// (model_evaluator.h).
#ifndef HPTRAIN_RUNTIME_TRAIN_MP2_WINDOW_REPLAY_H_
#define HPTRAIN_RUNTIME_TRAIN_MP2_WINDOW_REPLAY_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/ps/mp2/dataset.h"
#include "runtime/ps/mp2/predictor.h"

namespace hptrain::train::mp2 {

enum class ReplayMethod { kPredictor, kZero, kLinear };

struct ReplayOptions {
  double push_ratio = 0.1;  // ρ in (0, 1]
  bool calibration = false;
  double damping = 1.0;  // the share of the predicted change applied (prediction_state.h)
  int history = ps::mp2::kDefaultHistory;  // K
  uint64_t seed = 0;                       // of the push schedule
  int threads = 1;                         // for inference
};

struct ReplayResult {
  std::vector<float> params;  // the replayed model after the last round
  int64_t truth = 0;          // index in the window of the true snapshot to compare with
  int rounds = 0;             // R
  int64_t predicted = 0;      // elements predicted in the last round
  double mse = 0;             // mean squared error over them (0 when none)
  double inference_seconds = 0;
};

// True when the window holds at least K + 1 snapshots (one round to replay).
bool Replayable(const ps::mp2::SnapshotWindow& window, int history);

// Replays `window` of `data` by `method`; `predictor` must be non-null with history K for
// kPredictor and is ignored otherwise. InvalidArgument when the window is too short, a snapshot
// has the wrong size or the predictor's history differs from options.history.
absl::StatusOr<ReplayResult> ReplayWindow(const ps::mp2::SnapshotDataset& data,
                                          const ps::mp2::SnapshotWindow& window,
                                          const ReplayOptions& options, ReplayMethod method,
                                          const ps::mp2::PredictorRunner* predictor);

// The accuracy of the network with the given flat parameters.
using AccuracyFn = std::function<absl::StatusOr<double>(const std::vector<float>& params)>;

struct WindowScore {
  int windows = 0;  // replayed
  double mse = 0;   // mean over the windows of ReplayResult::mse
  double accuracy = std::numeric_limits<double>::quiet_NaN();       // mean; NaN: not measured
  double accuracy_true = std::numeric_limits<double>::quiet_NaN();  // mean over the true snapshots
  double inference_seconds = 0;                                     // Σ over the windows
};

// Not thread-safe; `data` must outlive the judge.
class WindowJudge {
 public:
  // `accuracy` may be empty: only errors are measured.
  WindowJudge(const ps::mp2::SnapshotDataset& data, ReplayOptions options, AccuracyFn accuracy);

  const ReplayOptions& options() const { return options_; }
  // The windows long enough to replay (Replayable).
  int windows() const { return static_cast<int>(replayable_.size()); }

  // Replays every replayable window by `method`. The true snapshots' accuracies are measured once
  // and kept for later calls. FailedPrecondition when no window is replayable; ReplayWindow's and
  // the accuracy function's errors otherwise.
  absl::StatusOr<WindowScore> Score(ReplayMethod method, const ps::mp2::PredictorRunner* predictor);

 private:
  const ps::mp2::SnapshotDataset& data_;
  ReplayOptions options_;
  AccuracyFn accuracy_;
  std::vector<int> replayable_;        // window indices
  std::vector<double> true_accuracy_;  // per replayable window; NaN until measured
};

}  // namespace hptrain::train::mp2

#endif  // HPTRAIN_RUNTIME_TRAIN_MP2_WINDOW_REPLAY_H_
