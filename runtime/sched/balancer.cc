#include "runtime/sched/balancer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hptrain::sched {

bool Balancer::Observe(const std::string& worker, int batch, double seconds) {
  auto it = models_.try_emplace(worker, options_.model).first;
  return it->second.Observe(batch, seconds);
}

void Balancer::SetMaxBatch(const std::string& worker, int max_batch) {
  if (max_batch > 0) {
    max_batch_[worker] = max_batch;
  } else {
    max_batch_.erase(worker);
  }
}

void Balancer::Forget(const std::string& worker) {
  models_.erase(worker);
  max_batch_.erase(worker);
}

const ThroughputModel* Balancer::model(const std::string& worker) const {
  auto it = models_.find(worker);
  return it == models_.end() || it->second.empty() ? nullptr : &it->second;
}

int Balancer::MaxFor(const std::string& worker) const {
  int hi = options_.max_batch > 0 ? options_.max_batch : options_.global_batch;
  auto it = max_batch_.find(worker);
  if (it != max_batch_.end()) hi = std::min(hi, it->second);
  return hi;
}

std::vector<Balancer::Line> Balancer::Lines(const std::vector<std::string>& workers) const {
  std::vector<Line> lines(workers.size());
  std::vector<Line> known;
  for (size_t i = 0; i < workers.size(); ++i) {
    if (const ThroughputModel* m = model(workers[i])) {
      lines[i] = {m->fixed_seconds(), m->per_sample_seconds()};
      known.push_back(lines[i]);
    }
  }
  Line median{0, 1};  // nothing measured: equal speeds
  if (!known.empty()) {
    std::sort(known.begin(), known.end(),
              [](const Line& a, const Line& b) { return a.per_sample < b.per_sample; });
    median = known[known.size() / 2];
  }
  for (size_t i = 0; i < workers.size(); ++i) {
    if (model(workers[i]) == nullptr) lines[i] = median;
  }
  return lines;
}

std::vector<int> RoundLargestRemainder(const std::vector<double>& shares, int total,
                                       const std::vector<int>& lo, const std::vector<int>& hi) {
  const size_t n = shares.size();
  std::vector<int> out(n);
  int sum = 0;
  for (size_t i = 0; i < n; ++i) {
    out[i] = std::clamp(static_cast<int>(std::floor(shares[i])), lo[i], hi[i]);
    sum += out[i];
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto fraction = [&](size_t i) { return shares[i] - std::floor(shares[i]); };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return fraction(a) > fraction(b); });
  // Hand out what is missing by largest remainder, then take back any excess by smallest; more
  // than one pass only when bounds stop a worker.
  while (sum < total) {
    bool moved = false;
    for (size_t i : order) {
      if (sum == total) break;
      if (out[i] < hi[i]) {
        ++out[i];
        ++sum;
        moved = true;
      }
    }
    if (!moved) break;
  }
  while (sum > total) {
    bool moved = false;
    for (auto it = order.rbegin(); it != order.rend() && sum > total; ++it) {
      if (out[*it] > lo[*it]) {
        --out[*it];
        --sum;
        moved = true;
      }
    }
    if (!moved) break;
  }
  return out;
}

absl::StatusOr<std::vector<int>> Balancer::Optimal(const std::vector<std::string>& workers) const {
  const int n = static_cast<int>(workers.size());
  const int total = options_.global_batch;
  if (n == 0) return absl::InvalidArgumentError("no workers to allocate a batch to");
  std::vector<int> lo(n, std::max(0, options_.min_batch)), hi(n);
  int64_t lo_sum = 0, hi_sum = 0;
  for (int i = 0; i < n; ++i) {
    hi[i] = std::max(lo[i], MaxFor(workers[i]));
    lo_sum += lo[i];
    hi_sum += hi[i];
  }
  if (lo_sum > total || hi_sum < total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global batch ", total, " cannot be split over ", n, " workers with batches in [",
        options_.min_batch, ", max]: the bounds allow ", lo_sum, "..", hi_sum));
  }
  const std::vector<Line> lines = Lines(workers);
  // Water-filling: the step time T at which the batches each worker finishes by T sum to B.
  auto batches_at = [&](double t, std::vector<double>* out) {
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      double b = (t - lines[i].fixed) / lines[i].per_sample;
      b = std::clamp(b, static_cast<double>(lo[i]), static_cast<double>(hi[i]));
      if (out) (*out)[i] = b;
      sum += b;
    }
    return sum;
  };
  double low = 0, high = 0;
  for (int i = 0; i < n; ++i) high = std::max(high, lines[i].Seconds(hi[i]));
  for (int iter = 0; iter < 200; ++iter) {
    const double mid = 0.5 * (low + high);
    (batches_at(mid, nullptr) < total ? low : high) = mid;
  }
  std::vector<double> shares(n);
  batches_at(high, &shares);
  // Rescale so the shares sum to B exactly before rounding (the bisection stops within fp).
  const double sum = std::accumulate(shares.begin(), shares.end(), 0.0);
  if (sum > 0) {
    for (double& s : shares) s *= total / sum;
  }
  std::vector<int> out = RoundLargestRemainder(shares, total, lo, hi);
  // Single-sample moves off the slowest worker while that shortens the step.
  for (int iter = 0; iter < total; ++iter) {
    int slow = 0;
    for (int i = 1; i < n; ++i) {
      if (lines[i].Seconds(out[i]) > lines[slow].Seconds(out[slow])) slow = i;
    }
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (i == slow || out[i] >= hi[i]) continue;
      if (best < 0 || lines[i].Seconds(out[i] + 1) < lines[best].Seconds(out[best] + 1)) best = i;
    }
    if (best < 0 || out[slow] <= lo[slow] ||
        lines[best].Seconds(out[best] + 1) >= lines[slow].Seconds(out[slow])) {
      break;
    }
    --out[slow];
    ++out[best];
  }
  return out;
}

double Balancer::PredictedStepSeconds(const std::vector<std::string>& workers,
                                      const std::vector<int>& allocation) const {
  const std::vector<Line> lines = Lines(workers);
  double worst = 0;
  for (size_t i = 0; i < workers.size() && i < allocation.size(); ++i) {
    worst = std::max(worst, lines[i].Seconds(allocation[i]));
  }
  return worst;
}

absl::StatusOr<std::optional<std::vector<int>>> Balancer::Propose(
    const std::vector<std::string>& workers, const std::vector<int>& current) {
  absl::StatusOr<std::vector<int>> best = Optimal(workers);
  if (!best.ok()) return best.status();
  bool valid = current.size() == workers.size();
  if (valid) {
    int64_t sum = 0;
    for (size_t i = 0; i < current.size(); ++i) {
      sum += current[i];
      if (current[i] < options_.min_batch || current[i] > MaxFor(workers[i])) valid = false;
    }
    valid = valid && sum == options_.global_batch;
  }
  const int previous_streak = std::exchange(streak_, 0);
  if (!valid) return std::optional<std::vector<int>>(*std::move(best));
  if (*best == current) return std::optional<std::vector<int>>();
  const double now = PredictedStepSeconds(workers, current);
  const double then = PredictedStepSeconds(workers, *best);
  const double h = options_.hysteresis;
  const bool above = then < (1.0 - h) * now;
  if (above && (options_.confirm_factor <= 1 || then < (1.0 - options_.confirm_factor * h) * now)) {
    return std::optional<std::vector<int>>(*std::move(best));
  }
  const bool persistent =
      options_.persistent_rounds > 0 && then < (1.0 - options_.persistent_fraction * h) * now;
  if (!above && !persistent) return std::optional<std::vector<int>>();
  std::vector<std::string> donors;  // the workers the proposal takes samples from
  for (size_t i = 0; i < workers.size(); ++i) {
    if ((*best)[i] < current[i]) donors.push_back(workers[i]);
  }
  const bool continues =
      previous_streak > 0 && streak_current_ == current && streak_donors_ == donors;
  streak_ = continues ? previous_streak + 1 : 1;
  streak_current_ = current;
  streak_donors_ = std::move(donors);
  // A gain above the hysteresis needs one confirming round, a smaller one persistent_rounds.
  const int rounds = options_.persistent_rounds;
  const int needed = above ? (rounds > 0 ? std::min(2, rounds) : 2) : rounds;
  if (streak_ < needed) return std::optional<std::vector<int>>();
  streak_ = 0;
  return std::optional<std::vector<int>>(*std::move(best));
}

}  // namespace hptrain::sched
