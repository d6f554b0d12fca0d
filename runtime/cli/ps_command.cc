// hptrain ps: the job's coordinator process (and, for parameter-server strategies, the server).
// Serves until a Shutdown call, SIGTERM/SIGINT, or --linger seconds after every worker reported
// done (so the launcher or the controller can read the final status).
#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/status.h"
#include "runtime/cli/commands.h"
#include "runtime/base/exit_codes.h"
#include "runtime/cli/flags.h"
#include "runtime/job/job_parser.h"
#include "runtime/metrics/http_server.h"
#include "runtime/metrics/registry.h"
#include "runtime/ps/coordinator_client.h"
#include "runtime/ps/coordinator_server.h"

namespace hptrain::cli {
namespace {

std::atomic<int> g_signal{0};
void OnSignal(int signo) { g_signal = signo; }

struct PsFlags {
  std::string job_file;
  std::vector<std::string> overrides;
  std::string host = "127.0.0.1";
  int port = 29400;
  std::string port_file;
  std::string token_file;
  std::string metrics_host = "0.0.0.0";
  int metrics_port = 0;
  int linger_s = 30;
};

absl::Status RunPs(const PsFlags& flags) {
  HPTRAIN_ASSIGN_OR_RETURN(job::JobSpec spec, job::ParseJobFile(flags.job_file, flags.overrides));
  HPTRAIN_ASSIGN_OR_RETURN(std::string token, ps::ReadTokenFile(flags.token_file));

  metrics::Registry registry({{"job", spec.name}, {"role", "ps"}, {"rank", "0"}});
  auto* rejected = registry.Counter("hptrain_rpc_rejected_total",
                                    "RPCs refused for a missing or wrong job token.", {"reason"});
  auto* missing_token = rejected->WithLabels({"missing_token"});
  auto* bad_token = rejected->WithLabels({"bad_token"});
  auto* registered = registry.Gauge("hptrain_workers_registered",
                                    "Workers that registered with the coordinator.")->Get();
  auto* done = registry.Gauge("hptrain_workers_done", "Workers that finished successfully.")->Get();
  auto* step = registry.Gauge("hptrain_step", "Highest global step any worker reported.")->Get();
  auto* generation = registry.Gauge("hptrain_allocation_generation",
                                    "Generation of the current batch allocation.")->Get();

  ps::CoordinatorConfig config;
  config.job = spec.name;
  config.strategy = spec.strategy.type;
  config.token = token;
  config.groups = spec.RankGroups();
  config.allocation = spec.InitialAllocation();
  config.global_batch = spec.global_batch_size;
  auto service = std::make_unique<ps::CoordinatorService>(config);
  service->set_on_rejected([&](const std::string& reason) {
    (reason == "missing_token" ? missing_token : bad_token)->Inc();
  });
  HPTRAIN_ASSIGN_OR_RETURN(auto server,
                           ps::CoordinatorServer::Start(flags.host, flags.port, std::move(service)));
  metrics::MetricsServer metrics_server(&registry);
  HPTRAIN_RETURN_IF_ERROR(metrics_server.Start(flags.metrics_host, flags.metrics_port));
  metrics_server.SetReady(true);
  if (!flags.port_file.empty()) {
    HPTRAIN_RETURN_IF_ERROR(WriteFileAtomically(
        flags.port_file, absl::StrCat(server->port(), " ", metrics_server.port(), "\n")));
  }
  std::fprintf(stderr, "hptrain ps: coordinator on %s:%d, metrics on port %d\n",
               flags.host.c_str(), server->port(), metrics_server.port());

  auto finished_at = std::chrono::steady_clock::time_point::max();
  while (g_signal == 0) {
    bool finished = server->service().WaitUntilFinished(std::chrono::milliseconds(200));
    hptrain::v1::JobStatus status = server->service().Snapshot();
    registered->Set(status.registered());
    done->Set(status.done());
    int64_t highest = 0;
    for (const auto& r : status.ranks()) highest = std::max<int64_t>(highest, r.step());
    step->Set(static_cast<double>(highest));
    generation->Set(static_cast<double>(status.allocation().generation()));
    if (server->service().shutdown_requested()) break;
    if (finished && finished_at == std::chrono::steady_clock::time_point::max()) {
      finished_at = std::chrono::steady_clock::now();
    }
    if (std::chrono::steady_clock::now() - finished_at > std::chrono::seconds(flags.linger_s)) {
      break;
    }
  }
  server->Stop();
  metrics_server.Stop();
  return absl::OkStatus();
}

}  // namespace

int PsCommand(int argc, char** argv) {
  PsFlags flags;
  FlagSet set("ps", "--job JOB.yaml --token-file PATH [--port N]");
  set.String("job", &flags.job_file, "HPTRAIN_JOB", "TrainingJob file");
  set.Repeated("set", &flags.overrides, "override a job field: path=value (repeatable)");
  set.String("host", &flags.host, "HPTRAIN_PS_HOST", "address to serve on (default 127.0.0.1)");
  set.Int("port", &flags.port, "HPTRAIN_PS_PORT", "coordinator port (default 29400; 0 = any)");
  set.String("port-file", &flags.port_file, "",
             "write \"<coordinator port> <metrics port>\" here once serving");
  set.String("token-file", &flags.token_file, "HPTRAIN_TOKEN_FILE", "file holding the job token");
  set.String("metrics-host", &flags.metrics_host, "HPTRAIN_METRICS_HOST",
             "address /metrics listens on (default 0.0.0.0)");
  set.Int("metrics-port", &flags.metrics_port, "HPTRAIN_METRICS_PORT",
          "port of /metrics, /healthz, /readyz (0 = any free port)");
  set.Int("linger", &flags.linger_s, "HPTRAIN_PS_LINGER",
          "seconds to keep serving after every worker is done (default 30)");
  int exit_code = kExitOk;
  if (!set.ParseOrExit(argc, argv, &exit_code)) return exit_code;
  if (flags.job_file.empty()) {
    return ReportError("ps", absl::InvalidArgumentError("--job (or $HPTRAIN_JOB) is required"));
  }
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  absl::Status status = RunPs(flags);
  if (!status.ok()) return ReportError("ps", status);
  return kExitOk;
}

}  // namespace hptrain::cli
