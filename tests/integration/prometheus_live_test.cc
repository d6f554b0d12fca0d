// The Grafana dashboards against a live Prometheus. A real `prometheus` (Debian package) scrapes a
// running `hptrain run` job (its ps and both workers, strategy hps with rebalancing) and the
// `hptrain-controller` binary reconciling a job on the API server double; then every PromQL
// expression of every panel of dashboards/*.json, with the dashboards' template variables
// resolved through their own label_values() queries, goes to Prometheus' HTTP API and must
// return at least one series. A copy of the dashboards with one misspelt metric name must fail
// that check, naming the panel. The same Prometheus loads the chart's alert rules
// (charts/hptrain/files/alerts.yaml) and must evaluate each of them without an error.
//
// The scrape is the chart's PodMonitor's: no honor_labels (the runtime's trainingjob/role/rank
// labels collide with none of Prometheus'), namespace (and pod for the controller) added, and the
// pods' hptrain.io/job and hptrain.io/role labels as hptrain_io_job and hptrain_io_role
// (podTargetLabels). Every series of the training job then carries the scrape job's `job` and the
// runtime's `trainingjob`, and none an `exported_job`. Two clients
// misbehave on purpose, so that the "rejected" panels have series: one calls the coordinator
// with a wrong token, one pulls from the parameter server for a rank the job does not have.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/ps/coordinator_client.h"
#include "runtime/ps/ps_client.h"
#include "tests/controller/manager/controller_fixture.h"
#include "tests/controller/manager/subprocess.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::manager::testing {
namespace {

using Json = nlohmann::json;

constexpr char kJob[] = "live";
constexpr char kJobNamespace[] = "team-a";
constexpr char kControllerPod[] = "hptrain-controller-0";
// The chart's alert rules: Prometheus evaluates them on the live series too.
constexpr char kAlertRules[] = "charts/hptrain/files/alerts.yaml";

// What Grafana puts for its built-in interval variables; the scrape interval is 1 s.
const std::map<std::string, std::string>& BuiltIns() {
  static const auto* values = new std::map<std::string, std::string>{
      {"__rate_interval", "15s"}, {"__interval", "5s"}, {"__range", "1m"}};
  return *values;
}

std::string Binary(const char* name) {
  const char* dir = std::getenv("HPTRAIN_BIN");
  return dir == nullptr ? "" : absl::StrCat(dir, "/", name);
}

bool OnPath(const std::string& program) {
  return std::system(absl::StrCat("command -v ", program, " >/dev/null 2>&1").c_str()) == 0;
}

// Replaces $name, ${name} and [[name]] by their values (unknown names stay).
std::string Substitute(const std::string& expr, const std::map<std::string, std::string>& vars) {
  static const std::regex kVariable(R"(\$\{(\w+)\}|\$(\w+)|\[\[(\w+)\]\])");
  std::string out;
  auto begin = std::sregex_iterator(expr.begin(), expr.end(), kVariable);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    std::string name = m[1].matched ? m[1].str() : m[2].matched ? m[2].str() : m[3].str();
    out += expr.substr(last, m.position(0) - last);
    auto value = vars.find(name);
    out += value == vars.end() ? m.str(0) : value->second;
    last = m.position(0) + m.length(0);
  }
  return out + expr.substr(last);
}

// Checks every dashboard of `dir` against the Prometheus at `port`; returns one line per problem
// (a variable without values, a panel expression that errors or returns no series).
class DashboardCheck {
 public:
  explicit DashboardCheck(int port) : client_("127.0.0.1", port) {
    client_.set_connection_timeout(5, 0);
    client_.set_read_timeout(30, 0);
  }

  // The series of an instant query, or an error text.
  absl::StatusOr<Json> Query(const std::string& expr) {
    auto response = client_.Post("/api/v1/query", httplib::Params{{"query", expr}});
    if (!response) return absl::UnavailableError("no answer from Prometheus");
    Json body = Json::parse(response->body, nullptr, false);
    if (body.is_discarded()) return absl::InternalError("not JSON: " + response->body);
    if (body.value("status", "") != "success") {
      return absl::InvalidArgumentError(body.value("error", response->body));
    }
    return body["data"]["result"];
  }

  std::vector<std::string> Run(const std::string& dir, int* expressions) {
    std::vector<std::string> problems;
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() == ".json") files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    for (const std::string& file : files) {
      const std::string name = std::filesystem::path(file).filename().string();
      std::ifstream in(file);
      Json board = Json::parse(in, nullptr, false);
      if (board.is_discarded()) {
        problems.push_back(name + ": not JSON");
        continue;
      }
      std::map<std::string, std::string> vars = BuiltIns();
      for (const Json& var : board["templating"]["list"]) {
        if (var.value("type", "") != "query") continue;
        const Json& q = var["query"];
        const std::string query = q.is_object() ? q.value("query", "") : q.get<std::string>();
        std::smatch m;
        static const std::regex kLabelValues(R"(^\s*label_values\((.*),\s*(\w+)\s*\)\s*$)");
        if (!std::regex_match(query, m, kLabelValues)) {
          problems.push_back(absl::StrCat(name, ": variable ", var.value("name", ""),
                                          ": not label_values(expr, label): ", query));
          continue;
        }
        const std::string expr = Substitute(m[1].str(), vars);
        absl::StatusOr<Json> series = Query(expr);
        std::set<std::string> values;
        if (series.ok()) {
          for (const Json& s : *series) {
            if (s["metric"].contains(m[2].str())) values.insert(s["metric"][m[2].str()]);
          }
        }
        if (values.empty()) {
          problems.push_back(
              absl::StrCat(name, ": variable ", var.value("name", ""), ": ", expr, ": no values",
                           series.ok() ? "" : " (" + series.status().ToString() + ")"));
          continue;
        }
        vars[var.value("name", "")] = *values.begin();  // Grafana's default: the first value
      }
      for (const Json& panel : board["panels"]) {
        for (const Json& target : panel.value("targets", Json::array())) {
          const std::string expr = Substitute(target.value("expr", ""), vars);
          ++*expressions;
          absl::StatusOr<Json> series = Query(expr);
          if (series.ok() && series->empty() && OnlyGpuMetrics(expr)) {
            // This job's workers train on the CPU: the GPU panels have no series, so their
            // metric names are checked against the ones the GPU exporter registers instead.
            for (const std::string& metric : UnknownGpuMetrics(expr)) {
              problems.push_back(absl::StrCat(name, ": panel '", panel.value("title", ""),
                                              "': ", metric, ": not a GPU metric"));
            }
            ++gpu_only_;
            continue;
          }
          if (!series.ok()) {
            problems.push_back(absl::StrCat(name, ": panel '", panel.value("title", ""),
                                            "': ", expr, ": ", series.status().ToString()));
          } else if (series->empty()) {
            problems.push_back(absl::StrCat(name, ": panel '", panel.value("title", ""),
                                            "': ", expr, ": no series"));
          }
        }
      }
    }
    return problems;
  }

  // Expressions of GPU panels checked by name only (see Run).
  int gpu_only() const { return gpu_only_; }

 private:
  // The hptrain_gpu_* metrics of `expr`, when it uses no other hptrain metric.
  static std::vector<std::string> GpuMetrics(const std::string& expr) {
    static const std::regex kMetric(R"(hptrain_\w+)");
    std::vector<std::string> gpu;
    bool other = false;
    for (auto it = std::sregex_iterator(expr.begin(), expr.end(), kMetric);
         it != std::sregex_iterator(); ++it) {
      const std::string metric = it->str();
      if (absl::StartsWith(metric, "hptrain_gpu_")) {
        gpu.push_back(metric);
      } else {
        other = true;
      }
    }
    return other ? std::vector<std::string>() : gpu;
  }
  static bool OnlyGpuMetrics(const std::string& expr) { return !GpuMetrics(expr).empty(); }
  // The GPU metrics of `expr` that runtime/metrics/gpu_metrics.cc does not register.
  static std::vector<std::string> UnknownGpuMetrics(const std::string& expr) {
    const std::string source = hptrain::testing::ReadFile("runtime/metrics/gpu_metrics.cc");
    std::vector<std::string> unknown;
    for (const std::string& metric : GpuMetrics(expr)) {
      if (!absl::StrContains(source, absl::StrCat("\"", metric, "\""))) unknown.push_back(metric);
    }
    return unknown;
  }

  httplib::Client client_;
  int gpu_only_ = 0;
};

class PrometheusLiveTest : public ControllerTest {
 protected:
  void SetUp() override {
    if (Binary("hptrain").empty() || access(Binary("hptrain").c_str(), X_OK) != 0) {
      GTEST_SKIP() << "no hptrain binary in $HPTRAIN_BIN (built without libtorch)";
    }
    if (access(Binary("hptrain-controller").c_str(), X_OK) != 0) {
      GTEST_SKIP() << "no hptrain-controller binary in $HPTRAIN_BIN";
    }
    if (!OnPath("prometheus")) GTEST_SKIP() << "prometheus is not installed (Debian package)";
    ControllerTest::SetUp();
    dir_ = absl::StrCat(::testing::TempDir(), "/hptrain-prometheus-live-", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }

  void TearDown() override {
    // hptrain run stops its ps and workers on SIGTERM; the rest goes with SIGKILL.
    if (run_ != nullptr) {
      run_->Signal(SIGTERM);
      run_->Wait(absl::Seconds(30));
    }
    for (auto& process : processes_) process->Signal(SIGTERM);
    for (auto& process : processes_) process->Wait(absl::Seconds(10));
    processes_.clear();
    run_.reset();
    if (!dir_.empty()) {
      EXPECT_TRUE(hptrain::testing::FindProcesses({dir_}).empty())
          << "a process of the test outlived it";
    }
    ControllerTest::TearDown();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream(path) << text;
    return path;
  }

  Subprocess* Start(const std::vector<std::string>& argv,
                    const std::vector<std::string>& env = {}) {
    processes_.push_back(std::make_unique<Subprocess>());
    absl::Status started = processes_.back()->Start(argv, {}, env);
    EXPECT_TRUE(started.ok()) << started;
    return processes_.back().get();
  }

  std::string dir_;
  std::unique_ptr<Subprocess> run_;
  std::vector<std::unique_ptr<Subprocess>> processes_;
};

// The port in a "... on http://127.0.0.1:PORT/..." log line.
int PortOf(const std::string& line) {
  const size_t at = line.find("127.0.0.1:");
  if (at == std::string::npos) return 0;
  std::string rest = line.substr(at + 10);
  int port = 0;
  return absl::SimpleAtoi(rest.substr(0, rest.find_first_not_of("0123456789")), &port) ? port : 0;
}

TEST_F(PrometheusLiveTest, EveryDashboardPanelReturnsSeriesAndABrokenMetricNameIsCaught) {
  // The controller binary against the double, reconciling a job there.
  const std::string kubeconfig =
      Write("kubeconfig.yaml",
            absl::StrCat(
                "apiVersion: v1\nkind: Config\n", "clusters:\n- name: double\n  cluster:\n",
                "    server: ", server_->base_url(), "\n",
                "users:\n- name: controller\n  user:\n    token: controller-token\n",
                "contexts:\n- name: double\n  context:\n    cluster: double\n",
                "    user: controller\n    namespace: ", kNs, "\n", "current-context: double\n"));
  Subprocess* controller = Start({Binary("hptrain-controller"), "--kubeconfig", kubeconfig,
                                  absl::StrCat("--namespace=", kNs),
                                  "--metrics-address=127.0.0.1:0", "--health-address=127.0.0.1:0"});
  std::optional<std::string> metrics_line = controller->WaitForStderrLine(
      [](const std::string& line) {
        return absl::StrContains(line, "metrics on http://") && PortOf(line) > 0;
      },
      absl::Seconds(20));
  ASSERT_TRUE(metrics_line.has_value()) << controller->stderr_text();
  const int controller_port = PortOf(*metrics_line);
  CreateJob(MlpJob("mlp"));
  ASSERT_TRUE(WaitFor([&] { return PodNames("mlp").size() == 3; })) << controller->stderr_text();

  // The training job: hps with rebalancing, two workers, far more steps than the test waits for.
  const std::string job = Write(
      "job.yaml",
      absl::StrCat(
          "apiVersion: hptrain.io/v1alpha1\nkind: TrainingJob\n", "metadata:\n  name: ", kJob, "\n",
          "spec:\n", "  model: {name: mlp, hidden: [64]}\n",
          "  dataset: {name: synthetic, synthetic: {samples: 2048, testSamples: 256}}\n",
          "  strategy: {type: hps, bits: 8, staleness: 1}\n",
          "  optimizer: {type: sgd, lr: 0.05}\n", "  globalBatchSize: 64\n", "  epochs: 1000\n",
          "  threads: 1\n", "  rebalance: {enabled: true, intervalSteps: 10}\n",
          "  testing: {slowdown: [4, 8]}\n", "  workers: {replicas: 2}\n"));
  run_ = std::make_unique<Subprocess>();
  ASSERT_TRUE(
      run_->Start({Binary("hptrain"), "run", job, "--quiet"}, {}, {absl::StrCat("TMPDIR=", dir_)})
          .ok());

  // The run directory holds the token and "<coordinator port> <ps metrics port>".
  std::string run_dir;
  int coordinator_port = 0, ps_metrics_port = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
          if (!absl::StartsWith(entry.path().filename().string(), absl::StrCat("hptrain-", kJob))) {
            continue;
          }
          std::istringstream ports(hptrain::testing::ReadFile(entry.path().string() + "/ps.port"));
          if (ports >> coordinator_port >> ps_metrics_port) {
            run_dir = entry.path().string();
            return true;
          }
        }
        return false;
      },
      absl::Seconds(60)))
      << run_->stderr_text();
  const std::string token = hptrain::testing::ReadFile(run_dir + "/token");
  const std::string coordinator = absl::StrCat("127.0.0.1:", coordinator_port);

  // The workers' metrics addresses, as they registered them with the coordinator.
  ps::CoordinatorClient client(coordinator, token, std::chrono::seconds(5));
  std::vector<std::string> workers;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto status = client.GetJobStatus();
        if (!status.ok() || status->metrics_addresses_size() != 2) return false;
        workers.assign(status->metrics_addresses().begin(), status->metrics_addresses().end());
        return std::none_of(workers.begin(), workers.end(),
                            [](const std::string& a) { return a.empty(); });
      },
      absl::Seconds(60)))
      << run_->stderr_text();

  // The two misbehaving clients.
  {
    ps::CoordinatorClient intruder(coordinator, "a-wrong-token", std::chrono::seconds(5));
    EXPECT_EQ(intruder.GetJobStatus().status().code(), absl::StatusCode::kUnauthenticated);
    ps::PsClient stray({coordinator}, token, std::chrono::milliseconds(5000));
    EXPECT_FALSE(stray.Pull(0, /*rank=*/7, 0, 32).ok());
  }

  // Prometheus, scraping all four every second.
  std::vector<std::string> targets = {absl::StrCat("127.0.0.1:", ps_metrics_port)};
  for (const std::string& w : workers) targets.push_back(w);
  for (std::string& t : targets) t = absl::StrCat("'", t, "'");
  const int prometheus_port = hptrain::testing::FreePort();
  ASSERT_GT(prometheus_port, 0);
  const std::string config =
      Write("prometheus.yml",
            absl::StrCat(
                "global: {scrape_interval: 1s, evaluation_interval: 1s}\n", "rule_files: ['",
                std::filesystem::absolute(kAlertRules).string(), "']\n", "scrape_configs:\n",
                "  - job_name: hptrain-jobs\n", "    static_configs:\n",
                "      - targets: [", targets[0], "]\n", "        labels: {namespace: ",
                kJobNamespace, ", hptrain_io_job: ", kJob, ", hptrain_io_role: ps}\n",
                "      - targets: [", absl::StrJoin(targets.begin() + 1, targets.end(), ", "),
                "]\n", "        labels: {namespace: ", kJobNamespace, ", hptrain_io_job: ", kJob,
                ", hptrain_io_role: worker}\n",
                "  - job_name: hptrain-controller\n", "    static_configs:\n",
                "      - targets: ['127.0.0.1:", controller_port, "']\n",
                "        labels: {namespace: ", kControllerNs, ", pod: ", kControllerPod, "}\n"));
  Start({"/usr/bin/env", "prometheus", absl::StrCat("--config.file=", config),
         absl::StrCat("--storage.tsdb.path=", dir_, "/tsdb"),
         absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port), "--log.level=warn"});
  DashboardCheck check(prometheus_port);
  // Every target up, each scraped at least 8 times within the last 20 s (rates need a few
  // samples in their 15 s window), and the job still stepping.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto up = check.Query("min(count_over_time(up[20s])) >= 8 and count(up == 1) == 4");
        return up.ok() && !up->empty();
      },
      absl::Seconds(60)))
      << "Prometheus did not scrape the four targets; hptrain run: " << run_->stderr_text();

  // The runtime's series name their TrainingJob by trainingjob; `job` is the scrape job's.
  {
    auto series = check.Query("count by (job, trainingjob, role) (hptrain_step)");
    ASSERT_TRUE(series.ok()) << series.status();
    std::set<std::string> seen;
    for (const Json& s : *series) {
      const Json& m = s["metric"];
      seen.insert(absl::StrCat(m.value("job", ""), " ", m.value("trainingjob", ""), " ",
                               m.value("role", "")));
    }
    EXPECT_EQ(seen, (std::set<std::string>{absl::StrCat("hptrain-jobs ", kJob, " ps"),
                                           absl::StrCat("hptrain-jobs ", kJob, " worker")}));
    auto renamed = check.Query("{job=\"hptrain-jobs\", exported_job=~\".+\"}");
    ASSERT_TRUE(renamed.ok()) << renamed.status();
    EXPECT_TRUE(renamed->empty()) << renamed->dump();
  }

  int expressions = 0;
  std::vector<std::string> problems = check.Run("dashboards", &expressions);
  EXPECT_GE(expressions, 40);
  std::cout << "checked " << expressions << " panel expressions against the live Prometheus ("
            << check.gpu_only() << " of GPU panels by metric name: this job trains on the CPU)\n";
  EXPECT_TRUE(problems.empty()) << absl::StrJoin(problems, "\n");

  // A copy of the dashboards with one metric misspelt: the check must see it, and only it.
  const std::string copy = absl::StrCat(dir_, "/dashboards-broken");
  std::filesystem::create_directories(copy);
  for (const auto& entry : std::filesystem::directory_iterator("dashboards")) {
    if (entry.path().extension() != ".json") continue;
    std::string text = hptrain::testing::ReadFile(entry.path().string());
    if (entry.path().filename() == "communication.json") {
      ASSERT_TRUE(absl::StrContains(text, "hptrain_compression_ratio{"));
      text =
          absl::StrReplaceAll(text, {{"hptrain_compression_ratio{", "hptrain_compresion_ratio{"}});
    }
    if (entry.path().filename() == "workers.json") {
      ASSERT_TRUE(absl::StrContains(text, "hptrain_gpu_memory_used_bytes{"));
      text = absl::StrReplaceAll(
          text, {{"hptrain_gpu_memory_used_bytes{", "hptrain_gpu_memory_usde_bytes{"}});
    }
    std::ofstream(copy + "/" + entry.path().filename().string()) << text;
  }
  int broken_expressions = 0;
  std::vector<std::string> broken = check.Run(copy, &broken_expressions);
  EXPECT_EQ(broken_expressions, expressions);
  ASSERT_EQ(broken.size(), 2u) << absl::StrJoin(broken, "\n");
  EXPECT_TRUE(absl::StrContains(broken[0], "communication.json: panel 'Compression ratio'"))
      << broken[0];
  EXPECT_TRUE(absl::StrContains(broken[1], "hptrain_gpu_memory_usde_bytes: not a GPU metric"))
      << broken[1];
  EXPECT_TRUE(absl::StrContains(broken[0], "no series")) << broken[0];

  // Prometheus evaluated every alert rule on these series without an error.
  {
    httplib::Client http("127.0.0.1", prometheus_port);
    Json rules;
    int evaluated = 0;
    std::vector<std::string> unhealthy;
    ASSERT_TRUE(WaitFor(
        [&] {
          auto response = http.Get("/api/v1/rules?type=alert");
          if (!response || response->status != 200) return false;
          rules = Json::parse(response->body, nullptr, false);
          if (rules.is_discarded()) return false;
          evaluated = 0;
          unhealthy.clear();
          for (const Json& group : rules["data"]["groups"]) {
            for (const Json& rule : group["rules"]) {
              if (rule.value("health", "") == "ok") {
                ++evaluated;
              } else if (rule.value("health", "") == "err") {
                unhealthy.push_back(rule.value("name", "") + ": " + rule.value("lastError", ""));
              }
            }
          }
          // The seven alerts of charts/hptrain/files/alerts.yaml.
          return evaluated + static_cast<int>(unhealthy.size()) == 7;
        },
        absl::Seconds(20)))
        << rules.dump();
    EXPECT_EQ(evaluated, 7) << absl::StrJoin(unhealthy, "\n");
  }

  // The job was still training while the panels were checked.
  auto status = client.GetJobStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->done(), 0);
  EXPECT_EQ(status->failed(), 0);
}

}  // namespace
}  // namespace hptrain::manager::testing
