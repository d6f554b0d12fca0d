#include "runtime/job/local_rebalancer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace hptrain::job {
namespace {

// Steps at one batch size before their median is handed to the balancer; fewer (the steps between
// two switches, or one slow step per interval) are carried into the next interval.
constexpr int64_t kMinSteps = 3;

sched::BalancerOptions BalancerOptionsFor(const JobSpec& spec) {
  sched::BalancerOptions o;
  o.global_batch = spec.global_batch_size;
  o.min_batch = std::max(1, spec.rebalance.min_batch);
  o.max_batch = spec.rebalance.max_batch;
  o.hysteresis = spec.rebalance.hysteresis;
  // The balancer sees one median per rank and batch size per interval: no one-step outliers to set
  // aside. One 50 % away from its size's average (or, at a size within 30 % of one measured, from
  // the model's time there) is a change of speed to follow at once, and so is the one after it;
  // one closer is averaged in with weight 0.3, so a worker that runs 30 % slower for an interval,
  // as ranks sharing two cores did, moves its model by 9 %. In the simulation of the benchmark in
  // tests/runtime/job (100 seeds, speeds drifting by 5 % with such episodes), this took the runs
  // that came within 10 % of where they end within 3 intervals of a change of slowdowns from 49
  // to 91, and the moves after it from 4.8 to 3.3 per run; with 25 % at once, weight 0.5 and no
  // neighbouring sizes, each interval's noise at a size just moved to was taken whole.
  o.model.ewma_alpha = 0.3;
  o.model.drift_factor = 1.5;
  o.model.neighbour_ratio = 1.3;
  o.model.anchor_latest = true;
  return o;
}

}  // namespace

double LocalRebalancer::Stretch::Median() const {
  std::vector<std::pair<double, int64_t>> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  int64_t seen = 0;
  for (const auto& [seconds, weight] : sorted) {
    seen += weight;
    if (2 * seen >= steps) return seconds;
  }
  return sorted.empty() ? 0 : sorted.back().first;
}

LocalRebalancer::LocalRebalancer(const JobSpec& spec)
    : options_(spec.rebalance),
      balancer_(BalancerOptionsFor(spec)),
      current_(spec.InitialAllocation()) {
  for (int r = 0; r < spec.WorldSize(); ++r) names_.push_back(absl::StrCat("worker-", r));
}

std::optional<std::vector<int>> LocalRebalancer::Update(const std::vector<RankProgress>& ranks,
                                                        double now_seconds) {
  int64_t step = 0;
  for (const RankProgress& p : ranks) {
    if (p.rank < 0 || p.rank >= static_cast<int>(names_.size())) continue;
    step = std::max(step, p.step);
    if (p.batch_size > 0) current_[static_cast<size_t>(p.rank)] = p.batch_size;
    auto it = last_.find(p.rank);
    if (it != last_.end() && p.step > it->second.step && p.batch_size == it->second.batch_size &&
        p.compute_seconds > it->second.compute_seconds) {
      Stretch& s = interval_[p.rank][p.batch_size];
      const int64_t steps = p.step - it->second.step;
      s.samples.emplace_back(
          (p.compute_seconds - it->second.compute_seconds) / static_cast<double>(steps), steps);
      s.steps += steps;
    }
    last_[p.rank] = p;
  }
  if (last_decision_seconds_ < 0) {
    last_decision_seconds_ = now_seconds;
    last_decision_step_ = step;
    return std::nullopt;
  }
  const bool due = options_.interval_steps > 0
                       ? step - last_decision_step_ >= options_.interval_steps
                       : now_seconds - last_decision_seconds_ >= options_.interval_seconds;
  if (!due) return std::nullopt;
  last_decision_seconds_ = now_seconds;
  last_decision_step_ = step;
  for (auto& [rank, sizes] : interval_) {
    for (auto it = sizes.begin(); it != sizes.end();) {
      const auto& [batch, stretch] = *it;
      if (stretch.steps >= kMinSteps) {
        balancer_.Observe(names_[static_cast<size_t>(rank)], batch, stretch.Median());
      } else if (batch == current_[static_cast<size_t>(rank)]) {
        ++it;  // too few steps for a mean yet: carried into the next interval
        continue;
      }
      it = sizes.erase(it);
    }
  }
  for (const std::string& name : names_) {
    if (balancer_.model(name) == nullptr) return std::nullopt;  // not every rank measured yet
  }
  auto proposal = balancer_.Propose(names_, current_);
  if (!proposal.ok() || !proposal->has_value()) return std::nullopt;
  current_ = **proposal;
  ++changes_;
  return current_;
}

}  // namespace hptrain::job
