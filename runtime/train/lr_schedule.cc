#include "runtime/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace hptrain::train {

double LearningRate(const job::OptimizerSpec& spec, int epochs, int epoch, int64_t step_in_epoch,
                    int64_t steps_per_epoch) {
  const job::ScheduleSpec& s = spec.schedule;
  const double steps = static_cast<double>(std::max<int64_t>(1, steps_per_epoch));
  const double clock = epoch + step_in_epoch / steps;
  double lr = spec.lr;
  if (s.type == "step" && s.step_size > 0) {
    lr = spec.lr * std::pow(s.gamma, std::floor(static_cast<double>(epoch) / s.step_size));
  } else if (s.type == "cosine") {
    const double progress = std::min(1.0, clock / std::max(1, epochs));
    lr = s.min_lr + (spec.lr - s.min_lr) * (1.0 + std::cos(M_PI * progress)) / 2.0;
  }
  if (s.warmup_epochs > 0) {
    lr *= std::min(1.0, (clock + 1.0 / steps) / s.warmup_epochs);
  }
  return lr;
}

}  // namespace hptrain::train
