#include "runtime/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace hptrain::optim {

double LearningRate(const LrScheduleOptions& s, int epoch, int64_t step_in_epoch,
                    int64_t steps_per_epoch) {
  const double steps = static_cast<double>(std::max<int64_t>(1, steps_per_epoch));
  const double clock = epoch + step_in_epoch / steps;
  double lr = s.lr;
  if (s.type == LrScheduleType::kStep && s.step_size > 0) {
    lr = s.lr * std::pow(s.gamma, std::floor(static_cast<double>(epoch) / s.step_size));
  } else if (s.type == LrScheduleType::kCosine) {
    const double progress = std::min(1.0, clock / std::max(1, s.epochs));
    lr = s.min_lr + (s.lr - s.min_lr) * (1.0 + std::cos(M_PI * progress)) / 2.0;
  }
  if (s.warmup_epochs > 0) {
    lr *= std::min(1.0, (clock + 1.0 / steps) / s.warmup_epochs);
  }
  return lr;
}

}  // namespace hptrain::optim
