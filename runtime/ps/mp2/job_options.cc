// MP²'s settings from a job spec (job_options.h).
#include "runtime/ps/mp2/job_options.h"

#include "absl/strings/str_cat.h"

namespace hptrain::ps::mp2 {

PredictionOptions PredictionOptionsFor(const job::JobSpec& spec) {
  const job::StrategySpec& s = spec.strategy;
  PredictionOptions options;
  options.push_ratio = s.push_ratio > 0 ? s.push_ratio : job::kMp2PushRatio;
  options.history = s.history > 0 ? s.history : job::kMp2History;
  options.calibration = s.calibration.value_or(false);
  options.damping = s.damping > 0 ? s.damping : job::kMp2Damping;
  options.seed = spec.seed;
  return options;
}

absl::StatusOr<std::shared_ptr<const PredictorRunner>> OpenPredictor(const job::JobSpec& spec) {
  const std::string& path = spec.strategy.predictor;
  if (path.empty() || path == "zero") return std::shared_ptr<const PredictorRunner>();
  absl::StatusOr<Predictor> predictor = LoadPredictor(path);
  if (!predictor.ok()) {
    return absl::Status(predictor.status().code(),
                        absl::StrCat("spec.strategy.predictor: ", predictor.status().message()));
  }
  const int history = PredictionOptionsFor(spec).history;
  if (predictor->history != history) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.strategy.predictor: ", path, " reads a history of ", predictor->history,
                     " snapshots, the job's spec.strategy.history is ", history));
  }
  return std::shared_ptr<const PredictorRunner>(std::make_shared<PredictorRunner>(*predictor));
}

}  // namespace hptrain::ps::mp2
