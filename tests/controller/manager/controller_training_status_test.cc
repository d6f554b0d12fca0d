// status.trainLoss and status.evaluation end to end: the controller reads its workers (a scripted
// source standing in for Prometheus), and the reconciler writes the mean training loss and rank
// 0's value of the task's primary metric into the TrainingJob's status on the API server double,
// for jobs that do not rebalance too.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/controller/manager/controller_fixture.h"

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

}  // namespace
}  // namespace hptrain::manager::testing
