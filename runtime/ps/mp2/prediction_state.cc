// PredictionState: MP²'s round-by-round model of one shard's range (prediction_state.h).
#include "runtime/ps/mp2/prediction_state.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hptrain::ps::mp2 {

PredictionState::PredictionState(const PredictionOptions& options, int shard,
                                 std::vector<int64_t> piece_sizes, const PredictorRunner* predictor)
    : options_(options), predictor_(predictor) {
  offsets_.assign(1, 0);
  for (size_t p = 0; p < piece_sizes.size(); ++p) {
    schedules_.emplace_back(options_.seed, shard, static_cast<int>(p), piece_sizes[p],
                            options_.push_ratio);
    offsets_.push_back(offsets_.back() + piece_sizes[p]);
  }
}

absl::Status PredictionState::Reset(std::vector<float> params, int64_t round) {
  std::vector<std::vector<float>> snapshots(static_cast<size_t>(options_.history), params);
  return ResetHistory(snapshots, round);
}

absl::Status PredictionState::ResetHistory(const std::vector<std::vector<float>>& snapshots,
                                           int64_t round) {
  if (static_cast<int>(snapshots.size()) != options_.history) {
    return absl::InvalidArgumentError(absl::StrCat("MP² history of ", snapshots.size(),
                                                   " snapshots, expected ", options_.history));
  }
  for (const auto& s : snapshots) {
    if (static_cast<int64_t>(s.size()) != offsets_.back()) {
      return absl::InvalidArgumentError(
          absl::StrCat("MP² snapshot of ", s.size(), " values, the range has ", offsets_.back()));
    }
  }
  history_ = snapshots;
  newest_ = options_.history - 1;
  params_ = snapshots.back();
  round_ = round;
  return absl::OkStatus();
}

int64_t PredictionState::PushSize(int piece, int64_t round) const {
  return static_cast<int64_t>(schedules_[piece].Subset(round).size());
}

int64_t PredictionState::RoundSize(int64_t round) const {
  int64_t total = 0;
  for (int p = 0; p < pieces(); ++p) total += PushSize(p, round);
  return total;
}

absl::Status PredictionState::Apply(int64_t round, const std::vector<std::vector<float>>& fresh,
                                    RoundStats* stats) {
  if (round != round_) {
    return absl::InvalidArgumentError(
        absl::StrCat("MP² round ", round, " applied, the state expects round ", round_));
  }
  if (static_cast<int>(fresh.size()) != pieces()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MP² round with ", fresh.size(), " tensors, expected ", pieces()));
  }
  for (int p = 0; p < pieces(); ++p) {
    if (static_cast<int64_t>(fresh[p].size()) != PushSize(p, round)) {
      return absl::InvalidArgumentError(absl::StrCat("MP² round ", round, ": tensor ", p, " has ",
                                                     fresh[p].size(), " values, its subset ",
                                                     PushSize(p, round)));
    }
  }
  RoundStats local;
  RoundStats& out = stats != nullptr ? *stats : local;
  out = RoundStats();
  out.calibration.assign(static_cast<size_t>(pieces()), 1.0);
  const int K = options_.history;
  for (int p = 0; p < pieces(); ++p) {
    const SubsetSchedule& schedule = schedules_[p];
    float* w = params_.data() + offsets_[p];
    const int64_t n = schedule.size();
    absl::Span<const int32_t> subset = schedule.Subset(round);
    if (!schedule.predicted()) {
      std::copy(fresh[p].begin(), fresh[p].end(), w);
      continue;
    }
    if (predictor_ != nullptr) {
      // Every element's prediction: the complement's is used, the subset's fits calibration.
      const auto start = std::chrono::steady_clock::now();
      gathered_.resize(static_cast<size_t>(n * K));
      predicted_.resize(static_cast<size_t>(n));
      for (int k = 0; k < K; ++k) {
        const float* snapshot = history_[(newest_ + 1 + k) % K].data() + offsets_[p];
        for (int64_t e = 0; e < n; ++e) gathered_[e * K + k] = snapshot[e];
      }
      predictor_->Predict(gathered_.data(), n, predicted_.data(), options_.threads);
      out.inference_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      out.predicted += n - static_cast<int64_t>(subset.size());
      double a = 1.0;
      if (options_.calibration) {
        double dot = 0, norm = 0;
        for (size_t k = 0; k < subset.size(); ++k) {
          const double predicted_change = predicted_[subset[k]] - w[subset[k]];
          const double true_change = fresh[p][k] - w[subset[k]];
          dot += predicted_change * true_change;
          norm += predicted_change * predicted_change;
        }
        if (norm > 0) a = std::clamp(dot / norm, 0.0, kMaxCalibration);
      }
      out.calibration[p] = a;
      // Every element moves by its predicted change; the subset's are then overwritten with the
      // fresh values below.
      const float scale = static_cast<float>(a * options_.damping);
      for (int64_t e = 0; e < n; ++e) w[e] += scale * (predicted_[e] - w[e]);
    }
    for (size_t k = 0; k < subset.size(); ++k) w[subset[k]] = fresh[p][k];
  }
  newest_ = (newest_ + 1) % K;
  history_[newest_] = params_;
  ++round_;
  return absl::OkStatus();
}

}  // namespace hptrain::ps::mp2
