#include "runtime/train/mp2/window_replay.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/ps/mp2/prediction_state.h"
#include "runtime/ps/mp2/schedule.h"

namespace hptrain::train::mp2 {
namespace {

using ps::mp2::SnapshotDataset;
using ps::mp2::SnapshotWindow;
using ps::mp2::SubsetSchedule;

std::vector<int64_t> PieceSizes(const SnapshotDataset& data) {
  std::vector<int64_t> sizes;
  sizes.reserve(data.tensors.size());
  for (const auto& t : data.tensors) sizes.push_back(t.size);
  return sizes;
}

// The schedules PredictionState derives for shard 0: the replay of the linear method must push
// exactly the elements the other methods push, or their errors would not be comparable.
std::vector<SubsetSchedule> Schedules(const std::vector<int64_t>& sizes,
                                      const ReplayOptions& options) {
  std::vector<SubsetSchedule> schedules;
  schedules.reserve(sizes.size());
  for (size_t p = 0; p < sizes.size(); ++p) {
    schedules.emplace_back(options.seed, /*shard=*/0, static_cast<int>(p), sizes[p],
                           options.push_ratio);
  }
  return schedules;
}

// The linear method's rounds, following PredictionState's steps 1–4 with Δ̂ = W − W_prev.
void LinearRound(const std::vector<SubsetSchedule>& schedules, const std::vector<int64_t>& offsets,
                 int64_t round, const std::vector<float>& truth, bool calibration,
                 double damping, std::vector<float>* w, std::vector<float>* previous) {
  std::vector<float> next = *w;
  for (size_t p = 0; p < schedules.size(); ++p) {
    const int64_t begin = offsets[p];
    const SubsetSchedule& schedule = schedules[p];
    if (!schedule.predicted()) {
      std::copy(truth.begin() + begin, truth.begin() + begin + schedule.size(),
                next.begin() + begin);
      continue;
    }
    auto subset = schedule.Subset(round);
    double a = 1.0;
    if (calibration) {
      double num = 0, den = 0;
      for (int32_t i : subset) {
        const double predicted = (*w)[begin + i] - (*previous)[begin + i];
        num += predicted * (truth[begin + i] - (*w)[begin + i]);
        den += predicted * predicted;
      }
      if (den > 0) a = std::clamp(num / den, 0.0, ps::mp2::kMaxCalibration);
    }
    for (int64_t e = 0; e < schedule.size(); ++e) {
      const float predicted = (*w)[begin + e] - (*previous)[begin + e];
      next[begin + e] = (*w)[begin + e] + static_cast<float>(a * damping) * predicted;
    }
    for (int32_t i : subset) next[begin + i] = truth[begin + i];
  }
  *previous = std::move(*w);
  *w = std::move(next);
}

// What the workers push in the round that produces snapshot `index` of the window: the model
// they pulled, `w`, moved by the true step of the recorded run (snapshot index − snapshot
// index − 1), as a worker's local step from the PS's model moves it. Pushing the recorded values
// themselves would hand the replay every change the complement missed since the window began, a
// jump no online round sees.
std::vector<float> Pushed(const std::vector<float>& w, const SnapshotWindow& window,
                          int64_t index) {
  const std::vector<float>& now = window.snapshots[index];
  const std::vector<float>& before = window.snapshots[index - 1];
  std::vector<float> pushed(w.size());
  for (size_t i = 0; i < w.size(); ++i) pushed[i] = w[i] + (now[i] - before[i]);
  return pushed;
}

}  // namespace

bool Replayable(const SnapshotWindow& window, int history) {
  return static_cast<int64_t>(window.snapshots.size()) >= int64_t{history} + 1;
}

absl::StatusOr<ReplayResult> ReplayWindow(const SnapshotDataset& data, const SnapshotWindow& window,
                                          const ReplayOptions& options, ReplayMethod method,
                                          const ps::mp2::PredictorRunner* predictor) {
  const int K = options.history;
  if (K < 2 || !Replayable(window, K)) {
    return absl::InvalidArgumentError(
        absl::StrCat("window at round ", window.first_round, " has ", window.snapshots.size(),
                     " snapshots; replaying with history ", K, " needs at least ", K + 1));
  }
  for (const auto& s : window.snapshots) {
    if (static_cast<int64_t>(s.size()) != data.parameters) {
      return absl::InvalidArgumentError(absl::StrCat("window at round ", window.first_round,
                                                     " has a snapshot of ", s.size(),
                                                     " values, not ", data.parameters));
    }
  }
  if (method == ReplayMethod::kPredictor) {
    if (predictor == nullptr) return absl::InvalidArgumentError("no predictor to replay");
    if (predictor->history() != K) {
      return absl::InvalidArgumentError(
          absl::StrCat("the predictor's history is ", predictor->history(), ", the replay's ", K));
    }
  }
  const std::vector<int64_t> sizes = PieceSizes(data);
  std::vector<int64_t> offsets(sizes.size() + 1, 0);
  for (size_t p = 0; p < sizes.size(); ++p) offsets[p + 1] = offsets[p] + sizes[p];
  if (offsets.back() != data.parameters) {
    return absl::InvalidArgumentError(absl::StrCat("the dataset's tensors hold ", offsets.back(),
                                                   " parameters, its header says ",
                                                   data.parameters));
  }

  const int64_t length = static_cast<int64_t>(window.snapshots.size());
  const int rounds = static_cast<int>(length - K);
  // Rounds are numbered from the recorded round of the first snapshot they produce, so a window
  // sees the schedule's slices in the order the run would have.
  const int64_t first_round = window.first_round + K;
  ReplayResult result;
  result.rounds = rounds;
  result.truth = K + rounds - 1;
  const int64_t last_round = first_round + rounds - 1;
  // The linear rounds and the error below follow the same schedules.
  const std::vector<SubsetSchedule> schedules = Schedules(sizes, options);

  if (method == ReplayMethod::kLinear) {
    std::vector<float> w = window.snapshots[K - 1];
    std::vector<float> previous = window.snapshots[K - 2];
    for (int j = 0; j < rounds; ++j) {
      LinearRound(schedules, offsets, first_round + j, Pushed(w, window, K + j),
                  options.calibration, options.damping, &w, &previous);
    }
    result.params = std::move(w);
  } else {
    ps::mp2::PredictionOptions prediction;
    prediction.push_ratio = options.push_ratio;
    prediction.history = K;
    prediction.seed = options.seed;
    prediction.calibration = options.calibration;
    prediction.damping = options.damping;
    prediction.threads = options.threads;
    ps::mp2::PredictionState state(prediction, /*shard=*/0, sizes,
                                   method == ReplayMethod::kPredictor ? predictor : nullptr);
    std::vector<std::vector<float>> history(window.snapshots.begin(), window.snapshots.begin() + K);
    HPTRAIN_RETURN_IF_ERROR(state.ResetHistory(history, first_round), "replay");
    std::vector<std::vector<float>> fresh(static_cast<size_t>(state.pieces()));
    for (int j = 0; j < rounds; ++j) {
      const int64_t round = first_round + j;
      const std::vector<float> next = Pushed(state.params(), window, K + j);
      for (int p = 0; p < state.pieces(); ++p) {
        fresh[p].resize(static_cast<size_t>(state.PushSize(p, round)));
        state.schedule(p).Gather(round, next.data() + state.piece_offset(p), fresh[p].data());
      }
      ps::mp2::RoundStats stats;
      HPTRAIN_RETURN_IF_ERROR(state.Apply(round, fresh, &stats), "replay round ", j + 1, " of ",
                              rounds);
      result.inference_seconds += stats.inference_seconds;
    }
    result.params = state.params();
  }

  // The error over what the last round predicted: every predicted tensor's complement of its
  // pushed subset.
  const std::vector<float>& truth = window.snapshots[result.truth];
  double sum = 0;
  std::vector<char> pushed;
  for (size_t p = 0; p < schedules.size(); ++p) {
    if (!schedules[p].predicted()) continue;
    pushed.assign(static_cast<size_t>(sizes[p]), 0);
    for (int32_t i : schedules[p].Subset(last_round)) pushed[i] = 1;
    for (int64_t e = 0; e < sizes[p]; ++e) {
      if (pushed[e]) continue;
      const double d = double{result.params[offsets[p] + e]} - truth[offsets[p] + e];
      sum += d * d;
      ++result.predicted;
    }
  }
  result.mse = result.predicted > 0 ? sum / static_cast<double>(result.predicted) : 0.0;
  return result;
}

WindowJudge::WindowJudge(const SnapshotDataset& data, ReplayOptions options, AccuracyFn accuracy)
    : data_(data), options_(options), accuracy_(std::move(accuracy)) {
  for (size_t w = 0; w < data_.windows.size(); ++w) {
    if (Replayable(data_.windows[w], options_.history)) replayable_.push_back(static_cast<int>(w));
  }
  true_accuracy_.assign(replayable_.size(), std::numeric_limits<double>::quiet_NaN());
}

absl::StatusOr<WindowScore> WindowJudge::Score(ReplayMethod method,
                                               const ps::mp2::PredictorRunner* predictor) {
  if (replayable_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "none of the ", data_.windows.size(), " windows has the ", options_.history + 1,
        " snapshots a replay with history ", options_.history, " needs"));
  }
  WindowScore score;
  double accuracy = 0, accuracy_true = 0;
  for (size_t i = 0; i < replayable_.size(); ++i) {
    const SnapshotWindow& window = data_.windows[replayable_[i]];
    HPTRAIN_ASSIGN_OR_RETURN(ReplayResult result,
                             ReplayWindow(data_, window, options_, method, predictor));
    score.mse += result.mse;
    score.inference_seconds += result.inference_seconds;
    if (accuracy_) {
      if (std::isnan(true_accuracy_[i])) {
        HPTRAIN_ASSIGN_OR_RETURN(true_accuracy_[i], accuracy_(window.snapshots[result.truth]));
      }
      HPTRAIN_ASSIGN_OR_RETURN(double replayed, accuracy_(result.params));
      accuracy += replayed;
      accuracy_true += true_accuracy_[i];
    }
    ++score.windows;
  }
  score.mse /= score.windows;
  if (accuracy_) {
    score.accuracy = accuracy / score.windows;
    score.accuracy_true = accuracy_true / score.windows;
  }
  return score;
}

}  // namespace hptrain::train::mp2
