// MP²'s settings from a job spec (job_options.h).
#include "runtime/ps/mp2/job_options.h"

#include "absl/strings/str_cat.h"

namespace hptrain::ps::mp2 {

PredictionOptions PredictionOptionsFor(const job::JobSpec& spec) {
  return PredictionOptionsFor(spec.strategy, spec.seed);
}

PredictionOptions PredictionOptionsFor(const job::StrategySpec& s, uint64_t seed) {
  // mp2's parameters (runtime/sync/strategy_descriptors.cc), as validated.
  PredictionOptions options;
  options.push_ratio = s.Number("pushRatio");
  options.history = static_cast<int>(s.Int("history"));
  options.calibration = s.Bool("calibration");
  options.damping = s.Number("damping");
  options.seed = seed;
  // The shard and mode B's workers run the inference of round t while round t is computed.
  options.overlapped = true;
  return options;
}

absl::StatusOr<std::shared_ptr<const PredictorRunner>> OpenPredictor(const job::JobSpec& spec) {
  return OpenPredictor(spec.strategy);
}

absl::StatusOr<std::shared_ptr<const PredictorRunner>> OpenPredictor(
    const job::StrategySpec& strategy) {
  const std::string path = strategy.String("predictor");
  if (path.empty() || path == "zero") return std::shared_ptr<const PredictorRunner>();
  absl::StatusOr<Predictor> predictor = LoadPredictor(path);
  if (!predictor.ok()) {
    return absl::Status(predictor.status().code(),
                        absl::StrCat("spec.strategy.predictor: ", predictor.status().message()));
  }
  const int history = static_cast<int>(strategy.Int("history"));
  if (predictor->history != history) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.strategy.predictor: ", path, " reads a history of ", predictor->history,
                     " snapshots, the job's spec.strategy.history is ", history));
  }
  return std::shared_ptr<const PredictorRunner>(std::make_shared<PredictorRunner>(*predictor));
}

RecorderOptions RecorderOptionsFor(const job::JobSpec& spec) {
  RecorderOptions recorder;
  recorder.path = spec.collect.path;
  recorder.model = spec.model.name.empty() ? spec.model.torchscript : spec.model.name;
  recorder.dataset = spec.dataset.name;
  recorder.seed = spec.seed;
  recorder.every = spec.collect.every;
  recorder.samples = spec.collect.samples;
  recorder.window_every = spec.collect.window_every;
  recorder.window_length = spec.collect.window_length;
  return recorder;
}

}  // namespace hptrain::ps::mp2
