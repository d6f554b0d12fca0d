// The worker's metric families, with the names docs/design.md fixes (dashboards and the controller
// read them). Created once per process; the hot path only touches cached pointers.
#ifndef HPTRAIN_RUNTIME_CLI_WORKER_METRICS_H_
#define HPTRAIN_RUNTIME_CLI_WORKER_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/metrics/gpu_metrics.h"
#include "runtime/metrics/registry.h"
#include "runtime/train/trainer.h"

namespace hptrain::cli {

class WorkerMetrics {
 public:
  explicit WorkerMetrics(metrics::Registry& registry);

  // Records one finished step; bytes are the communicator's running totals.
  void OnStep(const train::StepStats& stats, int64_t bytes_sent, int64_t bytes_received);
  void OnEpoch(const train::EpochStats& stats);
  // The communicator's running totals split by the peer's node (Communicator's
  // inter_node_bytes_*; the rest of its bytes stayed inside the node).
  void OnNodeBytes(int64_t intra_sent, int64_t intra_received, int64_t inter_sent,
                   int64_t inter_received);
  // The libtorch threads the trainer chose (set once, when it is created).
  void SetTorchThreads(int threads);
  // The global step a resumed worker continued from (-1 until then, and for a fresh start).
  void SetResumedFromStep(int64_t step);
  // An elastic job's membership change (docs/elastic.md) is done: this worker trains in `epoch`
  // now, `seconds` after the change began (drain, regroup and state broadcast until training
  // again), and `dropped_values` values of per-worker strategy state a checkpoint does not hold
  // (error-feedback residuals, ...) were dropped by it.
  void OnMembershipChange(int64_t epoch, double seconds, int64_t dropped_values);
  // Exports hptrain_gpu_utilization_ratio, hptrain_gpu_memory_used_bytes and
  // hptrain_gpu_memory_total_bytes for CUDA device `device_index` (runtime/metrics/gpu_metrics.h),
  // read from NVML now and then from OnStep, at most once a second. Call it once the worker
  // trains on cuda. Without NVML (no driver libraries, no such device) nothing is exported and
  // one line on stderr says why; training goes on. Returns whether the gauges are exported.
  bool EnableGpu(int device_index);
  // The same with a given NVML: LoadNvml()'s result, or a fake in tests.
  bool EnableGpu(int device_index, const absl::StatusOr<metrics::NvmlApi>& nvml);

 private:
  metrics::Histogram* step_seconds_;
  metrics::Histogram* compute_seconds_;
  metrics::Histogram* comm_seconds_;
  metrics::Gauge* samples_per_second_;
  metrics::Gauge* batch_size_;
  metrics::Counter* bytes_sent_;
  metrics::Counter* bytes_received_;
  metrics::Gauge* ps_staleness_;
  metrics::Gauge* compression_ratio_;
  metrics::Gauge* quant_bits_;
  metrics::Gauge* sync_interval_;
  metrics::Counter* exchanges_;
  int64_t last_exchanges_ = 0;
  metrics::Counter* corrupt_samples_;
  int64_t last_corrupt_samples_ = 0;
  metrics::Counter* exposed_comm_seconds_;
  metrics::Gauge* overlap_ratio_;
  double comm_total_ = 0;     // seconds, since start
  double exposed_total_ = 0;
  metrics::Gauge* train_loss_;
  metrics::Gauge* eval_accuracy_;
  // hptrain_eval_metric{metric}: every metric of the task, by name.
  metrics::GaugeFamily* eval_metric_;
  std::map<std::string, metrics::Gauge*> eval_metrics_;
  // hptrain_eval_worker_accuracy: registered at the first evaluation that measured the
  // workers' own models (gossip), so that no other strategy exports it.
  metrics::Registry& registry_;
  metrics::Gauge* worker_accuracy_ = nullptr;
  // hptrain_amp_skipped_steps_total and hptrain_amp_loss_scale: registered at the first step
  // with loss scaling (spec.precision fp16), so that other jobs do not export them.
  metrics::Counter* amp_skipped_steps_ = nullptr;
  metrics::Gauge* amp_loss_scale_ = nullptr;
  int64_t last_amp_skipped_ = 0;
  metrics::Gauge* step_;
  metrics::Gauge* epoch_;
  metrics::Gauge* torch_threads_;
  metrics::Gauge* resumed_from_step_;
  metrics::Gauge* membership_epoch_;
  metrics::Histogram* membership_change_seconds_;
  metrics::Counter* membership_dropped_state_;
  int64_t last_sent_ = 0;
  int64_t last_received_ = 0;
  metrics::Counter* node_bytes_[4];  // intra sent, intra received, inter sent, inter received
  int64_t last_node_bytes_[4] = {0, 0, 0, 0};
  std::unique_ptr<metrics::GpuMetrics> gpu_;  // null until EnableGpu succeeds
  bool gpu_reported_ = false;                 // a line about the GPU metrics was printed
};

}  // namespace hptrain::cli

#endif  // HPTRAIN_RUNTIME_CLI_WORKER_METRICS_H_
