// The worker's metric families (runtime/cli/worker_metrics.h): the per-worker accuracy of gossip's
// own models is exported only once an evaluation measured it, the loss-scaling metrics only under
// loss scaling.
#include "runtime/cli/worker_metrics.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/metrics/exposition.h"
#include "runtime/metrics/registry.h"

namespace hptrain::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(WorkerMetrics, OwnModelAccuracyOnlyWhenTheEvaluationMeasuredIt) {
  metrics::Registry registry;
  WorkerMetrics worker_metrics(registry);
  train::EpochStats stats;
  stats.test_accuracy = 0.875;
  stats.rank = 1;
  worker_metrics.OnEpoch(stats);  // every other strategy: no per-worker accuracies
  std::string text = metrics::TextExposition(registry);
  EXPECT_THAT(text, HasSubstr("\nhptrain_eval_accuracy 0.875\n"));
  EXPECT_THAT(text, Not(HasSubstr("\nhptrain_eval_worker_accuracy ")));

  stats.worker_test_accuracy = {0.5, 0.625, 0.75};  // gossip: this worker's is rank 1's
  worker_metrics.OnEpoch(stats);
  text = metrics::TextExposition(registry);
  EXPECT_THAT(text, HasSubstr("\nhptrain_eval_worker_accuracy 0.625\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE hptrain_eval_worker_accuracy gauge\n"));
}

// Every metric of the task is a series of hptrain_eval_metric, labelled by its name.
TEST(WorkerMetrics, EveryTaskMetricByName) {
  metrics::Registry registry;
  WorkerMetrics worker_metrics(registry);
  train::EpochStats stats;
  stats.metric = "rmse";
  stats.metrics = {{"rmse", 0.25}, {"mae", 0.125}};
  worker_metrics.OnEpoch(stats);
  stats.metrics = {{"rmse", 0.5}, {"mae", 0.375}};
  worker_metrics.OnEpoch(stats);
  const std::string text = metrics::TextExposition(registry);
  EXPECT_THAT(text, HasSubstr("# TYPE hptrain_eval_metric gauge\n"));
  EXPECT_THAT(text, HasSubstr("\nhptrain_eval_metric{metric=\"rmse\"} 0.5\n"));
  EXPECT_THAT(text, HasSubstr("\nhptrain_eval_metric{metric=\"mae\"} 0.375\n"));
  EXPECT_THAT(text, HasSubstr("\nhptrain_eval_accuracy 0\n"));  // not classification
}

// Membership changes (spec.elastic): the epoch gauge follows the newest change, each change's
// duration is observed once, and dropped state values add up (a change that dropped none adds 0).
TEST(WorkerMetrics, MembershipChanges) {
  metrics::Registry registry;
  WorkerMetrics worker_metrics(registry);
  std::string text = metrics::TextExposition(registry);
  EXPECT_THAT(text, HasSubstr("\nhptrain_membership_epoch 0\n"));
  EXPECT_THAT(text, HasSubstr("\nhptrain_membership_dropped_state_total 0\n"));
  EXPECT_THAT(text, HasSubstr("\nhptrain_membership_change_duration_seconds_count 0\n"));

  worker_metrics.OnMembershipChange(1, 0.75, 1000);
  worker_metrics.OnMembershipChange(3, 2.5, 0);
  text = metrics::TextExposition(registry);
  EXPECT_THAT(text, HasSubstr("# TYPE hptrain_membership_epoch gauge\n"));
  EXPECT_THAT(text, HasSubstr("\nhptrain_membership_epoch 3\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE hptrain_membership_change_duration_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("\nhptrain_membership_change_duration_seconds_count 2\n"));
  EXPECT_THAT(text, HasSubstr("\nhptrain_membership_change_duration_seconds_sum 3.25\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE hptrain_membership_dropped_state_total counter\n"));
  EXPECT_THAT(text, HasSubstr("\nhptrain_membership_dropped_state_total 1000\n"));
}

TEST(WorkerMetrics, LossScalingMetricsOnlyUnderLossScaling) {
  metrics::Registry registry;
  WorkerMetrics worker_metrics(registry);
  train::StepStats stats;
  stats.step = 1;
  worker_metrics.OnStep(stats, 0, 0);  // fp32, bf16: no loss scaling
  std::string text = metrics::TextExposition(registry);
  EXPECT_THAT(text, Not(HasSubstr("hptrain_amp_")));

  stats.loss_scale = 65536;
  worker_metrics.OnStep(stats, 0, 0);
  stats.step = 2;
  stats.amp_skipped_steps = 1;  // running totals, as the trainer reports them
  stats.loss_scale = 32768;
  worker_metrics.OnStep(stats, 0, 0);
  stats.step = 3;
  worker_metrics.OnStep(stats, 0, 0);
  text = metrics::TextExposition(registry);
  EXPECT_THAT(text, HasSubstr("\nhptrain_amp_skipped_steps_total 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE hptrain_amp_skipped_steps_total counter\n"));
  EXPECT_THAT(text, HasSubstr("\nhptrain_amp_loss_scale 32768\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE hptrain_amp_loss_scale gauge\n"));
}

// A one-GPU NVML, reading 50% and 1 GiB of 16 GiB used.
metrics::NvmlApi FakeNvml() {
  metrics::NvmlApi api;
  api.init = [] { return 0; };
  api.shutdown = [] { return 0; };
  api.device_by_index = [](unsigned int index, metrics::NvmlApi::Device* d) {
    *d = reinterpret_cast<metrics::NvmlApi::Device>(0x10);
    return index == 0 ? 0 : 2;
  };
  api.device_by_uuid = [](const char*, metrics::NvmlApi::Device*) { return 6; };
  api.utilization = [](metrics::NvmlApi::Device, metrics::NvmlApi::Utilization* out) {
    out->gpu = 50;
    return 0;
  };
  api.memory = [](metrics::NvmlApi::Device, metrics::NvmlApi::Memory* out) {
    out->total = 16ull << 30;
    out->used = 1ull << 30;
    return 0;
  };
  api.error_string = [](int) { return "Invalid Argument"; };
  return api;
}

TEST(WorkerMetrics, GpuGaugesOnceEnabled) {
  metrics::Registry registry({{"trainingjob", "j"}, {"role", "worker"}, {"rank", "1"}});
  WorkerMetrics worker_metrics(registry);
  EXPECT_THAT(metrics::TextExposition(registry), Not(HasSubstr("hptrain_gpu_")));
  ::setenv("CUDA_VISIBLE_DEVICES", "0", 1);
  const bool enabled = worker_metrics.EnableGpu(0, FakeNvml());
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  ASSERT_TRUE(enabled);
  EXPECT_TRUE(worker_metrics.EnableGpu(0, FakeNvml()));  // a second call changes nothing
  worker_metrics.OnStep(train::StepStats{}, 0, 0);
  const std::string text = metrics::TextExposition(registry);
  const std::string labels = "{trainingjob=\"j\",role=\"worker\",rank=\"1\"}";
  EXPECT_THAT(text, HasSubstr("\nhptrain_gpu_utilization_ratio" + labels + " 0.5\n"));
  EXPECT_THAT(text, HasSubstr("\nhptrain_gpu_memory_used_bytes" + labels + " 1073741824\n"));
  EXPECT_THAT(text, HasSubstr("\nhptrain_gpu_memory_total_bytes" + labels + " 17179869184\n"));
}

// Without NVML the worker trains on: no GPU metrics, and one line, once, says why.
TEST(WorkerMetrics, WithoutNvmlNoGpuMetricsAndOneLine) {
  metrics::Registry registry;
  WorkerMetrics worker_metrics(registry);
  ::testing::internal::CaptureStderr();
  const absl::Status absent = absl::FailedPreconditionError(
      "cannot load libnvidia-ml.so.1 (no NVIDIA driver libraries on this host): not found");
  EXPECT_FALSE(worker_metrics.EnableGpu(0, absent));
  EXPECT_FALSE(worker_metrics.EnableGpu(0, absent));
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_FALSE(worker_metrics.EnableGpu(3, FakeNvml()));  // no such device
  worker_metrics.OnStep(train::StepStats{}, 0, 0);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err,
            "hptrain worker: GPU metrics not exported: cannot load libnvidia-ml.so.1 (no NVIDIA "
            "driver libraries on this host): not found\n");
  EXPECT_THAT(metrics::TextExposition(registry), Not(HasSubstr("hptrain_gpu_")));
}

}  // namespace
}  // namespace hptrain::cli
