// Offline training and selection of MP²'s predictor (docs/algorithms.md §1b, "Offline predictor
// training" and "SELECTION"), the library behind `hptrain mp2 train`.
//
//   1. Examples: every traced element of a snapshot dataset (dataset.h) and every recorded round t
//      with t ≥ K−1 and t+1 < rounds give one example: the history x_1..x_K = the element's values
//      at rounds t−K+1..t, normalised (normalize.h) into the 2×K input, and the target
//      (y − x_K)/scale with y the value at t+1, clamped to [−0.999, 0.999] (tanh's range).
//   2. Training: for each candidate width C, a fresh PredictorNet (seeded), Adam (lr 1e-3), MSE,
//      batches of 1024; every epoch draws at most `examples_per_epoch` examples with a seeded
//      RNG. The model after every epoch is a candidate.
//   3. Selection ("prediction-result-based"): candidates are replayed on the held-out dataset's
//      windows (window_replay.h) and ranked by the mean accuracy drop of the network that uses
//      their predictions against the true snapshots (ties: the lower replay MSE). Only the last
//      epoch of each width is judged, or every epoch with `every_epoch`.
// Deterministic for a given seed and thread count (libtorch's CPU kernels may sum in another
// order with more threads).
#ifndef HPTRAIN_RUNTIME_TRAIN_MP2_PREDICTOR_TRAINING_H_
#define HPTRAIN_RUNTIME_TRAIN_MP2_PREDICTOR_TRAINING_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/ps/mp2/dataset.h"
#include "runtime/ps/mp2/predictor.h"
#include "runtime/train/mp2/window_replay.h"

namespace hptrain::train::mp2 {

// Step 1's examples over one or more datasets, cut for history K. The datasets are referenced,
// not copied: they must outlive this object. Read-only after Add; Fill may run concurrently.
class TraceExamples {
 public:
  explicit TraceExamples(int history) : history_(history) {}

  // Adds `data`'s examples (none when it has fewer than K + 1 rounds or no traces).
  // InvalidArgument when its traces do not hold rounds × TraceWidth() values.
  absl::Status Add(const ps::mp2::SnapshotDataset& data);

  int history() const { return history_; }
  int64_t size() const { return offsets_.empty() ? 0 : offsets_.back(); }

  // For examples indices[0, n): inputs[i·2K, (i+1)·2K) = the values then the diffs of example
  // indices[i], targets[i] = its clamped normalised change. Indices in [0, size()).
  void Fill(const int64_t* indices, int64_t n, float* inputs, float* targets) const;

  // Example i's raw history (K values, oldest first) and next value.
  void Raw(int64_t i, float* history, float* next) const;

  // min(max_examples, size()) distinct indices in random order drawn from `seed`
  // (max_examples ≤ 0: all).
  std::vector<int64_t> Sample(int64_t max_examples, uint64_t seed) const;

 private:
  // Example i lives in dataset d where offsets_[d] ≤ i < offsets_[d + 1].
  void Locate(int64_t i, const float** first, int64_t* stride) const;

  int history_;
  std::vector<const ps::mp2::SnapshotDataset*> datasets_;
  std::vector<int64_t> offsets_;  // datasets_.size() + 1 once one was added
};

// One-step regression errors in normalised units over `indices`: of `predictor` (NaN when null),
// of the zero change and of linear extrapolation (diffs[K−1]).
struct RegressionErrors {
  double predictor = std::numeric_limits<double>::quiet_NaN();
  double zero = 0;
  double linear = 0;
  int64_t examples = 0;
};
RegressionErrors MeasureRegression(const TraceExamples& examples,
                                   const std::vector<int64_t>& indices,
                                   const ps::mp2::PredictorRunner* predictor);

struct TrainingOptions {
  int history = ps::mp2::kDefaultHistory;
  int reduction = ps::mp2::kDefaultReduction;
  std::vector<int> channels = {ps::mp2::kDefaultChannels};  // candidate widths
  int epochs = 10;
  int64_t examples_per_epoch = 200000;
  int batch_size = 1024;
  double learning_rate = 1e-3;
  uint64_t seed = 0;
};

struct EpochReport {
  int channels = 0;
  int epoch = 0;  // 1-based
  int64_t examples = 0;
  double train_mse = 0;  // mean batch loss of the epoch, weighted by batch size
  double zero_mse = 0;   // the zero change's MSE on the same examples
  double seconds = 0;
};

struct Candidate {
  int channels = 0;
  int epoch = 0;
  double train_mse = 0;
  ps::mp2::Predictor predictor;  // metadata empty
};

// Steps 1–2. Returns the candidates, widths in options.channels order, epochs ascending;
// `on_epoch` (may be empty) is called after each epoch. InvalidArgument for bad options (no
// widths, an invalid architecture, epochs or batch < 1) or no examples; Internal when libtorch
// fails.
absl::StatusOr<std::vector<Candidate>> TrainCandidates(
    const TraceExamples& examples, const TrainingOptions& options,
    const std::function<void(const EpochReport&)>& on_epoch);

struct SelectionOptions {
  bool every_epoch = false;  // judge every epoch, not only each width's last
};

struct CandidateScore {
  bool judged = false;
  double heldout_mse = std::numeric_limits<double>::quiet_NaN();  // replay MSE, raw units
  double accuracy = std::numeric_limits<double>::quiet_NaN();
  double accuracy_true = std::numeric_limits<double>::quiet_NaN();
  double accuracy_drop = std::numeric_limits<double>::quiet_NaN();  // true − predicted
  double inference_seconds = 0;
};

// Step 3 over `judge`'s windows (the judge's history must be the candidates'). Returns the index
// of the chosen candidate and fills *scores (one per candidate); `on_scored` (may be empty) is
// called after each judged candidate. InvalidArgument when there are no candidates or a history
// differs; the judge's errors otherwise.
absl::StatusOr<int> SelectCandidate(
    const std::vector<Candidate>& candidates, const SelectionOptions& options, WindowJudge& judge,
    std::vector<CandidateScore>* scores,
    const std::function<void(int, const CandidateScore&)>& on_scored);

}  // namespace hptrain::train::mp2

#endif  // HPTRAIN_RUNTIME_TRAIN_MP2_PREDICTOR_TRAINING_H_
