// RunSummary: what `hptrain run JOB.yaml --output-json PATH` reports at the end of a run, and its
// JSON form. The JSON is an interface that the benchmark harness and users script against
// (docs/design.md, "Job file and run summary"); the structs below mirror it field for field, with the
// same names:
//
//   { "job": str, "strategy": str, "strategy_decision": str (optional), "task": str, "metric": str, "workers": int, "epochs": int,
//     "steps": int, "wall_seconds": float, "samples_per_second": float,
//     "final": { "test_accuracy": float, "test_loss": float, "train_loss": float,
//                "metrics": METRICS, "worker_test_accuracy": SPREAD (optional) },
//     "per_epoch": [ { "epoch": int, "test_accuracy": float, "train_loss": float,
//                      "wall_seconds": float, "metrics": METRICS,
//                      "worker_test_accuracy": SPREAD (optional) } ],
//     "evaluations": [ { "step": int, "epochs": float, "test_accuracy": float,
//                        "test_loss": float, "elapsed_seconds": float, "metrics": METRICS,
//                        "worker_test_accuracy": SPREAD (optional) } ],
//     "ranks": [ { "rank": int, "group": str, "bytes_sent": int, "bytes_received": int,
//                  "ps_bytes_sent": int, "ps_bytes_received": int (optional when reading),
//                  "batch_size": int, "compute_seconds": float, "comm_seconds": float,
//                  "exposed_comm_seconds": float (optional when reading),
//                  "exchanges": int (gossip: model exchanges; only for gossip),
//                  "threshold": float (gossip: the θ in force at the end, calibrated or set; 0
//                  with a fixed period; only for gossip) } ],
//     "membership_changes": [ { "epoch": int, "reason": str, "slots": [int], "members": [int],
//                               "effective_step": int, "unix_seconds": float,
//                               "detail": str } ] (elastic jobs only),
//     "worker_restarts": [int] (elastic jobs only) }
//
// Elastic jobs (spec.elastic, docs/elastic.md): "ranks" stay keyed by worker slot (a worker's
// --rank), not by its rank among the members, and hold every slot that reported (members that
// left included). "membership_changes" are the coordinator's membership changes in order
// (JobStatus.membership_changes; after a gang restart, the last gang's): "reason"
// "joined", "removed" or "lost", "slots" the slots that joined or left, "members" the members
// after the change in rank order, "effective_step" the first step of the new epoch (0 for
// "lost": at once), "detail" why ("control file", "exit 1", "killed by signal 9", "heartbeat
// missing for 30 s", ...). "worker_restarts" counts, by slot, the workers the launcher restarted
// alone after they failed (against spec.runPolicy.backoffLimit, per slot).
//
// "strategy_decision": what a strategy that decides from measured times (auto, quantized with bits
// dynamic or denseFallback) picked, and the figures why, e.g. "picked fp32 (ssgd's all-reduce):
// exposed communication 9 % of compute (...) <= 25 %"; absent for the other strategies.
//
// "task" is spec.task and "metric" the name of its primary metric (runtime/train/task.h):
// classification "accuracy", multilabel "f1", regression "rmse", torchscript "metric" (or "loss"
// for a module without a metric method). METRICS = { "NAME": float, ... }: every metric of the
// task at that evaluation, primary first (classification: "accuracy", "top5_accuracy";
// multilabel: "f1", "map"; regression: "rmse", "mae"). "test_accuracy" stays the classification
// task's top-1 accuracy, a fraction in [0, 1]; for the other tasks it is 0 (read "metrics").
// Summaries written before tasks existed lack "task", "metric" and "metrics": they read as
// classification with empty metrics.
//
// SPREAD = { "min": float, "max": float, "mean": float, "ranks": [float] }: the primary metric
// (the accuracy, for classification) of each worker's own model before the models were averaged
// (strategies whose workers train models of their own, gossip, with more than one worker;
// absent otherwise), "ranks" by rank.
//
// Fields may be added; existing ones keep their names and meaning. JSON has no NaN or infinity: a
// non-finite float (e.g. a test loss never measured) is written as null and read back as NaN.
// The launcher publishes the text with WriteFileAtomically() (runtime/base/atomic_file.h).
#ifndef HPTRAIN_RUNTIME_JOB_RUN_SUMMARY_H_
#define HPTRAIN_RUNTIME_JOB_RUN_SUMMARY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace hptrain::job {

// A task's metric values by name, primary first (METRICS above).
using NamedMetrics = std::vector<std::pair<std::string, double>>;

// The value of metric `name` in `metrics`, or NaN when absent.
double MetricValue(const NamedMetrics& metrics, const std::string& name);

// Each worker's own primary metric, by rank (SPREAD above); empty when not measured.
using WorkerAccuracies = std::vector<double>;

// The lowest, highest and mean of non-empty WorkerAccuracies (the SPREAD above, and the
// console's "worker_accuracy" line).
struct AccuracySpread {
  double min = 0;
  double max = 0;
  double mean = 0;
};
AccuracySpread SpreadOf(const WorkerAccuracies& accuracies);

struct FinalMetrics {
  double test_accuracy = 0.0;  // fraction in [0, 1]
  double test_loss = 0.0;
  double train_loss = 0.0;
  NamedMetrics metrics;
  WorkerAccuracies worker_test_accuracy;  // of the last epoch's evaluation
};

struct EpochSummary {
  int epoch = 0;  // 1-based
  double test_accuracy = 0.0;
  double train_loss = 0.0;
  double wall_seconds = 0.0;  // this epoch's duration
  double elapsed_seconds = 0.0;  // from the launcher's start to the end of this epoch's evaluation
  NamedMetrics metrics;
  WorkerAccuracies worker_test_accuracy;
};

struct RankSummary {
  int rank = 0;
  std::string group;  // worker group name from the job file
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t batch_size = 0;  // the rank's batch at the end of the run
  double compute_seconds = 0.0;
  double comm_seconds = 0.0;
  int64_t ps_bytes_sent = 0;  // of bytes_sent / bytes_received, exchanged with the parameter server
  int64_t ps_bytes_received = 0;
  // Of comm_seconds, the time training waited for communication; 1 − exposed / comm is the
  // share hidden behind computation (the overlap ratio).
  double exposed_comm_seconds = 0.0;
  int64_t exchanges = 0;  // gossip: model exchanges the rank took part in
  double threshold = 0;   // gossip: θ in force at the end (calibrated or set; 0: fixed period)
};

// One evaluation on the test set: each epoch's end, and every spec.evalEverySteps steps.
struct EvaluationSummary {
  int64_t step = 0;            // global steps done
  double epochs = 0.0;         // fractional epochs done
  double test_accuracy = 0.0;  // fraction in [0, 1]
  double test_loss = 0.0;
  double elapsed_seconds = 0.0;  // from the launcher's start to the end of the evaluation
  NamedMetrics metrics;
  WorkerAccuracies worker_test_accuracy;
};

// One sample of the run's progress, taken about once a second by the launcher.
struct ProgressPoint {
  double elapsed_seconds = 0.0;   // since the launcher started
  int64_t step = 0;               // global steps done (the slowest rank's)
  std::vector<int> batch_sizes;   // each rank's batch at its last report
  std::vector<int64_t> rank_steps;        // each rank's steps done
  std::vector<double> compute_seconds;    // each rank's total compute time (slowdown included)
};

// One membership epoch of an elastic job (MembershipChange in proto/hptrain/v1/coordinator.proto).
struct MembershipChangeSummary {
  int64_t epoch = 0;
  std::string reason;        // "joined", "removed", "lost"
  std::vector<int> slots;    // the slots that joined or left
  std::vector<int> members;  // after the change, in rank order
  int64_t effective_step = 0;
  double unix_seconds = 0.0;
  std::string detail;
};

struct RunSummary {
  std::string job;
  std::string strategy;  // spec.strategy.type
  std::string strategy_decision;  // empty: none (absent from the JSON)
  std::string task = "classification";  // spec.task
  std::string metric = "accuracy";      // the task's primary metric
  int workers = 0;
  int epochs = 0;
  int64_t steps = 0;  // global optimizer steps
  double wall_seconds = 0.0;
  double samples_per_second = 0.0;
  FinalMetrics final;  // named after the JSON key
  std::vector<EpochSummary> per_epoch;
  std::vector<EvaluationSummary> evaluations;  // in step order; optional when read
  std::vector<RankSummary> ranks;
  std::vector<ProgressPoint> timeline;  // JSON "timeline" when not empty; not read back
  // Elastic jobs only (the JSON's two keys are written when `elastic`, and read back).
  bool elastic = false;
  std::vector<MembershipChangeSummary> membership_changes;
  std::vector<int> worker_restarts;  // by slot
};

// Returns the summary as pretty-printed JSON (2-space indent, keys in the order above, trailing
// newline). Never fails.
std::string RunSummaryToJson(const RunSummary& summary);

// Parses RunSummaryToJson()'s output, or any JSON with at least the fields above; unknown fields
// are ignored. Errors are InvalidArgument naming the offending field, e.g.
// "run summary: ranks[2].bytes_sent: expected an integer", or the parser's position for malformed
// JSON.
absl::StatusOr<RunSummary> RunSummaryFromJson(std::string_view json);

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_RUN_SUMMARY_H_
