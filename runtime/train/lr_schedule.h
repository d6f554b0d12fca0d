// Learning-rate schedules on a continuous epoch clock (epoch + fraction of the epoch done), so
// every worker and a resumed run compute the same rate for the same step.
//   constant: lr
//   step:     lr · gamma^floor(epoch / stepSize)
//   cosine:   minLr + (lr - minLr) · (1 + cos(π · epoch / epochs)) / 2
// A linear warm-up over warmupEpochs multiplies any of them by min(1, (epoch + 1/steps) / warmup),
// where the 1/steps makes the first step's rate non-zero.
#ifndef HPTRAIN_RUNTIME_TRAIN_LR_SCHEDULE_H_
#define HPTRAIN_RUNTIME_TRAIN_LR_SCHEDULE_H_

#include <cstdint>

#include "runtime/job/job_spec.h"

namespace hptrain::train {

// Learning rate for step `step_in_epoch` of `epoch` (0-based) with `steps_per_epoch` steps.
double LearningRate(const job::OptimizerSpec& spec, int epochs, int epoch, int64_t step_in_epoch,
                    int64_t steps_per_epoch);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_LR_SCHEDULE_H_
