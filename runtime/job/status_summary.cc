#include "runtime/job/status_summary.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace hptrain::job {
namespace {

// An evaluation's metrics by name, primary first.
NamedMetrics MetricsOf(const hptrain::v1::EpochReport& e) {
  NamedMetrics metrics;
  for (const auto& m : e.metrics()) metrics.emplace_back(m.name(), m.value());
  return metrics;
}

}  // namespace

RunSummary BuildSummary(const JobSpec& spec, const hptrain::v1::JobStatus& status,
                        double wall_seconds, double start_unix_seconds) {
  RunSummary summary;
  summary.job = spec.name;
  summary.strategy = spec.strategy.type;
  summary.task = spec.task;
  // The task's primary metric (runtime/train/task.h); the evaluations' reports name it too.
  summary.metric = spec.task == "multilabel"    ? "f1"
                   : spec.task == "regression"  ? "rmse"
                   : spec.task == "torchscript" ? "metric"
                                                : "accuracy";
  summary.workers = spec.WorldSize();
  summary.epochs = spec.epochs;
  for (const auto& r : status.ranks()) summary.steps = std::max<int64_t>(summary.steps, r.step());
  summary.wall_seconds = wall_seconds;
  // Throughput over the time spent in training steps (the slowest rank's), so start-up and
  // evaluation do not dilute it; wall_seconds has the whole run.
  double train_seconds = 0;
  for (const auto& r : status.ranks()) train_seconds = std::max(train_seconds, r.train_seconds());
  summary.samples_per_second =
      train_seconds > 0
          ? summary.steps * static_cast<double>(spec.global_batch_size) / train_seconds
          : 0.0;
  double previous = 0;
  for (const auto& e : status.epochs()) {
    EpochSummary epoch;
    epoch.epoch = e.epoch() + 1;
    epoch.test_accuracy = e.test_accuracy();
    epoch.train_loss = e.train_loss();
    epoch.wall_seconds = e.wall_seconds() - previous;
    epoch.elapsed_seconds = e.end_unix_seconds() - start_unix_seconds;
    previous = e.wall_seconds();
    epoch.worker_test_accuracy.assign(e.worker_test_accuracy().begin(),
                                      e.worker_test_accuracy().end());
    epoch.metrics = MetricsOf(e);
    summary.per_epoch.push_back(epoch);
    summary.final.test_accuracy = e.test_accuracy();
    summary.final.test_loss = e.test_loss();
    summary.final.train_loss = e.train_loss();
    summary.final.metrics = epoch.metrics;
    if (!epoch.metrics.empty()) summary.metric = epoch.metrics.front().first;
    summary.final.worker_test_accuracy = summary.per_epoch.back().worker_test_accuracy;
  }
  for (const auto& e : status.evaluations()) {
    EvaluationSummary evaluation;
    evaluation.step = e.step();
    evaluation.epochs = e.epochs_done();
    evaluation.test_accuracy = e.test_accuracy();
    evaluation.test_loss = e.test_loss();
    evaluation.elapsed_seconds = e.end_unix_seconds() - start_unix_seconds;
    evaluation.worker_test_accuracy.assign(e.worker_test_accuracy().begin(),
                                           e.worker_test_accuracy().end());
    evaluation.metrics = MetricsOf(e);
    if (!evaluation.metrics.empty()) summary.metric = evaluation.metrics.front().first;
    summary.evaluations.push_back(evaluation);
  }
  std::vector<int> allocation(status.allocation().batch_sizes().begin(),
                              status.allocation().batch_sizes().end());
  for (const auto& r : status.ranks()) {
    RankSummary rank;
    rank.rank = r.rank();
    rank.group = r.rank() < status.groups_size() ? status.groups(r.rank()) : "";
    rank.bytes_sent = r.bytes_sent();
    rank.bytes_received = r.bytes_received();
    rank.ps_bytes_sent = r.ps_bytes_sent();
    rank.ps_bytes_received = r.ps_bytes_received();
    rank.batch_size = r.batch_size();
    rank.compute_seconds = r.compute_seconds();
    rank.comm_seconds = r.comm_seconds();
    rank.exposed_comm_seconds = r.exposed_comm_seconds();
    rank.exchanges = r.exchanges();
    rank.threshold = r.gossip_threshold();
    summary.ranks.push_back(rank);
    // Every rank took the same decision from the same agreed figures: rank 0's says it (an
    // elastic job's first member's).
    const int lead = status.members_size() > 0 && spec.elastic.enabled ? status.members(0) : 0;
    if (r.rank() == lead) summary.strategy_decision = r.strategy_decision();
  }
  summary.elastic = spec.elastic.enabled;
  for (const auto& c : status.membership_changes()) {
    MembershipChangeSummary change;
    change.epoch = c.epoch();
    change.reason = c.reason();
    change.slots.assign(c.slots().begin(), c.slots().end());
    change.members.assign(c.members().begin(), c.members().end());
    change.effective_step = c.effective_step();
    change.unix_seconds = c.unix_seconds();
    change.detail = c.detail();
    summary.membership_changes.push_back(std::move(change));
  }
  return summary;
}

}  // namespace hptrain::job
