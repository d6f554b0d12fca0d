// The live HTTP endpoints of a running ps and worker (started by hand, as the controller does in
// pods): /healthz, /readyz, and /metrics in an exposition `promtool check metrics` accepts, with
// the metrics dashboards use. And the coordinator's token check, seen from outside: a client with
// the wrong token is refused, and the refusal is counted on /metrics.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "runtime/ps/coordinator_client.h"
#include "runtime/ps/ps_client.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kPromtool[] = "/usr/bin/promtool";

struct HttpResult {
  int status = -1;  // -1: no response
  std::string body;
};

HttpResult Get(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  auto response = client.Get(path.c_str());
  if (!response) return {};
  return {response->status, response->body};
}

// The value of the first sample of `name` whose label set contains every one of `labels`
// (each like `direction="sent"`); nullopt when there is none.
std::optional<double> Sample(const std::string& exposition, const std::string& name,
                             const std::vector<std::string>& labels = {}) {
  for (const std::string& line : Lines(exposition)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.compare(0, name.size(), name) != 0) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != '{' && next != ' ') continue;
    std::string label_set;
    size_t value_at = name.size();
    if (next == '{') {
      size_t close = line.find('}', name.size());
      if (close == std::string::npos) continue;
      label_set = line.substr(name.size(), close - name.size() + 1);
      value_at = close + 1;
    }
    bool all = true;
    for (const auto& l : labels) all = all && label_set.find(l) != std::string::npos;
    if (!all) continue;
    std::istringstream value(line.substr(value_at));
    double v;
    if (value >> v) return v;
  }
  return std::nullopt;
}

// One line per sample of `exposition` whose labels do not start with the process' constant labels
// trainingjob="<job>",role="<role>",rank="<rank>", or that carries a label Prometheus gives every
// target ("job", "instance") or its rename ("exported_job"); "" when every sample is right.
std::string LabelProblems(const std::string& exposition, const std::string& job,
                          const std::string& role, const std::string& rank) {
  static const std::regex kLabel(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*")re");
  const std::string constant =
      "{trainingjob=\"" + job + "\",role=\"" + role + "\",rank=\"" + rank + "\"";
  std::string problems;
  int samples = 0;
  for (const std::string& line : Lines(exposition)) {
    if (line.empty() || line[0] == '#') continue;
    ++samples;
    const size_t open = line.find('{');
    const size_t close = line.rfind('}');
    if (open == std::string::npos || close == std::string::npos ||
        line.compare(open, constant.size(), constant) != 0) {
      problems += "not labelled " + constant + "}: " + line + "\n";
      continue;
    }
    const std::string labels = line.substr(open, close - open + 1);
    for (auto it = std::sregex_iterator(labels.begin(), labels.end(), kLabel);
         it != std::sregex_iterator(); ++it) {
      const std::string name = (*it)[1].str();
      if (name == "job" || name == "instance" || name == "exported_job") {
        problems += "label " + name + ": " + line + "\n";
      }
    }
  }
  if (samples < 5) problems += "only " + std::to_string(samples) + " samples\n";
  return problems;
}

// Runs `promtool check metrics < file`; returns its exit status and everything it printed.
std::pair<int, std::string> Promtool(const TempDir& dir, const std::string& name,
                                     const std::string& exposition) {
  const std::string file = dir.Write(name, exposition);
  const std::string output = dir.path() + "/" + name + ".promtool";
  const std::string command = std::string(kPromtool) + " check metrics < '" + file + "' > '" +
                              output + "' 2>&1";
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(output)};
}

// Polls until `done` or the timeout; returns whether `done` became true.
template <typename F>
bool WaitFor(F done, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

// Whether `pid` (our child) has exited; reaps it and stores its status if so.
bool Exited(pid_t pid, int* exit_code) {
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) != pid) return false;
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

class LiveEndpoints : public ::testing::Test {
 protected:
  void TearDown() override {
    // Whatever the test did, nothing it started outlives it.
    if (worker_ > 0 && !worker_reaped_) Terminate(worker_);
    if (ps_ > 0 && !ps_reaped_) Terminate(ps_);
    EXPECT_TRUE(FindProcesses({dir_.path()}).empty()) << "a process of the test outlived it";
  }

  // Starts the ps; fills ps_port_ and ps_metrics_port_ from its port file.
  void StartPs(const std::string& job, const std::string& token) {
    StartPsProcess("ps", {"--job", job, "--token-file", token}, &ps_, &ps_port_,
                   &ps_metrics_port_);
  }

  // Starts `hptrain ps ARGS --port 0 ...` and reads its two ports from its port file; its output
  // goes to NAME.out and NAME.err.
  void StartPsProcess(const std::string& name, const std::vector<std::string>& args, pid_t* pid,
                      int* port, int* metrics_port) {
    const std::string port_file = dir_.path() + "/" + name + ".port";
    std::vector<std::string> argv = {HptrainBinary(), "ps"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--port", "0", "--port-file", port_file, "--metrics-port", "0",
                             "--linger", "5"});
    *pid = Spawn(argv, dir_.path() + "/" + name + ".out", dir_.path() + "/" + name + ".err");
    ASSERT_GT(*pid, 0);
    int exit_code = 0;
    ASSERT_TRUE(WaitFor(
        [&] {
          std::istringstream ports(ReadFile(port_file));
          return static_cast<bool>(ports >> *port >> *metrics_port) || Exited(*pid, &exit_code);
        },
        std::chrono::seconds(60)))
        << "no port file; " << name << " stderr: " << ReadFile(dir_.path() + "/" + name + ".err");
    ASSERT_GT(*port, 0) << name << " exited with " << exit_code << ": "
                        << ReadFile(dir_.path() + "/" + name + ".err");
    ASSERT_GT(*metrics_port, 0);
  }

  TempDir dir_;
  pid_t ps_ = -1, worker_ = -1;
  bool ps_reaped_ = false, worker_reaped_ = false;
  int ps_port_ = 0, ps_metrics_port_ = 0;
};

TEST_F(LiveEndpoints, PsAndWorkerServeValidMetricsAndCountRefusedTokens) {
  if (access(kPromtool, X_OK) != 0) {
    GTEST_SKIP() << kPromtool << " not installed (Debian package prometheus); needed to check "
                 << "the exposition format";
  }
  const std::string job = dir_.Write(
      "job.yaml", SyntheticJob("metrics-live", 1,
                               "  maxSteps: 16\n  testing: {slowdown: [20]}\n"));
  const std::string token = dir_.Write("token", "the-right-token\n");
  ASSERT_NO_FATAL_FAILURE(StartPs(job, token));

  // The ps: alive and ready as soon as it serves.
  EXPECT_EQ(Get(ps_metrics_port_, "/healthz").status, 200);
  EXPECT_EQ(Get(ps_metrics_port_, "/readyz").status, 200);
  EXPECT_EQ(Get(ps_metrics_port_, "/no-such-page").status, 404);

  // A client with the wrong token is refused, and counted once as a bad token.
  {
    ps::CoordinatorClient intruder("127.0.0.1:" + std::to_string(ps_port_), "a-wrong-token",
                                   std::chrono::seconds(5));
    auto status = intruder.GetJobStatus();
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.status().code(), absl::StatusCode::kUnauthenticated) << status.status();
    // The right token works on the same server.
    ps::CoordinatorClient owner("127.0.0.1:" + std::to_string(ps_port_), "the-right-token",
                                std::chrono::seconds(5));
    EXPECT_TRUE(owner.GetJobStatus().ok());
  }
  HttpResult ps_metrics = Get(ps_metrics_port_, "/metrics");
  ASSERT_EQ(ps_metrics.status, 200);
  EXPECT_EQ(Sample(ps_metrics.body, "hptrain_rpc_rejected_total", {"reason=\"bad_token\""}), 1.0)
      << ps_metrics.body;
  EXPECT_EQ(Sample(ps_metrics.body, "hptrain_rpc_rejected_total", {"reason=\"missing_token\""}),
            0.0)
      << ps_metrics.body;

  // The worker, on a metrics port picked here.
  const int worker_metrics_port = FreePort();
  ASSERT_GT(worker_metrics_port, 0);
  worker_ = Spawn({HptrainBinary(), "worker", "--job", job, "--coordinator",
                   "127.0.0.1:" + std::to_string(ps_port_), "--rank", "0", "--token-file", token,
                   "--metrics-port", std::to_string(worker_metrics_port)},
                  dir_.path() + "/worker.out", dir_.path() + "/worker.err");
  ASSERT_GT(worker_, 0);
  int worker_exit = -1;
  // Ready once training started; then scrape after a few steps.
  std::string worker_body;
  bool healthy = false, ready = false;
  ASSERT_TRUE(WaitFor(
      [&] {
        if (Exited(worker_, &worker_exit)) {
          worker_reaped_ = true;
          return true;
        }
        healthy = healthy || Get(worker_metrics_port, "/healthz").status == 200;
        ready = ready || Get(worker_metrics_port, "/readyz").status == 200;
        if (!ready) return false;
        HttpResult m = Get(worker_metrics_port, "/metrics");
        if (m.status != 200) return false;
        worker_body = m.body;
        auto step = Sample(worker_body, "hptrain_step");
        return step && *step >= 3;
      },
      std::chrono::seconds(120)));
  ASSERT_FALSE(worker_reaped_) << "the worker exited (" << worker_exit
                               << ") before it could be scraped: "
                               << ReadFile(dir_.path() + "/worker.err");
  EXPECT_TRUE(healthy);
  EXPECT_TRUE(ready);
  // The ps refreshes its coordinator gauges every half second: wait for the one that sees the
  // worker (registrations are never taken back, so this cannot miss it).
  EXPECT_TRUE(WaitFor(
      [&] {
        ps_metrics = Get(ps_metrics_port_, "/metrics");
        return ps_metrics.status == 200 &&
               Sample(ps_metrics.body, "hptrain_workers_registered").value_or(0) >= 1;
      },
      std::chrono::seconds(10)));
  ASSERT_EQ(ps_metrics.status, 200);

  // The exposition formats are valid: promtool exits 0 and prints nothing.
  for (const auto& [name, body] :
       {std::pair<std::string, std::string>{"ps.prom", ps_metrics.body},
        std::pair<std::string, std::string>{"worker.prom", worker_body}}) {
    auto [code, output] = Promtool(dir_, name, body);
    EXPECT_EQ(code, 0) << name << ": " << output << "\n" << body;
    EXPECT_EQ(output, "") << name << ":\n" << body;
  }

  // Every sample names its TrainingJob by trainingjob, never by Prometheus' own `job`.
  EXPECT_EQ(LabelProblems(ps_metrics.body, "metrics-live", "ps", "0"), "") << ps_metrics.body;
  EXPECT_EQ(LabelProblems(worker_body, "metrics-live", "worker", "0"), "") << worker_body;
  EXPECT_NE(LabelProblems("hptrain_step{job=\"metrics-live\",role=\"worker\",rank=\"0\"} 1\n",
                          "metrics-live", "worker", "0"),
            "");

  // What the dashboards use.
  EXPECT_TRUE(Sample(worker_body, "hptrain_step_duration_seconds_bucket", {"le=\"+Inf\""}))
      << worker_body;
  EXPECT_GE(Sample(worker_body, "hptrain_step_duration_seconds_count").value_or(0), 3.0);
  EXPECT_TRUE(Sample(worker_body, "hptrain_comm_bytes_total", {"direction=\"sent\""}))
      << worker_body;
  EXPECT_GT(Sample(worker_body, "hptrain_samples_per_second").value_or(0), 0.0) << worker_body;
  EXPECT_EQ(Sample(worker_body, "hptrain_batch_size", {"rank=\"0\""}), 64.0) << worker_body;
  EXPECT_EQ(Sample(ps_metrics.body, "hptrain_workers_registered"), 1.0) << ps_metrics.body;
  EXPECT_EQ(Sample(ps_metrics.body, "hptrain_rpc_rejected_total", {"reason=\"bad_token\""}), 1.0)
      << "the worker's calls with the right token must not count as refused\n"
      << ps_metrics.body;

  // The worker finishes on its own; the ps then exits after lingering (or on SIGTERM).
  ASSERT_TRUE(WaitFor([&] { return worker_reaped_ = Exited(worker_, &worker_exit); },
                      std::chrono::seconds(120)))
      << ReadFile(dir_.path() + "/worker.err");
  EXPECT_EQ(worker_exit, 0) << ReadFile(dir_.path() + "/worker.err");
  EXPECT_EQ(Terminate(ps_), 0) << ReadFile(dir_.path() + "/ps.err");
  ps_reaped_ = true;
}

// A parameter-server job as on Kubernetes: ps-0 (coordinator and shard 0), a second shard started
// with --shard 1 --coordinator, one worker. Both shards serve valid /metrics with the PS metrics
// the dashboards use, and a shard refuses and counts a call with the wrong token.
TEST_F(LiveEndpoints, ParameterServerShardsServeValidMetrics) {
  if (access(kPromtool, X_OK) != 0) {
    GTEST_SKIP() << kPromtool << " not installed (Debian package prometheus); needed to check "
                 << "the exposition format";
  }
  // Enough steps that the worker is still training when a loaded machine gets to scrape it.
  std::string text = SyntheticJob("metrics-ps", 1,
                                  "  epochs: 10\n  maxSteps: 200\n  ps: {shards: 2}\n  testing: {slowdown: [10]}\n");
  const std::string ssgd = "strategy: {type: ssgd}";
  ASSERT_NE(text.find(ssgd), std::string::npos);
  text.replace(text.find(ssgd), ssgd.size(), "strategy: {type: hps, bits: 8}");
  const std::string job = dir_.Write("job.yaml", text);
  const std::string token = dir_.Write("token", "the-right-token\n");
  ASSERT_NO_FATAL_FAILURE(StartPs(job, token));
  pid_t shard = -1;
  int shard_port = 0, shard_metrics_port = 0;
  ASSERT_NO_FATAL_FAILURE(StartPsProcess(
      "shard1",
      {"--job", job, "--token-file", token, "--shard", "1", "--coordinator",
       "127.0.0.1:" + std::to_string(ps_port_)},
      &shard, &shard_port, &shard_metrics_port));
  worker_ = Spawn({HptrainBinary(), "worker", "--job", job, "--coordinator",
                   "127.0.0.1:" + std::to_string(ps_port_), "--rank", "0", "--token-file", token,
                   "--metrics-port", "0"},
                  dir_.path() + "/worker.out", dir_.path() + "/worker.err");
  ASSERT_GT(worker_, 0);
  // A stranger's call on shard 1 is refused and counted there.
  {
    ps::PsClient intruder({"127.0.0.1:" + std::to_string(shard_port)}, "a-wrong-token",
                          std::chrono::seconds(5));
    auto state = intruder.GetState(0, 0);
    ASSERT_FALSE(state.ok());
    EXPECT_EQ(state.status().code(), absl::StatusCode::kUnauthenticated) << state.status();
  }
  int worker_exit = -1;
  std::string shard_body, ps_body;
  ASSERT_TRUE(WaitFor(
      [&] {
        if (Exited(worker_, &worker_exit)) {
          worker_reaped_ = true;
          return true;
        }
        HttpResult s = Get(shard_metrics_port, "/metrics");
        HttpResult p = Get(ps_metrics_port_, "/metrics");
        if (s.status != 200 || p.status != 200) return false;
        shard_body = s.body;
        ps_body = p.body;
        // Scraped while training: both shards have taken pushes and served pulls for 5 rounds.
        for (const std::string* body : {&shard_body, &ps_body}) {
          if (Sample(*body, "hptrain_ps_push_bytes_total").value_or(0) <= 0 ||
              Sample(*body, "hptrain_ps_pull_bytes_total").value_or(0) <= 0 ||
              Sample(*body, "hptrain_ps_aggregation_wait_seconds_count").value_or(0) < 5) {
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(120)));
  ASSERT_FALSE(worker_reaped_) << "the worker exited (" << worker_exit
                               << ") before both shards were scraped mid-training: "
                               << ReadFile(dir_.path() + "/worker.err");
  for (const auto& [name, body] : {std::pair<std::string, std::string>{"ps0.prom", ps_body},
                                   std::pair<std::string, std::string>{"ps1.prom", shard_body}}) {
    auto [code, output] = Promtool(dir_, name, body);
    EXPECT_EQ(code, 0) << name << ": " << output << "\n" << body;
    EXPECT_EQ(output, "") << name << ":\n" << body;
    EXPECT_GT(Sample(body, "hptrain_ps_push_bytes_total").value_or(0), 0.0) << name << body;
    EXPECT_GT(Sample(body, "hptrain_ps_pull_bytes_total").value_or(0), 0.0) << name << body;
    EXPECT_GE(Sample(body, "hptrain_ps_aggregation_wait_seconds_count").value_or(0), 5.0)
        << name << body;
    EXPECT_EQ(Sample(body, "hptrain_ps_pushes_rejected_total"), std::nullopt) << name << body;
  }
  EXPECT_TRUE(Sample(shard_body, "hptrain_ps_model_version", {"role=\"ps\"", "rank=\"1\""}))
      << shard_body;
  EXPECT_EQ(LabelProblems(ps_body, "metrics-ps", "ps", "0"), "") << ps_body;
  EXPECT_EQ(LabelProblems(shard_body, "metrics-ps", "ps", "1"), "") << shard_body;
  EXPECT_EQ(Sample(shard_body, "hptrain_rpc_rejected_total", {"reason=\"bad_token\""}), 1.0)
      << shard_body;
  ASSERT_TRUE(WaitFor(
      [&] { return worker_reaped_ || (worker_reaped_ = Exited(worker_, &worker_exit)); },
      std::chrono::seconds(120)));
  EXPECT_EQ(worker_exit, 0) << ReadFile(dir_.path() + "/worker.err");
  EXPECT_EQ(Terminate(ps_), 0) << ReadFile(dir_.path() + "/ps.err");
  ps_reaped_ = true;
  // Shard 1 ends on its own once the coordinator is gone.
  int shard_exit = -1;
  EXPECT_TRUE(WaitFor([&] { return Exited(shard, &shard_exit); }, std::chrono::seconds(30)))
      << ReadFile(dir_.path() + "/shard1.err");
  EXPECT_EQ(shard_exit, 0) << ReadFile(dir_.path() + "/shard1.err");
  if (shard_exit < 0) Terminate(shard);
}

// The parameter server killed mid-run, as a pod would lose it: the worker exits 1 within its
// timeout with an error naming the shard and its address, never hangs.
TEST_F(LiveEndpoints, AWorkerWhoseParameterServerDiesExitsOneNamingIt) {
  std::string text =
      SyntheticJob("ps-dies", 1, "  maxSteps: 2000\n  testing: {slowdown: [5]}\n");
  const std::string ssgd = "strategy: {type: ssgd}";
  ASSERT_NE(text.find(ssgd), std::string::npos);
  text.replace(text.find(ssgd), ssgd.size(), "strategy: {type: ps}");
  const std::string job = dir_.Write("job.yaml", text);
  const std::string token = dir_.Write("token", "the-right-token\n");
  ASSERT_NO_FATAL_FAILURE(StartPs(job, token));
  worker_ = Spawn({HptrainBinary(), "worker", "--job", job, "--coordinator",
                   "127.0.0.1:" + std::to_string(ps_port_), "--rank", "0", "--token-file", token,
                   "--metrics-port", "0", "--rendezvous-timeout", "20"},
                  dir_.path() + "/worker.out", dir_.path() + "/worker.err");
  ASSERT_GT(worker_, 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        HttpResult m = Get(ps_metrics_port_, "/metrics");
        auto version = Sample(m.body, "hptrain_ps_model_version");
        return m.status == 200 && version && *version >= 3;
      },
      std::chrono::seconds(60)));
  kill(ps_, SIGKILL);
  int ps_exit = -1;
  ASSERT_TRUE(WaitFor([&] { return Exited(ps_, &ps_exit); }, std::chrono::seconds(10)));
  ps_reaped_ = true;
  int worker_exit = -1;
  ASSERT_TRUE(WaitFor([&] { return Exited(worker_, &worker_exit); }, std::chrono::seconds(60)))
      << "the worker did not exit after its parameter server died";
  worker_reaped_ = true;
  const std::string err = ReadFile(dir_.path() + "/worker.err");
  EXPECT_EQ(worker_exit, 1) << err;
  EXPECT_NE(err.find("parameter server shard 0 (127.0.0.1:" + std::to_string(ps_port_) +
                     ") unreachable"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace hptrain::testing
