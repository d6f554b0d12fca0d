// Density during the warm-up of the sparsifying strategies (DGC's exponential warm-up): in epoch
// e < warmup_epochs the density is max(final, 0.25^(e+1)) — 25 %, 6.25 %, 1.5625 %, 0.39 %, ... —
// and `final` afterwards.
#ifndef HPTRAIN_RUNTIME_SYNC_DENSITY_SCHEDULE_H_
#define HPTRAIN_RUNTIME_SYNC_DENSITY_SCHEDULE_H_

#include <algorithm>
#include <cmath>

namespace hptrain::sync {

inline double WarmupDensity(double final_density, double warmup_epochs, int epoch) {
  if (epoch >= warmup_epochs) return final_density;
  return std::max(final_density, std::pow(0.25, epoch + 1));
}

// Densities at or above this are sent dense: a dense all-reduce moves fewer bytes than
// (index, value) pairs, and density 1 is then exactly ssgd.
inline constexpr double kDenseAboveDensity = 0.5;

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_DENSITY_SCHEDULE_H_
