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

PredictionState::~PredictionState() {
  if (inference_ != nullptr) inference_->done.wait();
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
  if (inference_ != nullptr) inference_->done.wait();
  inference_.reset();
  history_ = snapshots;
  newest_ = options_.history - 1;
  params_ = snapshots.back();
  round_ = round;
  if (options_.overlapped) inference_ = StartInference(/*background=*/true);
  return absl::OkStatus();
}

std::shared_ptr<PredictionState::Inference> PredictionState::StartInference(
    bool background) const {
  if (predictor_ == nullptr) return nullptr;
  auto inference = std::make_shared<Inference>();
  inference->round = round_;
  inference->predicted.resize(schedules_.size());
  std::vector<std::vector<float>> inputs(schedules_.size());
  const int K = options_.history;
  bool any = false;
  // Without calibration only the complement's predictions are used: the subset's rows are left
  // out (each element's prediction depends on its own history alone, so nothing else changes).
  std::vector<std::vector<int32_t>> rows(schedules_.size());
  for (int p = 0; p < pieces(); ++p) {
    if (!schedules_[p].predicted()) continue;
    any = true;
    const int64_t n = schedules_[p].size();
    std::vector<int32_t>& at = rows[p];
    if (options_.calibration) {
      at.resize(static_cast<size_t>(n));
      for (int64_t e = 0; e < n; ++e) at[e] = static_cast<int32_t>(e);
    } else {
      std::vector<char> pushed(static_cast<size_t>(n), 0);
      for (int32_t e : schedules_[p].Subset(round_)) pushed[e] = 1;
      at.reserve(static_cast<size_t>(n));
      for (int64_t e = 0; e < n; ++e) {
        if (!pushed[e]) at.push_back(static_cast<int32_t>(e));
      }
    }
    const int64_t m = static_cast<int64_t>(at.size());
    std::vector<float>& gathered = inputs[p];
    gathered.resize(static_cast<size_t>(m * K));
    for (int k = 0; k < K; ++k) {
      const float* snapshot = history_[(newest_ + 1 + k) % K].data() + offsets_[p];
      for (int64_t r = 0; r < m; ++r) gathered[r * K + k] = snapshot[at[r]];
    }
    // The subset's entries stay 0 without calibration: they are overwritten by the fresh values.
    inference->predicted[p].assign(static_cast<size_t>(n), 0.0f);
  }
  if (!any) return nullptr;
  // The task owns its inputs and shares `inference`: it outlives the state if need be.
  auto run = [inference, inputs = std::move(inputs), rows = std::move(rows),
              predictor = predictor_, threads = options_.threads] {
    const auto start = std::chrono::steady_clock::now();
    std::vector<float> out;
    for (size_t p = 0; p < inputs.size(); ++p) {
      if (rows[p].empty()) continue;
      out.resize(rows[p].size());
      predictor->Predict(inputs[p].data(), static_cast<int64_t>(out.size()), out.data(), threads);
      std::vector<float>& predicted = inference->predicted[p];
      for (size_t r = 0; r < out.size(); ++r) predicted[rows[p][r]] = out[r];
    }
    inference->seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if (background) {
    inference->done = std::async(std::launch::async, std::move(run)).share();
  } else {
    run();
    std::promise<void> ready;
    ready.set_value();
    inference->done = ready.get_future().share();
  }
  return inference;
}

bool PredictionState::PredictionReady() const {
  if (inference_ == nullptr) return true;
  return inference_->done.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

std::shared_future<void> PredictionState::PendingPrediction() const {
  return inference_ != nullptr ? inference_->done : std::shared_future<void>();
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
  // Step 1: the overlapped inference of this round, or one run now.
  std::shared_ptr<Inference> inference =
      inference_ != nullptr && inference_->round == round ? inference_
                                                          : StartInference(/*background=*/false);
  inference_.reset();
  if (inference != nullptr) {
    inference->done.wait();
    out.inference_seconds = inference->seconds;
  }
  for (int p = 0; p < pieces(); ++p) {
    const SubsetSchedule& schedule = schedules_[p];
    float* w = params_.data() + offsets_[p];
    const int64_t n = schedule.size();
    absl::Span<const int32_t> subset = schedule.Subset(round);
    if (!schedule.predicted()) {
      std::copy(fresh[p].begin(), fresh[p].end(), w);
      continue;
    }
    if (inference != nullptr) {
      // The complement's predictions are used; the subset's (with calibration) fit it.
      const std::vector<float>& predicted = inference->predicted[p];
      out.predicted += n - static_cast<int64_t>(subset.size());
      double a = 1.0;
      if (options_.calibration) {
        double dot = 0, norm = 0;
        for (size_t k = 0; k < subset.size(); ++k) {
          const double predicted_change = predicted[subset[k]] - w[subset[k]];
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
      for (int64_t e = 0; e < n; ++e) w[e] += scale * (predicted[e] - w[e]);
    }
    for (size_t k = 0; k < subset.size(); ++k) w[subset[k]] = fresh[p][k];
  }
  const int K = options_.history;
  newest_ = (newest_ + 1) % K;
  history_[newest_] = params_;
  ++round_;
  if (options_.overlapped) inference_ = StartInference(/*background=*/true);
  return absl::OkStatus();
}

}  // namespace hptrain::ps::mp2
