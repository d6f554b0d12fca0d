// Worker readings: what the controller knows of each worker process of each TrainingJob, read
// from the metrics the runtime exposes (docs/design.md, "Metrics"), and the two places it reads them
// from.
//
//   PrometheusReadings  one instant query per pass to the Prometheus HTTP API (--prometheus-url):
//                       every hptrain_* series of the readings below with role="worker". The
//                       series carry the runtime's own trainingjob, role and rank labels (no
//                       scrape setting is needed to keep them). A namespace label, when present,
//                       must name the job's namespace. Series of runtimes older than the
//                       trainingjob label are read by their "exported_job" or "job" label.
//   ScrapedReadings     without Prometheus: GET http://POD_IP:PORT/metrics of each worker pod of
//                       the jobs asked for, PORT being the container port named "metrics".
//
// Per (job, rank) one reading. When a rank has series from several pods (a gang restart leaves
// the old pod's series behind for a while) the pod with the newest sample wins.
//
// Thread-safety: Read is for one thread at a time; the free functions are pure.
#ifndef HPTRAIN_CONTROLLER_MANAGER_WORKER_READINGS_H_
#define HPTRAIN_CONTROLLER_MANAGER_WORKER_READINGS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "controller/kube/store.h"
#include "controller/promql/prometheus_client.h"
#include "controller/promql/sample.h"

namespace hptrain::manager {

class JobCaches;

struct WorkerReading {
  std::string pod;                 // the series' pod (or instance) label; "" when none
  double compute_seconds = 0;      // hptrain_compute_seconds_sum: compute time so far
  int64_t compute_steps = 0;       // hptrain_compute_seconds_count: steps measured so far
  int batch_size = 0;              // hptrain_batch_size: the batch of the last step
  double samples_per_second = 0;   // hptrain_samples_per_second
  int64_t step = -1;               // hptrain_step; -1 when not read
  int64_t epoch = -1;              // hptrain_epoch; -1 when not read
  int64_t resumed_from_step = -1;  // hptrain_resumed_from_step; -1 when not read or fresh
  std::optional<double> train_loss;     // hptrain_train_loss: the last step's (0 before one)
  std::optional<double> eval_accuracy;  // hptrain_eval_accuracy (0 before the first evaluation)
  // hptrain_eval_metric{metric="<name>"}: the last evaluation's value of each metric of the
  // job's task, by name.
  std::map<std::string, double> eval_metrics;
  double newest_sample_seconds = 0;  // Unix time of the newest sample folded in
};

// Job key ("namespace/name") -> rank -> reading.
using WorkerReadings = std::map<std::string, std::map<int, WorkerReading>>;

// The metric names a reading is made of.
const std::vector<std::string>& WorkerReadingMetrics();

// Folds `samples` (any mix of the metrics above; others are ignored, as are samples without
// trainingjob (or, from older runtimes, exported_job or job) or rank labels and those whose role
// label is not "worker") into `out`, for the jobs named by
// `job_keys` ("namespace/name") only. A sample with a namespace label belongs to that
// namespace's job; one without belongs to every listed job of its name. `now_seconds` stands
// for samples without a timestamp.
void FoldSamples(const std::vector<promql::Sample>& samples, const std::vector<std::string>& job_keys,
                 double now_seconds, WorkerReadings* out);

class WorkerReadingsSource {
 public:
  virtual ~WorkerReadingsSource() = default;
  // Readings of the workers of `jobs` (cached TrainingJobs). A job whose workers cannot be read
  // is left out; an error means nothing could be read at all.
  virtual absl::StatusOr<WorkerReadings> Read(const std::vector<kube::ObjectPtr>& jobs) = 0;
  // Why some workers of a job could not be read by the last Read, by job key: the first error
  // for each such job (one line, naming the pod). The job may still have readings of its other
  // workers. Empty when the last Read met no such error (a source that reads all jobs at once,
  // as Prometheus does, has none: its Read fails as a whole).
  virtual std::map<std::string, std::string> JobErrors() const { return {}; }
  // For logs: "prometheus http://..." or "pod /metrics".
  virtual std::string Describe() const = 0;
};

// Reads through Prometheus' HTTP API.
std::unique_ptr<WorkerReadingsSource> NewPrometheusReadings(
    std::shared_ptr<promql::PrometheusClient> client);

// Scrapes the worker pods found in `caches` (not owned; must outlive the source); each GET is
// bounded by `timeout`.
std::unique_ptr<WorkerReadingsSource> NewScrapedReadings(const JobCaches* caches,
                                                         absl::Duration timeout);

}  // namespace hptrain::manager

#endif  // HPTRAIN_CONTROLLER_MANAGER_WORKER_READINGS_H_
