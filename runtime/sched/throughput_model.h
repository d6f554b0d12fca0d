// ThroughputModel: one worker's compute time per step as a function of its batch size, learned
// from measurements. H-PS (docs/algorithms.md §5b(1)) balances batches by speed, but speed is not
// linear in the batch size on GPUs (a fixed per-step cost dominates small batches), so the model
// is affine, t(b) = fixed + per_sample · b, fitted by least squares over the smoothed time of each
// batch size the worker has run. With one size measured it is proportional (fixed = 0), and so it
// is while the sizes measured lie within a factor `affine_min_ratio` of each other: between close
// sizes a few percent of noise makes the fitted fixed cost anything (64..96 samples with 10 %
// noise fitted 75 ms fixed + 0.38 ms/sample to a worker taking 1.2 ms/sample), and the balancer
// would then move samples by the wrong slope. Only the `max_sizes` sizes measured most recently
// take part: older ones were measured under other conditions (before a change of speed that a
// rescale, below, carried over only approximately), and mixing many such points bent the fit into
// a large fixed cost and a flat slope on the rebalance benchmark. With `anchor_latest`, for
// measurements that are already averages over many steps, the fitted line is then scaled (fixed
// and per-sample cost alike) to pass through the average of the size measured last: the balancer
// judges the allocation in force by the model's time at that size, and a fit that missed it by
// 9 % left a worker 9 % slower than the others, within the hysteresis. Single steps are too noisy
// for that (one step's time would set the model), so by default the fit alone decides.
//
// Smoothing and outliers: each batch size keeps an exponentially weighted moving average (EWMA)
// of its times. A measurement more than `outlier_factor` times away from its batch size's
// average is set aside, so one slow step (a GC pause, a noisy neighbour) does not move the model;
// if the next `outlier_run` measurements all agree that far off, the worker really changed speed,
// the old averages are dropped and the model restarts from the new measurements.
//
// Drift (`drift_factor` > 0, for measurements that are already averages over many steps, such as
// one rebalance interval's median): a measurement more than drift_factor away from the average of
// its batch size means the worker changed speed. Every stored average is scaled by
// that ratio (a slower or faster worker keeps the shape of its time curve: its fixed cost and
// per-sample cost change together), so the model follows at once instead of mixing old averages at
// other batch sizes with new ones. A measurement closer than that is averaged in (EWMA). A size
// far from every size measured is never compared with the model's extrapolation (which may miss a
// fixed cost); one within `neighbour_ratio` of a measured size is judged by the model's time there
// as if that were its own average, so a balancer that moves a worker from 89 to 77 samples does
// not take one noisy interval at the new size for the worker's speed. The measurement right after
// a change of speed is taken whole as well (a rescale by its ratio, however small): the interval
// in which the speed changed mixes both speeds, so its median may catch only part of the change,
// and averaging the rest in would leave the sizes measured before the change, which fix the
// model's slope, scaled by that part. Outlier rejection is then off: averages have no one-step
// outliers.
//
// Not thread-safe; pure computation.
#ifndef HPTRAIN_RUNTIME_SCHED_THROUGHPUT_MODEL_H_
#define HPTRAIN_RUNTIME_SCHED_THROUGHPUT_MODEL_H_

#include <map>
#include <vector>

namespace hptrain::sched {

struct ModelOptions {
  double ewma_alpha = 0.3;      // weight of a new measurement in its batch size's average
  double outlier_factor = 2.0;  // a measurement off by more than this factor is an outlier
  int outlier_run = 3;          // this many outliers in a row mean a real change of speed
  double drift_factor = 0;      // > 1: rescale on a measurement this far from the model (above)
  double neighbour_ratio = 0;   // > 1, with drift_factor: a new size this close to a measured one
                                // is judged by the model's time there (above)
  double affine_min_ratio = 2;  // fit a fixed cost only once largest/smallest size reaches this
  int max_sizes = 4;            // keep the sizes measured most recently, this many (0 = all)
  bool anchor_latest = false;   // pass through the size measured last (for averaged measurements)
};

class ThroughputModel {
 public:
  explicit ThroughputModel(ModelOptions options = {}) : options_(options) {}

  // Records that a step with `batch` samples took `seconds` of compute (data + forward +
  // backward, excluding waits). Ignores batch <= 0 or seconds <= 0. Returns false when the
  // measurement was set aside as an outlier.
  bool Observe(int batch, double seconds);

  bool empty() const { return points_.empty(); }
  // Predicted seconds for a step of `batch` samples; 0 while empty().
  double Seconds(double batch) const;
  // Samples per second at `batch` (0 while empty()).
  double SamplesPerSecond(double batch) const;
  double fixed_seconds() const { return fixed_; }
  double per_sample_seconds() const { return per_sample_; }

 private:
  bool ObserveAverage(int batch, double seconds);  // Observe with drift_factor set
  bool NearAMeasuredSize(int batch) const;         // within neighbour_ratio of one in points_
  void Touch(int batch);  // marks `batch` measured last; forgets sizes beyond max_sizes
  void Fit();             // FitLine, then scaled to pass through the latest size's average
  void FitLine();         // least squares (or proportional) over points_

  ModelOptions options_;
  std::map<int, double> points_;  // batch size -> EWMA of seconds
  std::vector<int> recent_;       // the sizes in points_, least recently measured first
  std::vector<std::pair<int, double>> outliers_;  // the current run of outliers
  bool outliers_slow_ = false;                    // whether that run is slower than usual
  double fixed_ = 0;
  double per_sample_ = 0;
  bool just_rescaled_ = false;  // the last averaged measurement was a change of speed
};

}  // namespace hptrain::sched

#endif  // HPTRAIN_RUNTIME_SCHED_THROUGHPUT_MODEL_H_
