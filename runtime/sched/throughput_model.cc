#include "runtime/sched/throughput_model.h"

#include <algorithm>
#include <cmath>

namespace hptrain::sched {

bool ThroughputModel::Observe(int batch, double seconds) {
  if (batch <= 0 || !(seconds > 0) || !std::isfinite(seconds)) return true;
  if (options_.drift_factor > 1 && !points_.empty()) return ObserveAverage(batch, seconds);
  auto it = points_.find(batch);
  if (it != points_.end()) {
    // Compared with this batch size's own average: a first measurement at a new size is never an
    // outlier (the affine fit may not know that size's fixed cost yet).
    const double ratio = seconds / it->second;
    const bool slow = ratio > options_.outlier_factor;
    if (slow || ratio < 1.0 / options_.outlier_factor) {
      // Outliers in a row that agree with each other (all slow or all fast) are a new speed.
      if (!outliers_.empty() && outliers_slow_ != slow) outliers_.clear();
      outliers_slow_ = slow;
      outliers_.emplace_back(batch, seconds);
      if (static_cast<int>(outliers_.size()) < options_.outlier_run) return false;
      points_.clear();
      recent_.clear();
      for (const auto& [b, s] : outliers_) {
        auto p = points_.find(b);
        points_[b] = p == points_.end()
                         ? s
                         : (1 - options_.ewma_alpha) * p->second + options_.ewma_alpha * s;
        Touch(b);
      }
      outliers_.clear();
      Fit();
      return true;
    }
    it->second = (1 - options_.ewma_alpha) * it->second + options_.ewma_alpha * seconds;
  } else {
    points_[batch] = seconds;
  }
  Touch(batch);
  outliers_.clear();
  Fit();
  return true;
}

bool ThroughputModel::ObserveAverage(int batch, double seconds) {
  // What the measurement is judged against: its size's own average or, for a size not measured
  // before but close to one that was, the model's time there. A size far from every measured one
  // is compared with nothing: the model's extrapolation to it may be off (a fixed cost it cannot
  // see yet) without any change of speed.
  const auto it = points_.find(batch);
  const double reference = it != points_.end()        ? it->second
                           : NearAMeasuredSize(batch) ? Seconds(batch)
                                                      : 0;
  const double ratio = reference > 0 ? seconds / reference : 1;
  const bool changed = ratio > options_.drift_factor || ratio < 1.0 / options_.drift_factor;
  if (!(reference > 0)) {
    points_[batch] = seconds;
  } else if (changed || just_rescaled_) {
    // A change of speed, or the measurement after one (the rest of it, if any).
    for (auto& [b, t] : points_) t *= ratio;
    points_[batch] = seconds;
    just_rescaled_ = changed;
  } else {
    points_[batch] = (1 - options_.ewma_alpha) * reference + options_.ewma_alpha * seconds;
  }
  Touch(batch);
  Fit();
  return true;
}

bool ThroughputModel::NearAMeasuredSize(int batch) const {
  if (!(options_.neighbour_ratio > 1)) return false;
  for (const auto& [b, t] : points_) {
    if (batch <= options_.neighbour_ratio * b && b <= options_.neighbour_ratio * batch) return true;
  }
  return false;
}

void ThroughputModel::Touch(int batch) {
  recent_.erase(std::remove(recent_.begin(), recent_.end(), batch), recent_.end());
  recent_.push_back(batch);
  while (options_.max_sizes > 0 && static_cast<int>(recent_.size()) > options_.max_sizes) {
    points_.erase(recent_.front());
    recent_.erase(recent_.begin());
  }
}

void ThroughputModel::Fit() {
  FitLine();
  // The balancer compares allocations through the model at the sizes in force: pass through the
  // latest size's own average, keeping the fitted shape.
  if (!options_.anchor_latest || recent_.empty()) return;
  const int b = recent_.back();
  const double predicted = Seconds(b);
  if (predicted <= 0) return;
  const double ratio = points_.at(b) / predicted;
  fixed_ *= ratio;
  per_sample_ *= ratio;
}

void ThroughputModel::FitLine() {
  // Least squares of seconds = fixed + per_sample * batch.
  double n = 0, sb = 0, st = 0, sbb = 0, sbt = 0;
  for (const auto& [b, t] : points_) {
    n += 1;
    sb += b;
    st += t;
    sbb += static_cast<double>(b) * b;
    sbt += b * t;
  }
  // points_ is ordered by batch size: too narrow a range (or one size) gives a proportional model.
  if (points_.rbegin()->first < options_.affine_min_ratio * points_.begin()->first) {
    fixed_ = 0;
    per_sample_ = st / sb;
    return;
  }
  const double det = n * sbb - sb * sb;
  per_sample_ = det > 0 ? (n * sbt - sb * st) / det : 0;
  fixed_ = (st - per_sample_ * sb) / n;
  // A physical model: no negative fixed cost, time grows with the batch.
  if (fixed_ < 0 || per_sample_ <= 0) {
    fixed_ = std::max(0.0, fixed_);
    double num = 0, den = 0;
    for (const auto& [b, t] : points_) {
      num += b * (t - fixed_);
      den += static_cast<double>(b) * b;
    }
    per_sample_ = num / den;
    if (per_sample_ <= 0) {  // times fall with the batch: noise; fall back to proportional
      fixed_ = 0;
      per_sample_ = st / sb;
    }
  }
}

double ThroughputModel::Seconds(double batch) const {
  if (points_.empty()) return 0;
  return fixed_ + per_sample_ * batch;
}

double ThroughputModel::SamplesPerSecond(double batch) const {
  const double s = Seconds(batch);
  return s > 0 ? batch / s : 0;
}

}  // namespace hptrain::sched
