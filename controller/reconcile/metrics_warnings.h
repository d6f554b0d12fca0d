// When the controller says on a TrainingJob that it cannot read the job's workers: a Warning
// event MetricsUnavailable (events.h), rate-limited per job.
//
// The controller reads each Running job's worker metrics (through Prometheus, or each worker
// pod's /metrics page: controller/manager/worker_readings.h) for status.step, epoch,
// samplesPerSecond, trainLoss and evaluation, and for rebalancing. A reading fails when the
// source cannot be read at all (Prometheus unreachable, a query error), when it cannot read
// some of the job's workers (a pod's page unreachable), or when it has nothing for the job's
// workers (Prometheus does not scrape the pods). Failures only used to be logged, so the status
// columns simply stayed empty; now a job whose readings keep failing says so:
//
//   * a failure episode of a job starts with its first failed reading and ends with its next
//     successful one;
//   * the first Warning comes once the episode has lasted `after` (a pod that is Running but
//     has not opened its metrics port yet, or a series Prometheus has not scraped yet, is no
//     failure worth an event), then at most one every `repeat` while it lasts, so that the
//     event stays among the job's recent ones (events expire after an hour by default) without
//     flooding them;
//   * the message names the source and the last error, e.g. `worker metrics unavailable from
//     prometheus http://prometheus:9090: GET /api/v1/query: connection refused; status.step,
//     status.samplesPerSecond and rebalancing wait for them`.
//
// Pure (time is an argument); not thread-safe: one owner (the rebalance loop's thread).
#ifndef HPTRAIN_CONTROLLER_RECONCILE_METRICS_WARNINGS_H_
#define HPTRAIN_CONTROLLER_RECONCILE_METRICS_WARNINGS_H_

#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "controller/reconcile/events.h"

namespace hptrain::reconcile {

struct MetricsWarningPolicy {
  absl::Duration after = absl::Minutes(1);    // an episode's age at its first Warning
  absl::Duration repeat = absl::Minutes(10);  // between two Warnings of one episode
};

class MetricsWarnings {
 public:
  explicit MetricsWarnings(MetricsWarningPolicy policy = {}) : policy_(policy) {}

  // A successful reading of job `key` at `now`: ends its episode, if any.
  void Succeeded(const std::string& key);

  // A failed reading of job `key` at `now` from `source` ("prometheus http://...", "pod
  // /metrics") for `error` (one line). Returns the Warning MetricsUnavailable to record on the
  // job when one is due, else nothing.
  std::optional<Event> Failed(const std::string& key, absl::Time now, absl::string_view source,
                              absl::string_view error);

  // Forgets the jobs not in `keys` (finished, deleted): a job that runs again starts afresh.
  void Retain(const std::set<std::string>& keys);

  // True while job `key` is in a failure episode.
  bool failing(const std::string& key) const { return episodes_.count(key) > 0; }

 private:
  struct Episode {
    absl::Time since;
    std::optional<absl::Time> warned;  // the last Warning's time
  };
  const MetricsWarningPolicy policy_;
  std::map<std::string, Episode> episodes_;
};

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_METRICS_WARNINGS_H_
