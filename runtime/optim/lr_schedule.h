// Learning-rate schedules on a continuous epoch clock (epoch + fraction of the epoch done), so
// every worker and a resumed run compute the same rate for the same step.
//   constant: lr
//   step:     lr · gamma^floor(epoch / step_size)
//   cosine:   min_lr + (lr - min_lr) · (1 + cos(π · epoch / epochs)) / 2
// A linear warm-up over warmup_epochs multiplies any of them by min(1, (epoch + 1/steps) / warmup),
// where the 1/steps makes the first step's rate non-zero.
#ifndef HPTRAIN_RUNTIME_OPTIM_LR_SCHEDULE_H_
#define HPTRAIN_RUNTIME_OPTIM_LR_SCHEDULE_H_

#include <cstdint>

namespace hptrain::optim {

enum class LrScheduleType { kConstant, kStep, kCosine };

struct LrScheduleOptions {
  LrScheduleType type = LrScheduleType::kConstant;
  double lr = 0.01;          // the base rate
  int epochs = 1;            // the run's length, for cosine
  int step_size = 0;         // step: epochs per decay (0: never decays)
  double gamma = 0.1;        // step: the decay factor
  double min_lr = 0.0;       // cosine: the final rate
  double warmup_epochs = 0;  // 0: no warm-up
};

// Learning rate for step `step_in_epoch` of `epoch` (0-based) with `steps_per_epoch` steps.
double LearningRate(const LrScheduleOptions& options, int epoch, int64_t step_in_epoch,
                    int64_t steps_per_epoch);

}  // namespace hptrain::optim

#endif  // HPTRAIN_RUNTIME_OPTIM_LR_SCHEDULE_H_
