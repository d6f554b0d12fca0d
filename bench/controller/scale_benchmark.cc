// Scale benchmark of the TrainingJob controller: N jobs with W workers each (N*(W+1) pods, plus
// a Service and a Secret per job) in the API server double, which runs in this process.
//
//   hptrain-controller-scale-bench [--jobs 1000] [--workers-per-job 7] [--controller-workers 2]
//                                  [--timeout-seconds 600]
//
// 1. Warm-up (not measured): a first controller creates every job's objects; the benchmark plays
//    the kubelet (every pod Running) and waits until every job reports phase Running; then that
//    controller stops.
// 2. Initial sync (measured): a fresh controller starts; the time until its caches have synced
//    and it has reconciled every job once with the work queue drained.
// 3. Second pass: every job gets a new annotation (an update event, no spec change); the time
//    until the queue drains again.
// Reconcile latencies come from hptrain_controller_reconcile_duration_seconds (bucket-
// interpolated percentiles, as histogram_quantile computes them). Peak RSS is VmHWM of this
// process, which holds the double (its store, request log and HTTP server) too.
// Exit 0 on success; 1 with a one-line error when the controller does not converge in time.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
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
};

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "scale-bench: %s\n", message.c_str());
  std::exit(1);
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      Fail("missing value for " + arg);
    }
    int n = std::atoi(value.c_str());
    if (n < 1) Fail("bad value for " + arg + ": " + value);
    if (arg == "--jobs") {
      flags.jobs = n;
    } else if (arg == "--workers-per-job") {
      flags.workers_per_job = n;
    } else if (arg == "--controller-workers") {
      flags.controller_workers = n;
    } else if (arg == "--timeout-seconds") {
      flags.timeout_seconds = n;
    } else {
      Fail("unknown flag " + arg);
    }
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

std::unique_ptr<hptrain::kube::Client> NewClient(const ApiServerDouble& server) {
  hptrain::kube::Config config;
  config.server = server.base_url();
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

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  const int n = flags.jobs;
  const int w = flags.workers_per_job;
  const size_t pods = static_cast<size_t>(n) * static_cast<size_t>(w + 1);
  const absl::Time deadline = absl::Now() + absl::Seconds(flags.timeout_seconds);
  std::printf("scale-bench: %d jobs x (1 ps + %d workers) = %zu pods, %d controller workers, "
              "API server double in this process, %ld CPUs online\n",
              n, w, pods, flags.controller_workers, sysconf(_SC_NPROCESSORS_ONLN));
  std::fflush(stdout);

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

  // --- Warm-up: the controller creates every job's objects; the kubelet runs the pods. -------
  absl::Time warm_start = absl::Now();
  {
    std::unique_ptr<hptrain::kube::Client> client = NewClient(server);
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
  size_t services = server.List("services", kNs).size();
  size_t secrets = server.List("secrets", kNs).size();
  double rss_after_warmup = ProcStatusMiB("VmRSS");
  server.ClearRequestLog();

  // --- Measured: a fresh controller's initial sync. -------------------------------------------
  std::unique_ptr<hptrain::kube::Client> client = NewClient(server);
  hptrain::metrics::Registry registry;
  Controller controller(client.get(), Options(flags, &registry));
  absl::Time t0 = absl::Now();
  absl::Status started = controller.Start();
  if (!started.ok()) Fail("controller: " + std::string(started.message()));
  if (!controller.WaitForSync(deadline - absl::Now())) Fail("controller caches did not sync");
  double cache_sync_seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  absl::Time drained = WaitDrained(controller, n, deadline, "initial sync");
  double initial_sync_seconds = absl::ToDoubleSeconds(drained - t0);
  int64_t first_pass_reconciles = controller.reconciles();
  hptrain::metrics::HistogramSnapshot first = controller.metrics().reconcile_duration->Snapshot();

  // --- Second pass: an annotation on every job (update events, no spec change). -------------
  absl::Time t1 = absl::Now();
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<Json> mutated =
        server.Mutate("trainingjobs.hptrain.io", kNs, absl::StrCat("job-", i), [](Json* job) {
          (*job)["metadata"]["annotations"]["bench.hptrain.io/touched"] = "1";
        });
    if (!mutated.ok()) Fail("touch job: " + std::string(mutated.status().message()));
  }
  absl::Time drained2 =
      WaitDrained(controller, first_pass_reconciles + n, deadline, "second pass");
  double second_pass_seconds = absl::ToDoubleSeconds(drained2 - t1);
  hptrain::metrics::HistogramSnapshot second = controller.metrics().reconcile_duration->Snapshot();
  int64_t second_pass_reconciles = controller.reconciles() - first_pass_reconciles;
  double errors = controller.metrics().reconcile_errors->Value();
  controller.Stop();

  std::map<std::string, int> by_verb;
  for (const hptrain::testing::RequestRecord& record : server.RequestLog()) ++by_verb[record.verb];
  double peak_rss = ProcStatusMiB("VmHWM");
  double p50 = Quantile(first, nullptr, 0.50) * 1e3;
  double p99 = Quantile(first, nullptr, 0.99) * 1e3;
  double p50_2 = Quantile(second, &first, 0.50) * 1e3;
  double p99_2 = Quantile(second, &first, 0.99) * 1e3;
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 0) load[0] = -1;

  std::printf("warm-up (not measured): %.2f s; %zu pods, %zu services, %zu secrets\n",
              warm_seconds, server.List("pods", kNs).size(), services, secrets);
  std::printf("%-36s %12s   %s\n", "metric", "value", "target");
  std::printf("%-36s %12.3f\n", "cache sync (s)", cache_sync_seconds);
  std::printf("%-36s %12.3f\n", "initial sync, queue drained (s)", initial_sync_seconds);
  std::printf("%-36s %12lld\n", "initial pass reconciles", (long long)first_pass_reconciles);
  std::printf("%-36s %12.2f\n", "initial pass reconcile p50 (ms)", p50);
  std::printf("%-36s %12.2f   < 50\n", "initial pass reconcile p99 (ms)", p99);
  std::printf("%-36s %12.3f\n", "second pass, queue drained (s)", second_pass_seconds);
  std::printf("%-36s %12lld\n", "second pass reconciles", (long long)second_pass_reconciles);
  std::printf("%-36s %12.2f\n", "second pass reconcile p50 (ms)", p50_2);
  std::printf("%-36s %12.2f   < 50\n", "second pass reconcile p99 (ms)", p99_2);
  std::printf("%-36s %12.0f\n", "reconcile errors", errors);
  std::printf("%-36s %12.1f\n", "RSS after warm-up (MiB)", rss_after_warmup);
  std::printf("%-36s %12.1f   < 256 (double in-process)\n", "peak RSS, VmHWM (MiB)", peak_rss);
  std::printf("%-36s %12.2f\n", "load average (1 min) at end", load[0]);
  std::string verbs;
  for (const auto& [verb, count] : by_verb) verbs += absl::StrCat(" ", verb, "=", count);
  std::printf("double requests after warm-up by verb:%s\n", verbs.c_str());
  Json line = {{"jobs", n},
               {"pods", pods},
               {"initial_sync_seconds", initial_sync_seconds},
               {"reconcile_p50_ms", p50},
               {"reconcile_p99_ms", p99},
               {"second_pass_p99_ms", p99_2},
               {"peak_rss_mib", peak_rss},
               {"apiserver_double_in_process", true}};
  std::printf("%s\n", line.dump().c_str());
  server.CloseAllWatches();
  server.Stop();
  return 0;
}
