// The controller's rebalance loop end to end: the API server double, a real Prometheus scraping
// four real `hptrain worker` processes (slowed down (1, 1, 2, 4) x 4) and their `hptrain ps`,
// started as the controller's pods would be (the job file and the token from the Secret it
// created). The controller reads the workers' compute times through Prometheus, calls SetAllocation
// on the coordinator, and records the allocation in status with a Rebalanced event.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "runtime/ps/coordinator_client.h"
#include "tests/controller/manager/pod_processes.h"
#include "tests/controller/promql/test_server.h"

namespace hptrain::manager::testing {
namespace {

constexpr int kWorkers = 4;
constexpr int kGlobalBatch = 256;

Json RebalancedJob(const std::string& name) {
  Json job = MlpJob(name, kWorkers);
  Json& spec = job["spec"];
  spec["model"] = {{"name", "lenet5"}};
  spec["dataset"] = {{"name", "fashion-mnist"}};
  spec["strategy"] = {{"type", "ssgd"}};
  spec["optimizer"] = {{"type", "sgd"}, {"lr", 0.05}};
  spec["globalBatchSize"] = kGlobalBatch;
  spec["epochs"] = 20;  // far more than the test lets it run
  spec["threads"] = 1;
  spec["rebalance"] = {{"enabled", true}, {"intervalSeconds", 2}, {"hysteresis", 0.05}};
  // Relative speeds (1, 1, 0.5, 0.25), each factor x 4: the emulation stretches compute to f x
  // its CPU time, which holds only while the workers' CPU demand (Σ 1/f cores) fits the machine.
  // (1, 1, 2, 4) asks 2.75 cores, and on 2 busy cores the workers' wall times then evened out.
  spec["testing"] = {{"slowdown", {4, 4, 8, 16}}};
  return job;
}

class ControllerRebalanceTest : public PodProcessTest {
 protected:
  void SetUp() override {
    if (!OnPath("prometheus")) GTEST_SKIP() << "prometheus is not installed";
    if (access("/usr/share/datasets/fashion-mnist", R_OK) != 0) {
      GTEST_SKIP() << "Fashion-MNIST is not installed (Debian dataset-fashion-mnist)";
    }
    PodProcessTest::SetUp();
  }
};

TEST_F(ControllerRebalanceTest, ReadsWorkersThroughPrometheusAndSetsTheAllocation) {
  // Ports first: Prometheus' targets are the workers' /metrics.
  std::vector<int> metrics_ports;
  for (int r = 0; r < kWorkers; ++r) metrics_ports.push_back(promql::testing::UnusedPort());
  int prometheus_port = promql::testing::UnusedPort();
  std::vector<std::string> targets;
  for (int port : metrics_ports) targets.push_back(absl::StrCat("\"127.0.0.1:", port, "\""));
  // A plain scrape, as the PodMonitor in deploy/ does: the runtime's trainingjob/role/rank labels
  // need no honor_labels (`job` stays the scrape job's); the namespace label is the one a
  // PodMonitor adds.
  std::string config = Write(
      "prometheus.yml",
      absl::StrCat("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                   "scrape_configs:\n"
                   "  - job_name: hptrain-workers\n"
                   "    static_configs:\n"
                   "      - targets: [", absl::StrJoin(targets, ", "), "]\n"
                   "        labels: {namespace: ", kNs, "}\n"));
  const std::string prometheus_url = absl::StrCat("http://127.0.0.1:", prometheus_port);
  Spawn({"/usr/bin/env", "prometheus", absl::StrCat("--config.file=", config),
         absl::StrCat("--storage.tsdb.path=", dir_, "/tsdb"),
         absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port),
         "--log.level=warn"});
  httplib::Client prometheus_http("127.0.0.1", prometheus_port);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto ready = prometheus_http.Get("/-/ready");
        return ready && ready->status == 200;
      },
      absl::Seconds(30)))
      << "Prometheus did not become ready";

  int coordinator_port = 0;
  ControllerOptions options = FastOptions();
  options.worker_readings = [prometheus_url](const JobCaches*) {
    promql::PrometheusOptions prometheus;
    prometheus.url = prometheus_url;
    return NewPrometheusReadings(*promql::PrometheusClient::Create(prometheus));
  };
  options.rebalance.period = absl::Milliseconds(500);
  // The ps pod's in-cluster name stands for the local ps process.
  options.rebalance.coordinator_address = [&coordinator_port](const Json&) {
    return absl::StrCat("127.0.0.1:", coordinator_port);
  };
  Controller* controller = StartController(std::move(options), controller_client_.get());

  CreateJob(RebalancedJob("lenet"));
  ASSERT_TRUE(WaitFor([&] { return PodNames("lenet").size() == kWorkers + 1; }));
  const std::string token = SecretValue("lenet", "token");
  const std::string manifest = SecretValue("lenet", "job.yaml");
  ASSERT_FALSE(token.empty());
  ASSERT_FALSE(manifest.empty());

  // The pods' processes, started from what the pods mount.
  std::string job_file = Write("job.yaml", manifest);
  std::string token_file = Write("token", token);
  std::string port_file = absl::StrCat(dir_, "/ps.port");
  Spawn({Binary("hptrain"), "ps", "--job", job_file, "--token-file", token_file, "--host",
         "127.0.0.1", "--port", "0", "--port-file", port_file, "--metrics-host", "127.0.0.1",
         "--metrics-port", "0", "--linger", "1"});
  ASSERT_TRUE(WaitFor(
      [&] {
        std::ifstream in(port_file);
        return static_cast<bool>(in >> coordinator_port) && coordinator_port > 0;
      },
      absl::Seconds(30)));
  for (int r = 0; r < kWorkers; ++r) {
    Spawn({Binary("hptrain"), "worker", "--job", job_file, "--token-file", token_file,
           "--coordinator", absl::StrCat("127.0.0.1:", coordinator_port), "--rank",
           std::to_string(r), "--bind", "127.0.0.1", "--metrics-host", "127.0.0.1",
           "--metrics-port", std::to_string(metrics_ports[r])});
  }
  SetPods("lenet", "Running");  // the kubelet's part
  ASSERT_TRUE(WaitFor([&] { return Phase("lenet") == "Running"; }));

  // The loop reads compute times at batch 64 everywhere, finds ranks 2 and 3 two and four
  // times slower, and moves work to ranks 0 and 1. On a loaded machine its first move can come
  // from noisy early measurements; it goes on measuring, so wait for an allocation that has
  // moved work to the fast ranks, then check it whole.
  Json status;
  std::vector<int> sizes;
  auto read_sizes = [&] {
    status = Status("lenet");
    sizes.clear();
    for (const Json& worker : status.value("workers", Json::array())) {
      sizes.push_back(worker.value("batchSize", 0));
    }
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        read_sizes();
        return status.value("allocationGeneration", 0) >= 1 && sizes.size() == kWorkers &&
               sizes[0] > kGlobalBatch / kWorkers;
      },
      absl::Seconds(90)))
      << "no allocation moving work to rank 0 recorded; status: " << status.dump();
  ASSERT_EQ(sizes.size(), static_cast<size_t>(kWorkers)) << status.dump();
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), 0), kGlobalBatch);
  EXPECT_GT(sizes[0], sizes[3]) << status.dump();
  EXPECT_GT(sizes[1], sizes[3]) << status.dump();
  EXPECT_GT(sizes[0], kGlobalBatch / kWorkers) << status.dump();
  EXPECT_FALSE(status.value("lastRebalanceTime", "").empty());
  EXPECT_NE(Condition("lenet", "Rebalanced"), nullptr);
  ASSERT_TRUE(WaitFor([&] { return !Events("lenet", "Rebalanced").empty(); }));
  EXPECT_GE(controller->rebalance_loop()->allocations_set(), 1);
  // Counted once the status write returns, which may be after the test has seen it.
  EXPECT_TRUE(WaitFor([&] { return controller->metrics().rebalances->Value() >= 1; }));

  // The coordinator holds what status says. The loop goes on measuring and may move the
  // allocation again meanwhile: compare when status read before and after the coordinator agree.
  ps::CoordinatorClient coordinator(absl::StrCat("127.0.0.1:", coordinator_port), token);
  auto recorded = [&] {
    std::vector<int> out;
    const Json status = Status("lenet");
    for (const Json& worker : status.value("workers", Json::array())) {
      out.push_back(worker.value("batchSize", 0));
    }
    return out;
  };
  std::vector<int> in_force;
  int64_t generation = 0;
  absl::Status last_error;
  std::vector<int> before;
  EXPECT_TRUE(WaitFor([&] {
    before = recorded();
    absl::StatusOr<v1::Allocation> allocation = coordinator.GetAllocation();
    last_error = allocation.status();
    if (!allocation.ok()) return false;
    generation = allocation->generation();
    in_force.assign(allocation->batch_sizes().begin(), allocation->batch_sizes().end());
    return before == in_force && recorded() == in_force;
  })) << last_error << " coordinator " << absl::StrJoin(in_force, ",") << ", status before "
       << absl::StrJoin(before, ",") << ", status now " << absl::StrJoin(recorded(), ",");
  EXPECT_GE(generation, 2);  // 1 is the initial allocation
  // The readings reach status through the reconciler too.
  EXPECT_TRUE(WaitFor([&] { return Status("lenet").value("samplesPerSecond", 0.0) > 0; }))
      << Status("lenet").dump();
}

}  // namespace
}  // namespace hptrain::manager::testing
