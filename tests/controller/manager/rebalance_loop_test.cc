// The rebalance loop pass by pass: readings from a scripted source (compute time per step
// proportional to the batch, ranks 2 and 3 two and four times slower), the job's coordinator
// in process (the runtime's own CoordinatorService over gRPC), the job in the API server double
// and reconciled by a real Controller.
#include "controller/manager/rebalance_loop.h"

#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "runtime/ps/coordinator_client.h"
#include "runtime/ps/coordinator_server.h"
#include "runtime/ps/coordinator_service.h"
#include "tests/controller/manager/controller_fixture.h"
#include "tests/controller/promql/test_server.h"

namespace hptrain::manager::testing {
namespace {

constexpr int kWorkers = 4;
constexpr int kGlobalBatch = 64;  // MlpJob's
const double kSlowdown[kWorkers] = {1, 1, 2, 4};

// Readings as the workers would produce them: every pass each rank did 10 more steps at the
// batch the coordinator gives it, each taking slowdown x batch milliseconds of compute.
class ScriptedReadings : public WorkerReadingsSource {
 public:
  absl::StatusOr<WorkerReadings> Read(const std::vector<kube::ObjectPtr>& jobs) override {
    ++reads;
    if (fail) return absl::UnavailableError("scripted outage");
    WorkerReadings out;
    for (const kube::ObjectPtr& job : jobs) {
      ++reads_by_job[kube::KeyOf(*job)];
      std::map<int, WorkerReading>& ranks = out[kube::KeyOf(*job)];
      for (int r = 0; r < kWorkers; ++r) {
        Progress& p = progress[r];
        p.steps += 10;
        p.compute += 10 * kSlowdown[r] * batch[r] * 1e-3;
        WorkerReading& reading = ranks[r];
        reading.compute_steps = p.steps;
        reading.compute_seconds = p.compute;
        reading.batch_size = batch[r];
        reading.samples_per_second = batch[r] / (kSlowdown[r] * batch[r] * 1e-3);
        reading.step = p.steps;
        reading.epoch = 0;
      }
    }
    return out;
  }
  std::string Describe() const override { return "scripted"; }

  struct Progress {
    int64_t steps = 0;
    double compute = 0;
  };
  std::vector<int> batch = std::vector<int>(kWorkers, kGlobalBatch / kWorkers);
  Progress progress[kWorkers];
  bool fail = false;
  int reads = 0;
  std::map<std::string, int> reads_by_job;
};

class RebalanceLoopTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    controller_ = StartController();
    Json job = MlpJob("mlp", kWorkers);
    job["spec"]["rebalance"] = {{"enabled", true}, {"intervalSeconds", 2}};
    CreateJob(job);
    ASSERT_TRUE(WaitFor([&] { return PodNames("mlp").size() == kWorkers + 1; }));
    SetPods("mlp", "Running");
    ASSERT_TRUE(WaitFor([&] { return Phase("mlp") == "Running"; }));
    token_ = SecretToken();
    ASSERT_FALSE(token_.empty());
    // The loop reads the job and its Secret from the controller's caches, which can trail the
    // API server on a loaded machine; the pass-by-pass tests start once the caches hold both.
    ASSERT_TRUE(WaitFor([&] {
      kube::ObjectPtr job = controller_->caches().Job(absl::StrCat(kNs, "/mlp"));
      if (job == nullptr || job->value("status", Json::object()).value("phase", "") != "Running") {
        return false;
      }
      return !controller_->caches().Observe(*job).secrets.empty();
    }));
    StartCoordinator();

    auto source = std::make_unique<ScriptedReadings>();
    readings_ = source.get();
    RebalanceLoopOptions options;
    options.coordinator_address = [this](const Json&) {
      return absl::StrCat("127.0.0.1:", coordinator_->port());
    };
    options.lead_steps = 1;
    options.metrics_warnings.after = absl::Seconds(3);
    recorder_ = std::make_unique<kube::EventRecorder>(controller_client_.get());
    executor_ = std::make_unique<PlanExecutor>(controller_client_.get(), recorder_.get());
    loop_ = std::make_unique<RebalanceLoop>(&controller_->caches(), std::move(source),
                                            executor_.get(), nullptr, options);
  }

  void TearDown() override {
    loop_.reset();
    if (coordinator_ != nullptr) coordinator_->Stop();
    if (recorder_ != nullptr) recorder_->Flush(absl::Seconds(1));
    ControllerTest::TearDown();
  }

  std::string SecretToken() const {
    for (const Json& secret : Owned("secrets", "mlp")) {
      std::string token;
      if (absl::Base64Unescape(secret["data"].value("token", ""), &token)) return token;
    }
    return "";
  }

  // A fresh coordinator with the job's initial allocation (generation 1), as after a restart.
  void StartCoordinator() {
    if (coordinator_ != nullptr) coordinator_->Stop();
    ps::CoordinatorConfig config;
    config.job = "mlp";
    config.strategy = "ssgd";
    config.token = token_;
    config.groups = std::vector<std::string>(kWorkers, "workers");
    config.allocation = std::vector<int>(kWorkers, kGlobalBatch / kWorkers);
    config.global_batch = kGlobalBatch;
    absl::StatusOr<std::unique_ptr<ps::CoordinatorServer>> server = ps::CoordinatorServer::Start(
        "127.0.0.1", 0, std::make_unique<ps::CoordinatorService>(config));
    ASSERT_TRUE(server.ok()) << server.status();
    coordinator_ = *std::move(server);
  }

  // One pass `seconds` after the previous one; the workers then compute what the coordinator
  // hands out (as they would from the next step on).
  void Pass(double seconds = 1) {
    now_ += absl::Seconds(seconds);
    loop_->Tick(now_);
    v1::Allocation allocation = Current();
    readings_->batch.assign(allocation.batch_sizes().begin(), allocation.batch_sizes().end());
  }

  // The coordinator's allocation in force.
  v1::Allocation Current() const {
    ps::CoordinatorClient client(absl::StrCat("127.0.0.1:", coordinator_->port()), token_);
    absl::StatusOr<v1::Allocation> allocation = client.GetAllocation();
    EXPECT_TRUE(allocation.ok()) << allocation.status();
    return allocation.ok() ? *allocation : v1::Allocation();
  }

  std::vector<int> StatusSizes() const {
    std::vector<int> sizes;
    for (const Json& worker : Status("mlp").value("workers", Json::array())) {
      sizes.push_back(worker.value("batchSize", 0));
    }
    return sizes;
  }

  Controller* controller_ = nullptr;
  std::string token_;
  std::unique_ptr<ps::CoordinatorServer> coordinator_;
  ScriptedReadings* readings_ = nullptr;
  std::unique_ptr<kube::EventRecorder> recorder_;
  std::unique_ptr<PlanExecutor> executor_;
  std::unique_ptr<RebalanceLoop> loop_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
};

TEST_F(RebalanceLoopTest, MovesWorkToTheFastRanksAndRecordsIt) {
  for (int i = 0; i < 4; ++i) Pass();
  v1::Allocation allocation = Current();
  ASSERT_EQ(allocation.generation(), 2) << allocation.DebugString();
  std::vector<int> sizes(allocation.batch_sizes().begin(), allocation.batch_sizes().end());
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), 0), kGlobalBatch);
  // Speeds 1 : 1 : 0.5 : 0.25 of 2.75 -> about 23, 23, 12, 6.
  EXPECT_GT(sizes[0], sizes[2]);
  EXPECT_GT(sizes[2], sizes[3]);
  EXPECT_NEAR(sizes[0], 23, 2);
  EXPECT_NEAR(sizes[3], 6, 2);
  EXPECT_EQ(loop_->allocations_set(), 1);
  ASSERT_TRUE(WaitFor([&] { return StatusSizes() == sizes; })) << Status("mlp").dump();
  EXPECT_EQ(Status("mlp").value("allocationGeneration", 0), 1);
  EXPECT_NE(Condition("mlp", "Rebalanced"), nullptr);

  // Converged: more passes at the new allocation change nothing.
  for (int i = 0; i < 10; ++i) Pass();
  EXPECT_EQ(Current().generation(), 2);
  EXPECT_EQ(loop_->allocations_set(), 1);

  // The readings reach the reconciler's status through MetricsFor.
  reconcile::WorkerMetricsMap metrics = loop_->MetricsFor(Job("mlp"));
  ASSERT_EQ(metrics.count("mlp-worker-3"), 1u);
  EXPECT_NEAR(metrics["mlp-worker-3"].samples_per_second, 250, 1e-6);
}

TEST_F(RebalanceLoopTest, AfterACoordinatorRestartStatusFollowsItAndTheLoopStartsOver) {
  for (int i = 0; i < 4; ++i) Pass();
  ASSERT_EQ(Current().generation(), 2);
  ASSERT_TRUE(WaitFor([&] { return StatusSizes() != std::vector<int>(kWorkers, 16); }));

  StartCoordinator();  // the gang restarted: generation 1, 16 each
  readings_->batch.assign(kWorkers, kGlobalBatch / kWorkers);
  Pass();
  EXPECT_TRUE(WaitFor([&] { return StatusSizes() == std::vector<int>(kWorkers, 16); }))
      << Status("mlp").dump();
  for (int i = 0; i < 4; ++i) Pass();
  EXPECT_EQ(Current().generation(), 2);  // rebalanced anew
  EXPECT_EQ(loop_->allocations_set(), 2);
}

TEST_F(RebalanceLoopTest, AnUnreadableSourceOrAWrongTokenChangesNothing) {
  readings_->fail = true;
  for (int i = 0; i < 4; ++i) Pass();
  EXPECT_EQ(Current().generation(), 1);
  readings_->fail = false;

  token_ = "another-jobs-token";
  StartCoordinator();  // refuses the Secret's token
  for (int i = 0; i < 4; ++i) Pass();
  EXPECT_EQ(Current().generation(), 1);
  EXPECT_EQ(loop_->allocations_set(), 0);
  EXPECT_EQ(Status("mlp").value("allocationGeneration", 0), 0);
}

// Failed readings are said on the job once they have lasted metrics_warnings.after (3 s here):
// one Warning MetricsUnavailable per failure episode (and per 10 minutes within one).
TEST_F(RebalanceLoopTest, AnOutageGivesTheJobOneWarningPerEpisode) {
  readings_->fail = true;
  for (int i = 0; i < 2; ++i) Pass();  // 1 s of failures: too early
  ASSERT_TRUE(recorder_->Flush(absl::Seconds(5)));
  EXPECT_TRUE(Events("mlp", "MetricsUnavailable").empty());
  for (int i = 0; i < 10; ++i) Pass();  // the episode reaches 3 s, then 11 s
  ASSERT_TRUE(recorder_->Flush(absl::Seconds(5)));
  std::vector<Json> events = Events("mlp", "MetricsUnavailable");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0].value("count", 0), 1);
  EXPECT_EQ(events[0]["message"],
            "worker metrics unavailable from scripted: scripted outage; status.step, "
            "status.samplesPerSecond and rebalancing wait for them");

  readings_->fail = false;
  Pass();  // a reading: the episode ends
  readings_->fail = true;
  for (int i = 0; i < 2; ++i) Pass();
  ASSERT_TRUE(recorder_->Flush(absl::Seconds(5)));
  EXPECT_EQ(Events("mlp", "MetricsUnavailable")[0].value("count", 0), 1);
  for (int i = 0; i < 2; ++i) Pass();  // the second episode reaches 3 s
  ASSERT_TRUE(recorder_->Flush(absl::Seconds(5)));
  events = Events("mlp", "MetricsUnavailable");
  ASSERT_EQ(events.size(), 1u);  // the recorder folds the same message into one Event
  EXPECT_EQ(events[0].value("count", 0), 2);
}

// Jobs without rebalancing are read only for their status: once every status period (15 s by
// default; the passes here are 1 s apart), and never rebalanced.
TEST_F(RebalanceLoopTest, JobsWithoutRebalancingAreReadOnlyForStatus) {
  const std::string plain = absl::StrCat(kNs, "/plain");
  CreateJob(MlpJob("plain", kWorkers));
  ASSERT_TRUE(WaitFor([&] { return PodNames("plain").size() == kWorkers + 1; }));
  SetPods("plain", "Running");
  ASSERT_TRUE(WaitFor([&] {
    kube::ObjectPtr job = controller_->caches().Job(plain);
    return job != nullptr &&
           job->value("status", Json::object()).value("phase", "") == "Running";
  }));
  for (int i = 0; i < 4; ++i) Pass();
  EXPECT_EQ(readings_->reads_by_job[plain], 1);
  EXPECT_EQ(readings_->reads_by_job[absl::StrCat(kNs, "/mlp")], 4);  // rebalanced: every pass
  for (int i = 0; i < 15; ++i) Pass();
  EXPECT_EQ(readings_->reads_by_job[plain], 2);
  EXPECT_EQ(Status("plain").value("allocationGeneration", 0), 0);
  EXPECT_EQ(loop_->MetricsFor(Job("plain")).size(), static_cast<size_t>(kWorkers));
}

TEST_F(RebalanceLoopTest, ScrapedReadingsReadEachWorkerPodsPage) {
  promql::testing::TestServer worker;
  worker.server().Get("/metrics", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(
        "# TYPE hptrain_compute_seconds histogram\n"
        "hptrain_compute_seconds_bucket{job=\"mlp\",role=\"worker\",rank=\"1\",le=\"+Inf\"} 40\n"
        "hptrain_compute_seconds_sum{job=\"mlp\",role=\"worker\",rank=\"1\"} 2.5\n"
        "hptrain_compute_seconds_count{job=\"mlp\",role=\"worker\",rank=\"1\"} 40\n"
        "# TYPE hptrain_batch_size gauge\n"
        "hptrain_batch_size{job=\"mlp\",role=\"worker\",rank=\"1\"} 16\n",
        "text/plain; version=0.0.4");
  });
  worker.Start();
  absl::StatusOr<Json> mutated =
      server_->Mutate("pods", kNs, "mlp-worker-1", [&](Json* pod) {
        (*pod)["status"]["podIP"] = "127.0.0.1";
        for (Json& container : (*pod)["spec"]["containers"]) {
          for (Json& port : container["ports"]) {
            if (port["name"] == "metrics") port["containerPort"] = worker.port();
          }
        }
      });
  ASSERT_TRUE(mutated.ok()) << mutated.status();
  // Worker 2's page cannot be read (nothing listens on its port).
  const int closed = promql::testing::UnusedPort();
  mutated = server_->Mutate("pods", kNs, "mlp-worker-2", [&](Json* pod) {
    (*pod)["status"]["podIP"] = "127.0.0.1";
    for (Json& container : (*pod)["spec"]["containers"]) {
      for (Json& port : container["ports"]) {
        if (port["name"] == "metrics") port["containerPort"] = closed;
      }
    }
  });
  ASSERT_TRUE(mutated.ok()) << mutated.status();
  const std::string key = absl::StrCat(kNs, "/mlp");
  ASSERT_TRUE(WaitFor([&] {
    int with_ip = 0;
    for (const Json& pod : controller_->caches().Observe(*controller_->caches().Job(key)).pods) {
      if (pod["status"].value("podIP", "") == "127.0.0.1") ++with_ip;
    }
    return with_ip == 2;
  }));
  std::unique_ptr<WorkerReadingsSource> scraped =
      NewScrapedReadings(&controller_->caches(), absl::Seconds(5));
  absl::StatusOr<WorkerReadings> readings = scraped->Read({controller_->caches().Job(key)});
  ASSERT_TRUE(readings.ok()) << readings.status();
  ASSERT_EQ(readings->count(key), 1u);
  const std::map<int, WorkerReading>& ranks = readings->at(key);
  ASSERT_EQ(ranks.size(), 1u);
  const WorkerReading& reading = ranks.at(1);
  EXPECT_EQ(reading.pod, "mlp-worker-1");
  EXPECT_DOUBLE_EQ(reading.compute_seconds, 2.5);
  EXPECT_EQ(reading.compute_steps, 40);
  EXPECT_EQ(reading.batch_size, 16);
  // The unreadable page is the job's error (what its MetricsUnavailable event says), beside the
  // readings of the others.
  const std::map<std::string, std::string> errors = scraped->JobErrors();
  ASSERT_EQ(errors.count(key), 1u);
  EXPECT_EQ(errors.at(key).rfind(absl::StrCat("pod mlp-worker-2: GET http://127.0.0.1:", closed,
                                              "/metrics: "),
                                 0),
            0u)
      << errors.at(key);
}

}  // namespace
}  // namespace hptrain::manager::testing
