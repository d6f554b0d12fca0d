#include "controller/manager/worker_readings.h"

#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/kube/log.h"
#include "controller/kube/object_meta.h"
#include "controller/manager/job_caches.h"
#include "controller/promql/scrape.h"
#include "controller/reconcile/labels.h"
#include "runtime/metrics/registry.h"

namespace hptrain::manager {
namespace {

std::string Label(const promql::Sample& sample, const char* name) {
  auto it = sample.labels.find(name);
  return it == sample.labels.end() ? "" : it->second;
}

// The TrainingJob a sample belongs to: its "trainingjob" label. Runtimes before that label
// (an older runtime image of a job still running after the controller was upgraded) exposed the
// name as "job": kept by a scrape with honor_labels, renamed "exported_job" by one without
// (whose own "job" is then the scrape job's name, never a TrainingJob's: it holds a "/" or names
// no job asked for). "" when none.
std::string TrainingJobOf(const promql::Sample& sample) {
  for (const char* name : {metrics::kTrainingJobLabel, "exported_job", "job"}) {
    std::string value = Label(sample, name);
    if (!value.empty()) return value;
  }
  return "";
}

// Sets the field of `reading` that `sample` is; false for other metrics.
bool Apply(const promql::Sample& sample, WorkerReading* reading) {
  const std::string metric = promql::NameOf(sample);
  const double value = sample.value;
  if (metric == "hptrain_eval_metric") {
    const std::string name = Label(sample, "metric");
    if (name.empty()) return false;
    reading->eval_metrics[name] = value;
  } else if (metric == "hptrain_train_loss") {
    reading->train_loss = value;
  } else if (metric == "hptrain_eval_accuracy") {
    reading->eval_accuracy = value;
  } else if (metric == "hptrain_compute_seconds_sum") {
    reading->compute_seconds = value;
  } else if (metric == "hptrain_compute_seconds_count") {
    reading->compute_steps = static_cast<int64_t>(value);
  } else if (metric == "hptrain_batch_size") {
    reading->batch_size = static_cast<int>(value);
  } else if (metric == "hptrain_samples_per_second") {
    reading->samples_per_second = value;
  } else if (metric == "hptrain_step") {
    reading->step = static_cast<int64_t>(value);
  } else if (metric == "hptrain_epoch") {
    reading->epoch = static_cast<int64_t>(value);
  } else if (metric == "hptrain_resumed_from_step") {
    reading->resumed_from_step = static_cast<int64_t>(value);
  } else {
    return false;
  }
  return true;
}

double NowSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

class PrometheusReadings : public WorkerReadingsSource {
 public:
  explicit PrometheusReadings(std::shared_ptr<promql::PrometheusClient> client)
      : client_(std::move(client)),
        query_(absl::StrCat("{__name__=~\"", absl::StrJoin(WorkerReadingMetrics(), "|"),
                            "\",role=\"worker\"}")) {}

  absl::StatusOr<WorkerReadings> Read(const std::vector<kube::ObjectPtr>& jobs) override {
    WorkerReadings out;
    if (jobs.empty()) return out;
    absl::StatusOr<std::vector<promql::Sample>> samples = client_->Query(query_);
    if (!samples.ok()) return samples.status();
    std::vector<std::string> keys;
    for (const kube::ObjectPtr& job : jobs) keys.push_back(kube::KeyOf(*job));
    FoldSamples(*samples, keys, NowSeconds(), &out);
    return out;
  }

  std::string Describe() const override { return absl::StrCat("prometheus ", client_->url()); }

 private:
  std::shared_ptr<promql::PrometheusClient> client_;
  const std::string query_;
};

// The container port named "metrics" of `pod`, or reconcile::kMetricsPort.
int MetricsPortOf(const nlohmann::json& pod) {
  const nlohmann::json containers =
      pod.value("spec", nlohmann::json::object()).value("containers", nlohmann::json::array());
  for (const nlohmann::json& container : containers) {
    for (const nlohmann::json& port : container.value("ports", nlohmann::json::array())) {
      if (port.value("name", "") == reconcile::kMetricsPortName && port.contains("containerPort") &&
          port["containerPort"].is_number_integer()) {
        return port["containerPort"].get<int>();
      }
    }
  }
  return reconcile::kMetricsPort;
}

class ScrapedReadings : public WorkerReadingsSource {
 public:
  ScrapedReadings(const JobCaches* caches, absl::Duration timeout)
      : caches_(caches), timeout_(timeout) {}

  absl::StatusOr<WorkerReadings> Read(const std::vector<kube::ObjectPtr>& jobs) override {
    WorkerReadings out;
    errors_.clear();
    for (const kube::ObjectPtr& job : jobs) {
      const std::string key = kube::KeyOf(*job);
      reconcile::Observed observed = caches_->Observe(*job);
      for (const nlohmann::json& pod : observed.pods) {
        const nlohmann::json labels =
            pod.value("metadata", nlohmann::json::object()).value("labels", nlohmann::json::object());
        if (labels.value(reconcile::kRoleLabel, "") != reconcile::kRoleWorker) continue;
        const nlohmann::json status = pod.value("status", nlohmann::json::object());
        const std::string ip = status.value("podIP", "");
        if (status.value("phase", "") != "Running" || ip.empty()) continue;
        const std::string url = absl::StrCat("http://", ip, ":", MetricsPortOf(pod), "/metrics");
        absl::StatusOr<std::vector<promql::Sample>> samples = promql::ScrapeMetrics(url, timeout_);
        if (!samples.ok()) {
          kube::LogLine(absl::StrCat("rebalance ", key, ": ", samples.status().message()));
          errors_.try_emplace(
              key, absl::StrCat("pod ", kube::NameOf(pod), ": ", samples.status().message()));
          continue;
        }
        // The page is the pod's own: its series name no pod, so file them under it.
        for (promql::Sample& sample : *samples) sample.labels["pod"] = kube::NameOf(pod);
        FoldSamples(*samples, {key}, NowSeconds(), &out);
      }
    }
    return out;
  }

  std::string Describe() const override { return "pod /metrics"; }
  std::map<std::string, std::string> JobErrors() const override { return errors_; }

 private:
  const JobCaches* const caches_;
  const absl::Duration timeout_;
  std::map<std::string, std::string> errors_;  // of the last Read
};

}  // namespace

const std::vector<std::string>& WorkerReadingMetrics() {
  static const std::vector<std::string> kMetrics = {
      "hptrain_compute_seconds_sum", "hptrain_compute_seconds_count", "hptrain_batch_size",
      "hptrain_samples_per_second",  "hptrain_step",                  "hptrain_epoch",
      "hptrain_resumed_from_step",   "hptrain_train_loss",            "hptrain_eval_accuracy",
      "hptrain_eval_metric"};
  return kMetrics;
}

void FoldSamples(const std::vector<promql::Sample>& samples, const std::vector<std::string>& job_keys,
                 double now_seconds, WorkerReadings* out) {
  // Readings per (job key, rank, pod) first; then the newest pod of each rank.
  std::map<std::string, std::set<std::string>> keys_by_name;  // job name -> keys
  for (const std::string& key : job_keys) {
    std::string ns;
    std::string name;
    kube::SplitKey(key, &ns, &name);
    keys_by_name[name].insert(key);
  }
  std::map<std::pair<std::string, int>, std::map<std::string, WorkerReading>> by_pod;
  for (const promql::Sample& sample : samples) {
    if (Label(sample, metrics::kRoleLabel) != "worker") continue;
    const std::string job = TrainingJobOf(sample);
    int rank = -1;
    if (!absl::SimpleAtoi(Label(sample, metrics::kRankLabel), &rank) || rank < 0) continue;
    auto named = keys_by_name.find(job);
    if (named == keys_by_name.end()) continue;
    const std::string ns = Label(sample, "namespace");
    std::string pod = Label(sample, "pod");
    if (pod.empty()) pod = Label(sample, "instance");
    const double when = sample.timestamp_seconds > 0 ? sample.timestamp_seconds : now_seconds;
    for (const std::string& key : named->second) {
      if (!ns.empty() && key != kube::ObjectKey(ns, job)) continue;
      WorkerReading& reading = by_pod[{key, rank}][pod];
      if (!Apply(sample, &reading)) continue;
      reading.pod = pod;
      reading.newest_sample_seconds = std::max(reading.newest_sample_seconds, when);
    }
  }
  for (auto& [job_rank, pods] : by_pod) {
    const WorkerReading* newest = nullptr;
    for (const auto& [pod, reading] : pods) {
      if (newest == nullptr || reading.newest_sample_seconds > newest->newest_sample_seconds) {
        newest = &reading;
      }
    }
    if (newest != nullptr) (*out)[job_rank.first][job_rank.second] = *newest;
  }
}

std::unique_ptr<WorkerReadingsSource> NewPrometheusReadings(
    std::shared_ptr<promql::PrometheusClient> client) {
  return std::make_unique<PrometheusReadings>(std::move(client));
}

std::unique_ptr<WorkerReadingsSource> NewScrapedReadings(const JobCaches* caches,
                                                         absl::Duration timeout) {
  return std::make_unique<ScrapedReadings>(caches, timeout);
}

}  // namespace hptrain::manager
