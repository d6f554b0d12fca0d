// status.trainLoss, status.evaluation, status.step and status.samplesPerSecond end to end: the
// controller reads its workers (a scripted source standing in for Prometheus), and the reconciler
// writes the mean training loss, rank 0's value of the task's primary metric and the job's
// progress into the TrainingJob's status on the API server double, for jobs that do not
// rebalance too. And when the readings fail (an unreachable Prometheus), the job says so with a
// Warning event.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/promql/prometheus_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/manager/controller_fixture.h"
#include "tests/controller/promql/test_server.h"

namespace hptrain::manager::testing {
namespace {

constexpr int kWorkers = 2;

// Every rank did 50 steps; rank r's last loss is 0.5 + r / 4 and its metrics 0.8 + r / 10
// (accuracy, and hptrain_eval_metric's rmse and mae for the regression job).
class TrainingReadings : public WorkerReadingsSource {
 public:
  absl::StatusOr<WorkerReadings> Read(const std::vector<kube::ObjectPtr>& jobs) override {
    WorkerReadings out;
    for (const kube::ObjectPtr& job : jobs) {
      std::map<int, WorkerReading>& ranks = out[kube::KeyOf(*job)];
      for (int r = 0; r < kWorkers; ++r) {
        WorkerReading& reading = ranks[r];
        reading.step = 50;
        reading.epoch = 1;
        reading.samples_per_second = 100;
        reading.train_loss = 0.5 + r / 4.0;
        reading.eval_accuracy = 0.8 + r / 10.0;
        if (kube::NameOf(*job) == "reg") {
          reading.eval_metrics = {{"rmse", 0.3 + r / 10.0}, {"mae", 0.2}};
        }
      }
    }
    return out;
  }
  std::string Describe() const override { return "scripted"; }
};

TEST_F(ControllerTest, StatusShowsTheTrainingLossAndTheTasksLatestMetric) {
  ControllerOptions options = FastOptions();
  options.worker_readings = [](const JobCaches*) { return std::make_unique<TrainingReadings>(); };
  options.rebalance.period = absl::Milliseconds(50);
  options.rebalance.status_period = absl::Milliseconds(100);
  StartController(std::move(options), controller_client_.get());

  CreateJob(MlpJob("mlp", kWorkers));  // classification, no rebalancing
  Json regression = MlpJob("reg", kWorkers);
  regression["spec"]["task"] = "regression";
  CreateJob(regression);
  for (const char* name : {"mlp", "reg"}) {
    ASSERT_TRUE(WaitFor([&] { return PodNames(name).size() == kWorkers + 1; })) << name;
    SetPods(name, "Running");
  }

  EXPECT_TRUE(WaitFor([&] {
    const Json status = Status("mlp");
    return status.value("trainLoss", 0.0) == 0.625 &&
           status.value("evaluation", Json()) == Json{{"metric", "accuracy"}, {"value", 0.8}};
  })) << Status("mlp").dump();
  EXPECT_TRUE(WaitFor([&] {
    const Json status = Status("reg");
    return status.value("trainLoss", 0.0) == 0.625 &&
           status.value("evaluation", Json()) == Json{{"metric", "rmse"}, {"value", 0.3}};
  })) << Status("reg").dump();
  EXPECT_EQ(Status("mlp").value("step", 0), 50);
}

// `kubectl get tj` shows STEP and SAMPLES/S for every running job, not only for those that
// rebalance.
TEST_F(ControllerTest, AJobWithoutRebalancingShowsItsStepAndSamplesPerSecond) {
  ControllerOptions options = FastOptions();
  options.worker_readings = [](const JobCaches*) { return std::make_unique<TrainingReadings>(); };
  options.rebalance.period = absl::Milliseconds(50);
  options.rebalance.status_period = absl::Milliseconds(100);
  StartController(std::move(options), controller_client_.get());

  const Json job = MlpJob("mlp", kWorkers);
  ASSERT_FALSE(job["spec"].contains("rebalance"));
  CreateJob(job);
  ASSERT_TRUE(WaitFor([&] { return PodNames("mlp").size() == kWorkers + 1; }));
  SetPods("mlp", "Running");

  EXPECT_TRUE(WaitFor([&] {
    const Json status = Status("mlp");
    return status.value("step", 0) == 50 && status.value("samplesPerSecond", 0.0) == 200.0;
  })) << Status("mlp").dump();
  const Json workers = Status("mlp").value("workers", Json::array());
  ASSERT_EQ(workers.size(), static_cast<size_t>(kWorkers));
  for (const Json& worker : workers) EXPECT_EQ(worker.value("samplesPerSecond", 0.0), 100.0);
  EXPECT_EQ(Status("mlp").value("allocationGeneration", 0), 0);  // nothing rebalanced
}

// The readings come from a Prometheus nobody runs: the job gets a Warning event naming the
// source and the error (metrics_warnings.after 0 here: at the first failed reading), and runs on.
TEST_F(ControllerTest, AnUnreachablePrometheusGivesAWarningEventOnTheJob) {
  const std::string url = absl::StrCat("http://127.0.0.1:", promql::testing::UnusedPort());
  promql::PrometheusOptions prometheus;
  prometheus.url = url;
  prometheus.timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<promql::PrometheusClient>> client =
      promql::PrometheusClient::Create(prometheus);
  ASSERT_TRUE(client.ok()) << client.status();
  std::shared_ptr<promql::PrometheusClient> shared = *std::move(client);
  ControllerOptions options = FastOptions();
  options.worker_readings = [shared](const JobCaches*) { return NewPrometheusReadings(shared); };
  options.rebalance.period = absl::Milliseconds(50);
  options.rebalance.status_period = absl::Milliseconds(100);
  options.rebalance.metrics_warnings.after = absl::ZeroDuration();
  StartController(std::move(options), controller_client_.get());

  CreateJob(MlpJob("mlp", kWorkers));  // no rebalancing: read for its status alone
  ASSERT_TRUE(WaitFor([&] { return PodNames("mlp").size() == kWorkers + 1; }));
  SetPods("mlp", "Running");

  ASSERT_TRUE(WaitFor([&] { return !Events("mlp", "MetricsUnavailable").empty(); }));
  const Json event = Events("mlp", "MetricsUnavailable")[0];
  EXPECT_EQ(event["type"], "Warning");
  EXPECT_THAT(event.value("message", ""),
              ::testing::StartsWith(
                  absl::StrCat("worker metrics unavailable from prometheus ", url, ": ")));
  EXPECT_EQ(Phase("mlp"), "Running");
}

}  // namespace
}  // namespace hptrain::manager::testing
