#include "runtime/cli/worker_metrics.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

namespace hptrain::cli {

WorkerMetrics::WorkerMetrics(metrics::Registry& r) : registry_(r) {
  step_seconds_ = r.Histogram("hptrain_step_duration_seconds",
                              "Wall time of one training step.")->Get();
  compute_seconds_ = r.Histogram("hptrain_compute_seconds",
                                 "Data loading, forward and backward time of one step.")->Get();
  comm_seconds_ = r.Histogram("hptrain_comm_seconds",
                              "Time spent reducing gradients in one step (overlapped or not).")
                      ->Get();
  samples_per_second_ = r.Gauge("hptrain_samples_per_second",
                                "Training samples per second of this worker, last step.")->Get();
  batch_size_ = r.Gauge("hptrain_batch_size", "Current per-worker batch size (allocation).")->Get();
  auto* bytes = r.Counter("hptrain_comm_bytes_total",
                          "Payload bytes handed to or taken from the transport.", {"direction"});
  bytes_sent_ = bytes->WithLabels({"sent"});
  bytes_received_ = bytes->WithLabels({"received"});
  auto* node_bytes =
      r.Counter("hptrain_comm_node_bytes_total",
                "Collective payload bytes exchanged with workers on this worker's node (link "
                "intra) or on other nodes (link inter).",
                {"direction", "link"});
  node_bytes_[0] = node_bytes->WithLabels({"sent", "intra"});
  node_bytes_[1] = node_bytes->WithLabels({"received", "intra"});
  node_bytes_[2] = node_bytes->WithLabels({"sent", "inter"});
  node_bytes_[3] = node_bytes->WithLabels({"received", "inter"});
  compression_ratio_ = r.Gauge("hptrain_compression_ratio",
                               "Uncompressed over sent gradient bytes (1 without compression).")
                           ->Get();
  quant_bits_ = r.Gauge("hptrain_quant_bit_width",
                        "Bits per gradient element on the wire (32 = uncompressed).")->Get();
  sync_interval_ = r.Gauge("hptrain_sync_interval",
                           "Local steps between two synchronisations of the workers (localsgd, "
                           "multistep; 1 when every step synchronises).")->Get();
  exchanges_ = r.Counter("hptrain_gossip_exchanges_total",
                         "gossip: model exchanges this worker took part in (as initiator, as "
                         "target, or with easgd's center).")->Get();
  corrupt_samples_ = r.Counter("hptrain_data_corrupt_samples_total",
                               "Samples left out of their batch because they could not be read "
                               "(spec.dataset.skipCorrupt).")->Get();
  exposed_comm_seconds_ =
      r.Counter("hptrain_exposed_comm_seconds_total",
                "Time training waited for communication (what computation did not hide).")
          ->Get();
  overlap_ratio_ = r.Gauge("hptrain_comm_overlap_ratio",
                           "Share of communication time hidden behind computation since start: "
                           "1 - exposed / total communication time (1 before any).")
                       ->Get();
  train_loss_ = r.Gauge("hptrain_train_loss", "Mean training loss of the last step.")->Get();
  eval_accuracy_ = r.Gauge("hptrain_eval_accuracy",
                           "Test accuracy at the last evaluation (classification; 0 for the other "
                           "tasks).")->Get();
  eval_metric_ = r.Gauge("hptrain_eval_metric",
                         "The task's metrics at the last evaluation, by name: accuracy, "
                         "top5_accuracy (classification), f1, map (multilabel), rmse, mae "
                         "(regression), metric or loss (torchscript).",
                         {"metric"});
  step_ = r.Gauge("hptrain_step", "Global training steps completed.")->Get();
  epoch_ = r.Gauge("hptrain_epoch", "Current epoch (0-based).")->Get();
  resumed_from_step_ = r.Gauge("hptrain_resumed_from_step",
                               "The global step this worker resumed training from (--resume, "
                               "HPTRAIN_RESUME); -1 when it started fresh.")->Get();
  resumed_from_step_->Set(-1);
  membership_epoch_ = r.Gauge("hptrain_membership_epoch",
                              "Membership epoch this worker trains in (spec.elastic; 0 until the "
                              "job's members first change).")->Get();
  membership_change_seconds_ =
      r.Histogram("hptrain_membership_change_duration_seconds",
                  "Time from the start of a membership change to training again (drain, "
                  "regroup, state broadcast).",
                  {}, metrics::ExponentialBuckets(0.05, 2, 14))
          ->Get();
  membership_dropped_state_ =
      r.Counter("hptrain_membership_dropped_state_total",
                "Values of per-worker strategy state (error-feedback residuals, ...) dropped at "
                "membership changes.")->Get();
  torch_threads_ = r.Gauge("hptrain_torch_threads",
                           "libtorch threads of this worker (spec.threads, or its share of the "
                           "host's CPU quota or cores).")->Get();
  ps_staleness_ = r.Gauge("hptrain_ps_staleness",
                          "Parameter-server strategies: model versions this worker's copy lagged "
                          "behind the step it computed.")->Get();
  compression_ratio_->Set(1.0);
  quant_bits_->Set(32);
  sync_interval_->Set(1);
  overlap_ratio_->Set(1);
}

void WorkerMetrics::OnStep(const train::StepStats& stats, int64_t bytes_sent,
                           int64_t bytes_received) {
  step_seconds_->Observe(stats.step_seconds);
  compute_seconds_->Observe(stats.compute_seconds);
  comm_seconds_->Observe(stats.comm_seconds);
  if (stats.step_seconds > 0) samples_per_second_->Set(stats.batch_size / stats.step_seconds);
  batch_size_->Set(stats.batch_size);
  bytes_sent_->Inc(static_cast<double>(bytes_sent - last_sent_));
  bytes_received_->Inc(static_cast<double>(bytes_received - last_received_));
  last_sent_ = bytes_sent;
  last_received_ = bytes_received;
  compression_ratio_->Set(stats.compression_ratio);
  quant_bits_->Set(stats.bits);
  ps_staleness_->Set(static_cast<double>(stats.staleness));
  sync_interval_->Set(stats.interval);
  exchanges_->Inc(static_cast<double>(stats.exchanges - last_exchanges_));
  last_exchanges_ = stats.exchanges;
  corrupt_samples_->Inc(static_cast<double>(stats.corrupt_samples - last_corrupt_samples_));
  last_corrupt_samples_ = stats.corrupt_samples;
  exposed_comm_seconds_->Inc(stats.exposed_comm_seconds);
  comm_total_ += stats.comm_seconds;
  exposed_total_ += stats.exposed_comm_seconds;
  if (comm_total_ > 0) {
    overlap_ratio_->Set(std::clamp(1.0 - exposed_total_ / comm_total_, 0.0, 1.0));
  }
  train_loss_->Set(stats.train_loss);
  if (stats.loss_scale > 0) {
    if (amp_loss_scale_ == nullptr) {
      amp_skipped_steps_ =
          registry_.Counter("hptrain_amp_skipped_steps_total",
                            "Loss scaling (spec.precision fp16): steps skipped by every worker "
                            "because a gradient had an inf or nan.")
              ->Get();
      amp_loss_scale_ = registry_.Gauge("hptrain_amp_loss_scale",
                                        "Loss scaling (spec.precision fp16): the current loss "
                                        "scale.")
                            ->Get();
    }
    amp_skipped_steps_->Inc(static_cast<double>(stats.amp_skipped_steps - last_amp_skipped_));
    last_amp_skipped_ = stats.amp_skipped_steps;
    amp_loss_scale_->Set(stats.loss_scale);
  }
  step_->Set(static_cast<double>(stats.step));
  epoch_->Set(stats.epoch);
  if (gpu_ != nullptr) {
    absl::Status read = gpu_->RefreshIfDue(std::chrono::steady_clock::now());
    if (!read.ok() && !gpu_reported_) {
      gpu_reported_ = true;
      std::fprintf(stderr, "hptrain worker: GPU metrics keep their last values: %s\n",
                   std::string(read.message()).c_str());
    }
  }
}

void WorkerMetrics::OnNodeBytes(int64_t intra_sent, int64_t intra_received, int64_t inter_sent,
                                int64_t inter_received) {
  const int64_t totals[4] = {intra_sent, intra_received, inter_sent, inter_received};
  for (int i = 0; i < 4; ++i) {
    node_bytes_[i]->Inc(static_cast<double>(totals[i] - last_node_bytes_[i]));
    last_node_bytes_[i] = totals[i];
  }
}

void WorkerMetrics::OnEpoch(const train::EpochStats& stats) {
  eval_accuracy_->Set(stats.test_accuracy);
  for (const auto& [name, value] : stats.metrics) {
    metrics::Gauge*& gauge = eval_metrics_[name];
    if (gauge == nullptr) gauge = eval_metric_->WithLabels({name});
    gauge->Set(value);
  }
  const size_t rank = static_cast<size_t>(stats.rank);
  if (rank < stats.worker_test_accuracy.size()) {
    if (worker_accuracy_ == nullptr) {
      worker_accuracy_ =
          registry_.Gauge("hptrain_eval_worker_accuracy",
                          "Test accuracy (the task's primary metric) of this worker's own model "
                          "at the last evaluation, before the models were averaged (gossip).")
              ->Get();
    }
    worker_accuracy_->Set(stats.worker_test_accuracy[rank]);
  }
}

void WorkerMetrics::SetTorchThreads(int threads) { torch_threads_->Set(threads); }

void WorkerMetrics::SetResumedFromStep(int64_t step) {
  resumed_from_step_->Set(static_cast<double>(step));
}

void WorkerMetrics::OnMembershipChange(int64_t epoch, double seconds, int64_t dropped_values) {
  membership_epoch_->Set(static_cast<double>(epoch));
  membership_change_seconds_->Observe(seconds);
  if (dropped_values > 0) membership_dropped_state_->Inc(static_cast<double>(dropped_values));
}

bool WorkerMetrics::EnableGpu(int device_index) {
  return EnableGpu(device_index, metrics::LoadNvml());
}

bool WorkerMetrics::EnableGpu(int device_index, const absl::StatusOr<metrics::NvmlApi>& nvml) {
  if (gpu_ != nullptr) return true;
  absl::StatusOr<std::unique_ptr<metrics::GpuMetrics>> gpu =
      nvml.ok() ? metrics::GpuMetrics::Create(registry_, device_index, *nvml)
                : absl::StatusOr<std::unique_ptr<metrics::GpuMetrics>>(nvml.status());
  if (!gpu.ok()) {
    if (!gpu_reported_) {
      gpu_reported_ = true;
      std::fprintf(stderr, "hptrain worker: GPU metrics not exported: %s\n",
                   std::string(gpu.status().message()).c_str());
    }
    return false;
  }
  gpu_ = *std::move(gpu);
  return true;
}

}  // namespace hptrain::cli
