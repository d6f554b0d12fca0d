// The per-worker part of TrainingJob.status and its aggregates:
//   workers[]         one entry per rank, in rank order: name, group, rank, node (the pod's
//                     spec.nodeName), device (from the group's template: "cpu", or "gpu x<k>"
//                     with the nvidia.com/gpu.product nodeSelector in parentheses when there is
//                     one), phase (the pod's phase, "Terminating" while it is being deleted,
//                     "Absent" when there is no pod), samplesPerSecond, batchSize
//   readyWorkers      current workers (gang_restart.h) that are Running and Ready
//   step, epoch       the highest a worker reports (kept from the last report when none does)
//   samplesPerSecond  the sum over workers
//   trainLoss         the mean over workers of the last step's training loss (hptrain_train_loss)
//                     of those that did a step (a worker reads 0 before its first); kept from
//                     the last report when none does, or when the mean is not finite
//   evaluation        {metric, value}: rank 0's value of the job's primary metric (PrimaryMetric)
//                     at the last evaluation (hptrain_eval_metric{metric}, or for accuracy
//                     hptrain_eval_accuracy, which reads 0 until the first evaluation and counts
//                     only above 0); kept from the last report when rank 0 has none
//
// Throughput comes from a metrics feed outside the reconciler (Prometheus, through the
// controller loop): WorkerMetrics, by pod name. A worker whose pod is not Running reads 0; a
// running one without a fresh value keeps the one in status. batchSize is written by the
// rebalancer (allocation.h) and kept here, unless the kept values no longer fit the spec (another
// set of ranks or global batch), in which case the job's initial allocation replaces them.
//
// Pure; thread-safe on distinct arguments.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_WORKER_STATUS_H_
#define HPTRAIN_CONTROLLER_RECONCILE_WORKER_STATUS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "controller/reconcile/gang_restart.h"
#include "controller/reconcile/object_meta.h"
#include "controller/reconcile/observed_objects.h"
#include "controller/reconcile/parsed_job.h"

namespace hptrain::reconcile {

struct WorkerMetrics {
  double samples_per_second = 0.0;
  int64_t step = -1;   // -1: not reported
  int64_t epoch = -1;  // -1: not reported
  // The step the worker resumed training from (hptrain_resumed_from_step); -1: not reported,
  // or it started fresh.
  int64_t resumed_from_step = -1;
  std::optional<double> train_loss;     // hptrain_train_loss; unset: not reported
  std::optional<double> eval_accuracy;  // hptrain_eval_accuracy; unset: not reported
  std::map<std::string, double> eval_metrics;  // hptrain_eval_metric, by its metric label
};

// The metric status.evaluation reports for spec.task: accuracy (classification), f1
// (multilabel), rmse (regression), metric (torchscript: the module's own metric()).
std::string PrimaryMetric(const std::string& task);

// Keyed by worker pod name.
using WorkerMetricsMap = std::map<std::string, WorkerMetrics>;

// Pods the Plan being built creates or deletes, by name. The status is written before the
// Plan's creates and deletes run (plan.h), and describes the state they lead to: a pod the Plan
// creates reads "Pending" (the API server's phase for a new pod), one it deletes "Terminating".
// Re-observing after the Plan then finds the status already right.
struct PlannedPods {
  std::set<std::string> creating;
  std::set<std::string> deleting;
};

// Rewrites workers, readyWorkers, step, epoch, samplesPerSecond, trainLoss and evaluation of
// `*status` (an object) for `job`, from the observed pods, the gang assessment, the Plan's pod
// changes and `metrics`; other fields are untouched.
void UpdateWorkerStatus(const ParsedJob& job, const ObservedPods& pods, const GangAssessment& gang,
                        const PlannedPods& planned, const WorkerMetricsMap& metrics, Json* status);

// The device string of a pod template (see above), for a job whose spec.device is `job_device`:
// a cuda job's template that names no nvidia.com/gpu counts the one GPU its pods are given.
std::string DeviceOf(const Json& pod_template, const std::string& job_device = "cpu");

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_WORKER_STATUS_H_
