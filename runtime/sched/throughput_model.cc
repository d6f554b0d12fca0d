#include "runtime/sched/throughput_model.h"

#include <algorithm>
#include <cmath>

namespace hptrain::sched {
namespace {

struct Affine {
  double fixed = 0;
  double per_sample = 0;
};

// Least squares of seconds = fixed + per_sample * batch over `points` (batch -> seconds), kept
// physical: no negative fixed cost, time growing with the batch; proportional from one point.
Affine FitPoints(const std::map<int, double>& points) {
  Affine a;
  if (points.empty()) return a;
  if (points.size() == 1) {
    a.per_sample = points.begin()->second / points.begin()->first;
    return a;
  }
  double n = 0, sb = 0, st = 0, sbb = 0, sbt = 0;
  for (const auto& [b, t] : points) {
    n += 1;
    sb += b;
    st += t;
    sbb += static_cast<double>(b) * b;
    sbt += b * t;
  }
  const double det = n * sbb - sb * sb;
  a.per_sample = det > 0 ? (n * sbt - sb * st) / det : 0;
  a.fixed = (st - a.per_sample * sb) / n;
  if (a.fixed < 0 || a.per_sample <= 0) {
    a.fixed = std::max(0.0, a.fixed);
    double num = 0, den = 0;
    for (const auto& [b, t] : points) {
      num += b * (t - a.fixed);
      den += static_cast<double>(b) * b;
    }
    a.per_sample = num / den;
    if (a.per_sample <= 0) {  // times fall with the batch: noise; fall back to proportional
      a.fixed = 0;
      a.per_sample = st / sb;
    }
  }
  return a;
}

}  // namespace

bool ThroughputModel::Observe(int batch, double seconds) {
  if (batch <= 0 || !(seconds > 0) || !std::isfinite(seconds)) return true;
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
      drift_run_ = 0;
      for (const auto& [b, s] : outliers_) {
        auto p = points_.find(b);
        points_[b] = p == points_.end()
                         ? s
                         : (1 - options_.ewma_alpha) * p->second + options_.ewma_alpha * s;
      }
      outliers_.clear();
      Fit();
      return true;
    }
    it->second = (1 - options_.ewma_alpha) * it->second + options_.ewma_alpha * seconds;
    CheckDrift(batch);
  } else {
    points_[batch] = seconds;  // a new size: the fit learns from it, it is not judged by it
  }
  outliers_.clear();
  Fit();
  return true;
}

void ThroughputModel::Fit() {
  Affine a = FitPoints(points_);
  fixed_ = a.fixed;
  per_sample_ = a.per_sample;
}

void ThroughputModel::CheckDrift(int batch) {
  if (points_.size() < 2) {
    drift_run_ = 0;
    return;
  }
  std::map<int, double> others = points_;
  const double measured = others[batch];
  others.erase(batch);
  Affine a = FitPoints(others);
  const double predicted = a.fixed + a.per_sample * batch;
  if (predicted > 0 && std::abs(measured / predicted - 1) <= options_.drift_tolerance) {
    drift_run_ = 0;
    return;
  }
  if (++drift_run_ < options_.outlier_run) return;
  points_ = {{batch, measured}};
  drift_run_ = 0;
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
