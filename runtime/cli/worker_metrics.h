// The worker's metric families, with the names docs/design.md fixes (dashboards and the controller
// read them). Created once per process; the hot path only touches cached pointers.
#ifndef HPTRAIN_RUNTIME_CLI_WORKER_METRICS_H_
#define HPTRAIN_RUNTIME_CLI_WORKER_METRICS_H_

#include <cstdint>

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
  metrics::Counter* exposed_comm_seconds_;
  metrics::Gauge* overlap_ratio_;
  double comm_total_ = 0;     // seconds, since start
  double exposed_total_ = 0;
  metrics::Gauge* train_loss_;
  metrics::Gauge* eval_accuracy_;
  // hptrain_eval_worker_accuracy: registered at the first evaluation that measured the
  // workers' own models (gossip), so that no other strategy exports it.
  metrics::Registry& registry_;
  metrics::Gauge* worker_accuracy_ = nullptr;
  metrics::Gauge* step_;
  metrics::Gauge* epoch_;
  metrics::Gauge* torch_threads_;
  metrics::Gauge* resumed_from_step_;
  int64_t last_sent_ = 0;
  int64_t last_received_ = 0;
  metrics::Counter* node_bytes_[4];  // intra sent, intra received, inter sent, inter received
  int64_t last_node_bytes_[4] = {0, 0, 0, 0};
};

}  // namespace hptrain::cli

#endif  // HPTRAIN_RUNTIME_CLI_WORKER_METRICS_H_
