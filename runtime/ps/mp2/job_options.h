// MP²'s settings as a job declares them (spec.strategy of type mp2), for the PS and the workers
// alike, so both read the same schedule and predictor; and spec.collect's recorder options.
#ifndef HPTRAIN_RUNTIME_PS_MP2_JOB_OPTIONS_H_
#define HPTRAIN_RUNTIME_PS_MP2_JOB_OPTIONS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/job/job_spec.h"
#include "runtime/ps/mp2/dataset.h"
#include "runtime/ps/mp2/prediction_state.h"
#include "runtime/ps/mp2/predictor.h"

namespace hptrain::ps::mp2 {

// pushRatio (0.1), history (5), calibration (false), damping (0.25) and the schedule's seed
// (spec.seed); the inference overlapped (prediction_state.h).
PredictionOptions PredictionOptionsFor(const job::JobSpec& spec);
PredictionOptions PredictionOptionsFor(const job::StrategySpec& strategy, uint64_t seed);

// The predictor spec.strategy.predictor names: null for "zero", else the file loaded and checked
// against spec.strategy.history. Errors are one line naming spec.strategy.predictor.
absl::StatusOr<std::shared_ptr<const PredictorRunner>> OpenPredictor(const job::JobSpec& spec);
absl::StatusOr<std::shared_ptr<const PredictorRunner>> OpenPredictor(
    const job::StrategySpec& strategy);

// spec.collect: the snapshot recorder of a training run (rank 0 records the MP² training set).
RecorderOptions RecorderOptionsFor(const job::JobSpec& spec);

}  // namespace hptrain::ps::mp2

#endif  // HPTRAIN_RUNTIME_PS_MP2_JOB_OPTIONS_H_
