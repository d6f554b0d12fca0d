// Scale benchmark of the TrainingJob controller: N jobs with W workers each (N*(W+1) pods, plus
// a Service and a Secret per job) in the API server double.
//
//   hptrain-controller-scale-bench [--jobs 1000] [--workers-per-job 7] [--controller-workers 2]
//                                  [--timeout-seconds 600]
//
// The double runs in a child process (this binary with --serve-double), so that the peak RSS
// and CPU time reported for the controller are the controller's own, as in a cluster where the
// API server is elsewhere. The child speaks one line at a time on its stdin/stdout:
//   child:  ready PORT WARM_SECONDS PODS SERVICES SECRETS   (after the warm-up)
//   parent: touch        child: touched
//   parent: stats        child: stats {"verbs": {...}, "peak_rss_mib": ...}
//   parent: quit (or EOF) and the child exits 0.
//
// 1. Warm-up (in the child, not measured): a first controller creates every job's objects; the
//    child plays the kubelet (every pod Running) and waits until every job reports phase
//    Running; then that controller stops and the request log is cleared.
// 2. Initial sync (measured): a fresh controller starts in this process; the time until its
//    caches have synced and it has reconciled every job once with the work queue drained.
// 3. Second pass: every job gets a new annotation (an update event, no spec change); the time
//    until the queue drains again.
// Reconcile latencies come from hptrain_controller_reconcile_duration_seconds (bucket-
// interpolated percentiles, as histogram_quantile computes them). Peak RSS is VmHWM of this
// process (the controller, its client and caches), the double's is reported beside it.
// Exit 0 on success; 1 with a one-line error when the controller does not converge in time.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "controller/kube/client.h"
#include "controller/kube/rate_limiter.h"
#include "controller/manager/controller.h"
#include "nlohmann/json.hpp"
#include "runtime/base/exit_codes.h"
#include "runtime/cli/flags.h"
#include "runtime/metrics/registry.h"
#include "tests/controller/apiserver/api_server_double.h"

namespace {

using Json = nlohmann::json;
using hptrain::manager::Controller;
using hptrain::manager::ControllerOptions;
using hptrain::testing::ApiServerDouble;

constexpr char kNs[] = "scale";

struct Flags {
  int jobs = 1000;
  int workers_per_job = 7;
  int controller_workers = 2;
  int timeout_seconds = 600;
  bool serve_double = false;  // the child's role
};

constexpr char kProgram[] = "hptrain-controller-scale-bench";

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kProgram, message.c_str());
  std::exit(1);
}

// Parses the flags; exits (2 on a bad flag, 0 after --help) when it should not go on.
Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  auto set = hptrain::cli::FlagSet::ForProgram(
      kProgram, "[--jobs N] [--workers-per-job W] [--controller-workers K] [--timeout-seconds S]");
  set.Int("jobs", &flags.jobs, "", "TrainingJobs in the API server double");
  set.Int("workers-per-job", &flags.workers_per_job, "",
          "worker pods per job (each job has a ps too)");
  set.Int("controller-workers", &flags.controller_workers, "",
          "the controller's reconcile workers");
  set.Int("timeout-seconds", &flags.timeout_seconds, "", "give up on a phase after this long");
  set.Bool("serve-double", &flags.serve_double, "run as the API server double (the child's role)");
  if (int code = 0; !set.ParseOrExit(argc, argv, &code)) std::exit(code);
  if (flags.jobs < 1 || flags.workers_per_job < 1 || flags.controller_workers < 1 ||
      flags.timeout_seconds < 1 || !set.positional().empty()) {
    std::exit(hptrain::ReportErrorAs(
        kProgram,
        absl::InvalidArgumentError("every count must be >= 1, and there are no positional "
                                   "arguments")));
  }
  return flags;
}

Json Job(const std::string& name, int workers) {
  Json job = Json::parse(R"({
    "apiVersion": "hptrain.io/v1alpha1",
    "kind": "TrainingJob",
    "metadata": {"labels": {"bench": "scale"}},
    "spec": {"model": {"name": "lenet5"}, "dataset": {"name": "fashion-mnist"},
             "epochs": 1, "seed": 1}
  })");
  job["metadata"]["name"] = name;
  job["metadata"]["namespace"] = kNs;
  job["spec"]["globalBatchSize"] = 64 * workers;
  job["spec"]["workers"] = {{"replicas", workers}};
  return job;
}

double ProcStatusMiB(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::atof(line.c_str() + prefix.size()) / 1024.0;
  }
  return 0;
}

// histogram_quantile over the difference of two snapshots; seconds.
double Quantile(const hptrain::metrics::HistogramSnapshot& after,
                const hptrain::metrics::HistogramSnapshot* before, double q) {
  std::vector<double> cum(after.cumulative.begin(), after.cumulative.end());
  if (before != nullptr) {
    for (size_t i = 0; i < cum.size() && i < before->cumulative.size(); ++i) {
      cum[i] -= static_cast<double>(before->cumulative[i]);
    }
  }
  if (cum.empty() || cum.back() <= 0) return 0;
  double rank = q * cum.back();
  for (size_t i = 0; i < cum.size(); ++i) {
    if (cum[i] < rank) continue;
    if (i == after.bounds.size()) return after.bounds.empty() ? 0 : after.bounds.back();
    double lower = i == 0 ? 0 : after.bounds[i - 1];
    double below = i == 0 ? 0 : cum[i - 1];
    double in_bucket = cum[i] - below;
    if (in_bucket <= 0) return after.bounds[i];
    return lower + (after.bounds[i] - lower) * (rank - below) / in_bucket;
  }
  return after.bounds.back();
}

std::unique_ptr<hptrain::kube::Client> NewClient(const std::string& server) {
  hptrain::kube::Config config;
  config.server = server;
  config.timeout = absl::Seconds(60);
  config.source = "scale-bench";
  absl::StatusOr<std::unique_ptr<hptrain::kube::Client>> client =
      hptrain::kube::Client::FromConfig(config);
  if (!client.ok()) Fail("client: " + std::string(client.status().message()));
  return *std::move(client);
}

ControllerOptions Options(const Flags& flags, hptrain::metrics::Registry* registry) {
  ControllerOptions options;
  options.namespaces = {kNs};
  options.workers = flags.controller_workers;
  options.reconcile.default_image = "hptrain/runtime:bench";
  options.registry = registry;
  options.event_flush_timeout = absl::Seconds(5);
  options.rate_limiter = std::make_unique<hptrain::kube::ItemExponentialRateLimiter>(
      absl::Milliseconds(5), absl::Seconds(1));
  return options;
}

// Waits until the controller has done at least `target` passes with an empty queue and no pass
// started for `quiet`; returns the time at which reconciles >= target and depth == 0 first held.
absl::Time WaitDrained(const Controller& controller, int64_t target, absl::Time deadline,
                       const char* what) {
  absl::Time first = absl::InfiniteFuture();
  int64_t last = -1;
  absl::Time last_change = absl::Now();
  while (true) {
    absl::Time now = absl::Now();
    if (now > deadline) {
      Fail(absl::StrCat("controller did not converge (", what, "): ", controller.reconciles(),
                        " reconciles of ", target, ", queue depth ",
                        controller.metrics().queue_depth->Value()));
    }
    int64_t done = controller.reconciles();
    bool drained = done >= target && controller.metrics().queue_depth->Value() == 0;
    if (drained && first == absl::InfiniteFuture()) first = now;
    if (!drained) first = absl::InfiniteFuture();
    if (done != last) {
      last = done;
      last_change = now;
    }
    if (drained && now - last_change > absl::Milliseconds(500)) return first;
    absl::SleepFor(absl::Milliseconds(2));
  }
}

// Polls `condition` every 250 ms (the double's WaitFor re-evaluates after every write, which
// costs a full List per write at this scale).
bool Poll(const std::function<bool()>& condition, absl::Time deadline) {
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(250));
  }
  return true;
}

// --- The child: the API server double, seeded and warmed up. --------------------------------

std::map<std::string, int> VerbCounts(const ApiServerDouble& server) {
  std::map<std::string, int> by_verb;
  for (const hptrain::testing::RequestRecord& record : server.RequestLog()) ++by_verb[record.verb];
  return by_verb;
}

int ServeDouble(const Flags& flags) {
  const int n = flags.jobs;
  const int w = flags.workers_per_job;
  const size_t pods = static_cast<size_t>(n) * static_cast<size_t>(w + 1);
  const absl::Time deadline = absl::Now() + absl::Seconds(flags.timeout_seconds);

  hptrain::testing::ApiServerDoubleOptions server_options;
  server_options.history_limit = std::max<size_t>(10000, pods * 4);
  server_options.watch_queue_limit = std::max<size_t>(10000, pods * 4);
  ApiServerDouble server(server_options);
  absl::StatusOr<int> port = server.Start();
  if (!port.ok()) Fail("double: " + std::string(port.status().message()));
  absl::StatusOr<Json> ns = server.Create("namespaces", Json{{"apiVersion", "v1"},
                                                             {"kind", "Namespace"},
                                                             {"metadata", {{"name", kNs}}}});
  if (!ns.ok() && ns.status().code() != absl::StatusCode::kAlreadyExists) {
    Fail("namespace: " + std::string(ns.status().message()));
  }
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<Json> created =
        server.Create("trainingjobs.hptrain.io", Job(absl::StrCat("job-", i), w));
    if (!created.ok()) Fail("seed job: " + std::string(created.status().message()));
  }

  absl::Time warm_start = absl::Now();
  {
    std::unique_ptr<hptrain::kube::Client> client = NewClient(server.base_url());
    hptrain::metrics::Registry registry;
    Controller warm(client.get(), Options(flags, &registry));
    absl::Status started = warm.Start();
    if (!started.ok()) Fail("warm-up controller: " + std::string(started.message()));
    if (!Poll([&] { return server.List("pods", kNs).size() >= pods; }, deadline)) {
      Fail(absl::StrCat("warm-up did not converge: ", server.List("pods", kNs).size(), " of ",
                        pods, " pods"));
    }
    for (const Json& pod : server.List("pods", kNs)) {
      absl::Status status = server.SetPodPhase(kNs, pod["metadata"]["name"], "Running");
      if (!status.ok()) Fail("pod phase: " + std::string(status.message()));
    }
    auto all_running = [&] {
      for (const Json& job : server.List("trainingjobs.hptrain.io", kNs)) {
        if (job.value("status", Json::object()).value("phase", "") != "Running") return false;
      }
      return true;
    };
    if (!Poll(all_running, deadline)) {
      Fail("warm-up did not converge: not every job reached phase Running");
    }
    WaitDrained(warm, n, deadline, "warm-up");
    warm.Stop();
  }
  double warm_seconds = absl::ToDoubleSeconds(absl::Now() - warm_start);
  server.ClearRequestLog();
  std::printf("ready %d %.3f %zu %zu %zu\n", *port, warm_seconds,
              server.List("pods", kNs).size(), server.List("services", kNs).size(),
              server.List("secrets", kNs).size());
  std::fflush(stdout);

  std::string command;
  while (std::getline(std::cin, command) && command != "quit") {
    if (command == "touch") {
      for (int i = 0; i < n; ++i) {
        absl::StatusOr<Json> mutated = server.Mutate(
            "trainingjobs.hptrain.io", kNs, absl::StrCat("job-", i), [](Json* job) {
              (*job)["metadata"]["annotations"]["bench.hptrain.io/touched"] = "1";
            });
        if (!mutated.ok()) Fail("touch job: " + std::string(mutated.status().message()));
      }
      std::printf("touched\n");
    } else if (command == "stats") {
      Json stats = {{"verbs", VerbCounts(server)}, {"peak_rss_mib", ProcStatusMiB("VmHWM")}};
      std::printf("stats %s\n", stats.dump().c_str());
    } else {
      Fail("unknown command " + command);
    }
    std::fflush(stdout);
  }
  server.CloseAllWatches();
  server.Stop();
  return 0;
}

// --- The parent: the controller measured, the double driven through the child's pipes. ------

class DoubleProcess {
 public:
  explicit DoubleProcess(const Flags& flags) {
    int to_child[2];
    int from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) Fail("pipe: " + std::string(strerror(errno)));
    std::vector<std::string> args = {
        "/proc/self/exe", "--serve-double", "--jobs", std::to_string(flags.jobs),
        "--workers-per-job", std::to_string(flags.workers_per_job), "--controller-workers",
        std::to_string(flags.controller_workers), "--timeout-seconds",
        std::to_string(flags.timeout_seconds)};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ < 0) Fail("fork: " + std::string(strerror(errno)));
    if (pid_ == 0) {
      dup2(to_child[0], STDIN_FILENO);
      dup2(from_child[1], STDOUT_FILENO);
      for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    to_ = fdopen(to_child[1], "w");
    from_ = fdopen(from_child[0], "r");
  }

  ~DoubleProcess() {
    std::fputs("quit\n", to_);
    std::fclose(to_);
    std::fclose(from_);
    int status = 0;
    waitpid(pid_, &status, 0);
  }

  // The child's next line (without the newline); fails the benchmark when the child exited.
  std::string ReadLine(const char* what) {
    std::string line;
    int c;
    while ((c = std::fgetc(from_)) != EOF && c != '\n') line.push_back(static_cast<char>(c));
    if (c == EOF) Fail(absl::StrCat("the API server double exited while ", what));
    return line;
  }

  std::string Ask(const std::string& command) {
    std::fprintf(to_, "%s\n", command.c_str());
    std::fflush(to_);
    return ReadLine(command.c_str());
  }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

int RunController(const Flags& flags) {
  const int n = flags.jobs;
  const int w = flags.workers_per_job;
  const size_t pods = static_cast<size_t>(n) * static_cast<size_t>(w + 1);
  std::printf("scale-bench: %d jobs x (1 ps + %d workers) = %zu pods, %d controller workers, "
              "API server double in a child process, %ld CPUs online\n",
              n, w, pods, flags.controller_workers, sysconf(_SC_NPROCESSORS_ONLN));
  std::fflush(stdout);

  DoubleProcess double_process(flags);
  std::istringstream ready(double_process.ReadLine("warming up"));
  std::string word;
  int port = 0;
  double warm_seconds = 0;
  size_t pods_seen = 0, services = 0, secrets = 0;
  ready >> word >> port >> warm_seconds >> pods_seen >> services >> secrets;
  if (word != "ready" || port <= 0) Fail("unexpected line from the API server double");
  const absl::Time deadline = absl::Now() + absl::Seconds(flags.timeout_seconds);
  double rss_before = ProcStatusMiB("VmRSS");

  // --- Measured: a fresh controller's initial sync. -------------------------------------------
  std::unique_ptr<hptrain::kube::Client> client =
      NewClient(absl::StrCat("http://127.0.0.1:", port));
  hptrain::metrics::Registry registry;
  Controller controller(client.get(), Options(flags, &registry));
  double cpu0 = CpuSeconds();
  absl::Time t0 = absl::Now();
  absl::Status started = controller.Start();
  if (!started.ok()) Fail("controller: " + std::string(started.message()));
  if (!controller.WaitForSync(deadline - absl::Now())) Fail("controller caches did not sync");
  double cache_sync_seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  absl::Time drained = WaitDrained(controller, n, deadline, "initial sync");
  double initial_sync_seconds = absl::ToDoubleSeconds(drained - t0);
  double initial_cpu = CpuSeconds() - cpu0;
  int64_t first_pass_reconciles = controller.reconciles();
  hptrain::metrics::HistogramSnapshot first = controller.metrics().reconcile_duration->Snapshot();

  // --- Second pass: an annotation on every job (update events, no spec change). -------------
  absl::Time t1 = absl::Now();
  if (double_process.Ask("touch") != "touched") Fail("the double did not touch the jobs");
  absl::Time drained2 =
      WaitDrained(controller, first_pass_reconciles + n, deadline, "second pass");
  double second_pass_seconds = absl::ToDoubleSeconds(drained2 - t1);
  hptrain::metrics::HistogramSnapshot second = controller.metrics().reconcile_duration->Snapshot();
  int64_t second_pass_reconciles = controller.reconciles() - first_pass_reconciles;
  double errors = controller.metrics().reconcile_errors->Value();
  controller.Stop();
  double peak_rss = ProcStatusMiB("VmHWM");
  double cpu_total = CpuSeconds() - cpu0;

  std::string stats_line = double_process.Ask("stats");
  if (stats_line.rfind("stats ", 0) != 0) Fail("unexpected stats line from the double");
  Json stats = Json::parse(stats_line.substr(6));
  double p50 = Quantile(first, nullptr, 0.50) * 1e3;
  double p99 = Quantile(first, nullptr, 0.99) * 1e3;
  double p50_2 = Quantile(second, &first, 0.50) * 1e3;
  double p99_2 = Quantile(second, &first, 0.99) * 1e3;
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 0) load[0] = -1;

  std::printf("warm-up in the double's process (not measured): %.2f s; %zu pods, %zu services, "
              "%zu secrets\n", warm_seconds, pods_seen, services, secrets);
  std::printf("%-40s %12s   %s\n", "metric", "value", "target");
  std::printf("%-40s %12.3f\n", "cache sync (s)", cache_sync_seconds);
  std::printf("%-40s %12.3f\n", "initial sync, queue drained (s)", initial_sync_seconds);
  std::printf("%-40s %12.3f\n", "controller CPU in initial sync (s)", initial_cpu);
  std::printf("%-40s %12lld\n", "initial pass reconciles", (long long)first_pass_reconciles);
  std::printf("%-40s %12.2f\n", "initial pass reconcile p50 (ms)", p50);
  std::printf("%-40s %12.2f   < 50\n", "initial pass reconcile p99 (ms)", p99);
  std::printf("%-40s %12.3f\n", "second pass, queue drained (s)", second_pass_seconds);
  std::printf("%-40s %12lld\n", "second pass reconciles", (long long)second_pass_reconciles);
  std::printf("%-40s %12.2f\n", "second pass reconcile p50 (ms)", p50_2);
  std::printf("%-40s %12.2f   < 50\n", "second pass reconcile p99 (ms)", p99_2);
  std::printf("%-40s %12.0f\n", "reconcile errors", errors);
  std::printf("%-40s %12.3f\n", "controller CPU, both passes (s)", cpu_total);
  std::printf("%-40s %12.1f\n", "controller RSS before start (MiB)", rss_before);
  std::printf("%-40s %12.1f   < 256\n", "controller peak RSS, VmHWM (MiB)", peak_rss);
  std::printf("%-40s %12.1f\n", "API server double peak RSS (MiB)",
              stats["peak_rss_mib"].get<double>());
  std::printf("%-40s %12.2f\n", "load average (1 min) at end", load[0]);
  std::string verbs;
  for (const auto& [verb, count] : stats["verbs"].items()) {
    verbs += absl::StrCat(" ", verb, "=", count.get<int>());
  }
  std::printf("double requests after warm-up by verb:%s\n", verbs.c_str());
  Json line = {{"jobs", n},
               {"pods", pods},
               {"cache_sync_seconds", cache_sync_seconds},
               {"initial_sync_seconds", initial_sync_seconds},
               {"reconcile_p50_ms", p50},
               {"reconcile_p99_ms", p99},
               {"second_pass_p99_ms", p99_2},
               {"controller_peak_rss_mib", peak_rss},
               {"double_peak_rss_mib", stats["peak_rss_mib"]}};
  std::printf("%s\n", line.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  return flags.serve_double ? ServeDouble(flags) : RunController(flags);
}
