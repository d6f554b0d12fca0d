// Density during the warm-up of the sparsifying strategies, DGC's exponential warm-up in four
// stages: over a warm-up of W epochs (W may be fractional) the density is
// max(final, 0.25^(1 + floor(4·clock/W))) — 25 %, 6.25 %, 1.5625 %, 0.39 % — and `final` after.
// With W = 4 that is DGC's schedule of one stage per epoch. `clock` is epoch + fraction done.
#ifndef HPTRAIN_RUNTIME_SYNC_DENSITY_SCHEDULE_H_
#define HPTRAIN_RUNTIME_SYNC_DENSITY_SCHEDULE_H_

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/sync/strategy_options.h"

namespace hptrain::sync {

inline double WarmupDensity(double final_density, double warmup_epochs, double clock) {
  if (clock >= warmup_epochs) return final_density;
  const double stage = std::floor(4.0 * clock / warmup_epochs);
  return std::max(final_density, std::pow(0.25, 1.0 + stage));
}

// Densities at or above this are sent dense: a dense all-reduce moves fewer bytes than
// (index, value) pairs, and density 1 is then exactly ssgd.
inline constexpr double kDenseAboveDensity = 0.5;

// The options topk and dgc share, from their descriptor-backed values (strategy_descriptors.cc).
struct SparseOptions {
  double density = 0;        // in (0, 1] (validation checks the range; the descriptor's default)
  double warmup_epochs = 0;  // >= 0
};

inline SparseOptions SparseOptionsOf(const StrategyOptions& options) {
  return {options.Number("density"), options.Number("warmupEpochs")};
}

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_DENSITY_SCHEDULE_H_
