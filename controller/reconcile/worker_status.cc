#include "controller/reconcile/worker_status.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "controller/reconcile/labels.h"

namespace hptrain::reconcile {
namespace {

// A GPU count: Kubernetes quantities arrive as strings ("1") or, from hand-written JSON, numbers.
int64_t GpuCount(const Json& resources) {
  for (const char* kind : {"limits", "requests"}) {
    const Json* value = Find(resources, {kind, "nvidia.com/gpu"});
    if (value == nullptr) continue;
    if (value->is_number_integer()) return value->get<int64_t>();
    int64_t count = 0;
    if (value->is_string() && absl::SimpleAtoi(value->get<std::string>(), &count)) return count;
  }
  return 0;
}

// The batch size each rank keeps: the status' values when they still fit, else the initial split.
std::vector<int64_t> BatchSizes(const ParsedJob& job, const std::vector<std::string>& names,
                                const Json* old_workers) {
  std::vector<int> initial = job.spec.InitialAllocation();
  std::vector<int64_t> kept(names.size(), -1);
  int64_t sum = 0;
  bool complete = old_workers != nullptr && old_workers->is_array();
  for (size_t r = 0; complete && r < names.size(); ++r) {
    for (const Json& entry : *old_workers) {
      if (StringAt(entry, {"name"}) == names[r]) kept[r] = IntAt(entry, {"batchSize"}, -1);
    }
    complete = kept[r] > 0;
    sum += kept[r];
  }
  if (complete && sum == job.spec.global_batch_size) return kept;
  return std::vector<int64_t>(initial.begin(), initial.end());
}

// The job's primary metric as rank 0 last reported it.
std::optional<double> EvaluationOf(const WorkerMetrics& m, const std::string& metric) {
  auto it = m.eval_metrics.find(metric);
  if (it != m.eval_metrics.end()) return it->second;
  if (metric == "accuracy" && m.eval_accuracy.has_value() && *m.eval_accuracy > 0) {
    return m.eval_accuracy;
  }
  return std::nullopt;
}

}  // namespace

std::string PrimaryMetric(const std::string& task) {
  if (task == "multilabel") return "f1";
  if (task == "regression") return "rmse";
  if (task == "torchscript") return "metric";
  return "accuracy";
}

std::string DeviceOf(const Json& pod_template, const std::string& job_device) {
  int64_t gpus = 0;
  bool named = false;
  const Json* containers = Find(pod_template, {"spec", "containers"});
  if (containers != nullptr && containers->is_array()) {
    for (const Json& c : *containers) {
      if (const Json* resources = Find(c, {"resources"}); resources != nullptr) {
        gpus += std::max<int64_t>(GpuCount(*resources), 0);
        for (const char* kind : {"limits", "requests"}) {
          named = named || Find(*resources, {kind, "nvidia.com/gpu"}) != nullptr;
        }
      }
    }
  }
  // A cuda job's worker gets one GPU where its template names none (desired_objects.h).
  if (!named && job_device == "cuda") gpus = 1;
  if (gpus == 0) return "cpu";
  std::string device = absl::StrCat("gpu x", gpus);
  std::string product = StringAt(pod_template, {"spec", "nodeSelector", "nvidia.com/gpu.product"});
  if (!product.empty()) absl::StrAppend(&device, " (", product, ")");
  return device;
}

void UpdateWorkerStatus(const ParsedJob& job, const ObservedPods& pods, const GangAssessment& gang,
                        const PlannedPods& planned, const WorkerMetricsMap& metrics, Json* status) {
  std::vector<std::string> names;
  std::vector<size_t> group_of;
  for (size_t g = 0; g < job.spec.worker_groups.size(); ++g) {
    for (int i = 0; i < job.spec.worker_groups[g].replicas; ++i) {
      names.push_back(WorkerPodName(job.name, static_cast<int>(names.size())));
      group_of.push_back(g);
    }
  }
  const Json* old_workers = Find(*status, {"workers"});
  std::vector<int64_t> batch = BatchSizes(job, names, old_workers);

  Json workers = Json::array();
  double total_rate = 0.0;
  int64_t step = -1;
  int64_t epoch = -1;
  double loss_sum = 0.0;
  int losses = 0;
  for (size_t r = 0; r < names.size(); ++r) {
    const PodView* pod = pods.Owned(names[r]);
    std::string phase = "Absent";
    std::string node;
    if (planned.creating.count(names[r]) > 0) {
      phase = "Pending";
    } else if (pod != nullptr && (pod->terminating || planned.deleting.count(names[r]) > 0)) {
      phase = "Terminating";
    } else if (pod != nullptr) {
      phase = pod->phase.empty() ? "Pending" : pod->phase;
      node = pod->node;
    }
    // Only a running worker has a throughput; a finished one still reports its last step.
    double rate = 0.0;
    auto m = metrics.find(names[r]);
    if (m != metrics.end()) {
      step = std::max(step, m->second.step);
      epoch = std::max(epoch, m->second.epoch);
      if (m->second.train_loss.has_value() && m->second.step > 0) {
        loss_sum += *m->second.train_loss;
        ++losses;
      }
    }
    if (phase != "Running") {
      rate = 0.0;
    } else if (m != metrics.end()) {
      rate = m->second.samples_per_second;
    } else if (old_workers != nullptr && old_workers->is_array()) {
      for (const Json& entry : *old_workers) {
        const Json* old_rate = Find(entry, {"samplesPerSecond"});
        if (StringAt(entry, {"name"}) == names[r] && old_rate != nullptr && old_rate->is_number()) {
          rate = old_rate->get<double>();
        }
      }
    }
    total_rate += rate;
    const job::WorkerGroupSpec& group = job.spec.worker_groups[group_of[r]];
    workers.push_back(Json{{"name", names[r]},
                           {"group", group.name},
                           {"rank", static_cast<int64_t>(r)},
                           {"node", node},
                           {"device", DeviceOf(job.worker_templates[group_of[r]], job.spec.device)},
                           {"phase", phase},
                           {"samplesPerSecond", rate},
                           {"batchSize", batch[r]}});
  }

  int64_t ready = 0;
  for (const PodView* pod : gang.current) {
    if (pod->role == kRoleWorker && pod->phase == "Running" && pod->ready &&
        planned.deleting.count(pod->name) == 0) {
      ++ready;
    }
  }
  (*status)["workers"] = std::move(workers);
  (*status)["readyWorkers"] = ready;
  (*status)["samplesPerSecond"] = total_rate;
  if (step >= 0) (*status)["step"] = step;
  if (epoch >= 0) (*status)["epoch"] = epoch;
  if (losses > 0 && std::isfinite(loss_sum / losses)) (*status)["trainLoss"] = loss_sum / losses;
  auto rank0 = names.empty() ? metrics.end() : metrics.find(names[0]);
  if (rank0 != metrics.end()) {
    const std::string metric = PrimaryMetric(job.spec.task);
    std::optional<double> value = EvaluationOf(rank0->second, metric);
    if (value.has_value() && std::isfinite(*value)) {
      (*status)["evaluation"] = Json{{"metric", metric}, {"value", *value}};
    }
  }
}

}  // namespace hptrain::reconcile
