// hptrain-controller: flags and wiring only (controller/manager holds the loop).
//
//   1. Parse flags (flags.h); --help prints them. Bad flags: one line, exit 2.
//   2. Load the API server config (--kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config) and
//      build the client. Bad config: one line, exit 2.
//   3. Serve /metrics and /healthz + /readyz, start the controller (informers, then leader
//      election or the workers), report ready once the caches have synced.
//   4. SIGTERM / SIGINT: stop the controller (the lease is released), stop serving, exit 0.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "controller/kube/client.h"
#include "controller/kube/config.h"
#include "controller/kube/log.h"
#include "controller/manager/controller.h"
#include "controller/manager/endpoints.h"
#include "controller/webhook/admission.h"
#include "controller/webhook/webhook_server.h"
#include "controller/manager/flags.h"
#include "controller/manager/job_token.h"
#include "controller/promql/prometheus_client.h"
#include "runtime/base/exit_codes.h"
#include "runtime/metrics/registry.h"

namespace hptrain::manager {
namespace {

int Fail(const absl::Status& status, int exit_code) {
  std::string line = absl::StrReplaceAll(status.message(), {{"\n", " "}});
  std::fprintf(stderr, "%s: %s\n", kProgramName, line.c_str());
  std::fflush(stderr);
  return exit_code;
}

// The Lease holder name: the pod's name (or the host's) plus a random suffix, as client-go does,
// so that a restarted replica is a new candidate.
std::string Identity() {
  std::string base = ProcessEnv("POD_NAME").value_or("");
  if (base.empty()) {
    char host[256] = {};
    base = gethostname(host, sizeof(host) - 1) == 0 ? host : "hptrain-controller";
  }
  absl::StatusOr<std::string> suffix = NewJobToken();
  return suffix.ok() ? absl::StrCat(base, "_", suffix->substr(0, 12)) : base;
}

std::string Url(const std::optional<ListenAddress>& address, int port, const char* path) {
  if (!address.has_value()) return "disabled";
  bool v6 = address->host.find(':') != std::string::npos;
  return absl::StrCat("http://", v6 ? "[" : "", address->host, v6 ? "]" : "", ":", port, path);
}

int Run(int argc, char** argv, const sigset_t& signals) {
  absl::StatusOr<ControllerFlags> flags =
      ParseControllerFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!flags.ok()) return Fail(flags.status(), kExitBadInput);
  if (flags->help) {
    std::fputs(ControllerHelp().c_str(), stdout);
    return kExitOk;
  }
  // Both already checked by ParseControllerFlags.
  std::optional<ListenAddress> metrics_address =
      *ParseListenAddress("--metrics-address", flags->metrics_address);
  std::optional<ListenAddress> health_address =
      *ParseListenAddress("--health-address", flags->health_address);
  std::optional<ListenAddress> webhook_address =
      *ParseListenAddress("--webhook-address", flags->webhook_address);

  absl::StatusOr<kube::Config> config = kube::LoadDefaultConfig(flags->kubeconfig);
  if (!config.ok()) return Fail(config.status(), kExitBadInput);

  ControllerOptions options;
  options.namespaces = flags->namespaces;
  options.workers = flags->workers;
  options.reconcile.default_image.image = flags->default_image;
  options.reconcile.default_image.pull_policy = flags->default_image_pull_policy;
  options.reconcile.default_image.pull_secrets = flags->default_image_pull_secrets;
  if (flags->leader_elect) {
    kube::LeaderElectionConfig election;
    election.lease_name = flags->leader_election_id;
    election.lease_namespace = flags->leader_election_namespace;
    if (election.lease_namespace.empty()) {
      election.lease_namespace = ProcessEnv("POD_NAMESPACE").value_or(config->default_namespace);
    }
    election.identity = Identity();
    // A renewal must be able to fail and be retried within the renew deadline.
    config->timeout = std::min(config->timeout, election.renew_deadline / 2);
    options.leader_election = std::move(election);
  }
  absl::StatusOr<std::unique_ptr<kube::Client>> client = kube::Client::FromConfig(*config);
  if (!client.ok()) return Fail(client.status(), kExitBadInput);

  metrics::Registry registry;
  options.registry = &registry;
  Endpoints endpoints(&registry);
  if (absl::Status status = endpoints.Start(metrics_address, health_address); !status.ok()) {
    return Fail(status, ExitCodeFor(status));
  }
  std::unique_ptr<webhook::WebhookServer> webhook_server;
  if (webhook_address.has_value()) {
    webhook::WebhookServerOptions webhook_options;
    webhook_options.host = webhook_address->host;
    webhook_options.port = webhook_address->port;
    webhook_options.cert_file = flags->webhook_cert_dir + "/tls.crt";
    webhook_options.key_file = flags->webhook_cert_dir + "/tls.key";
    webhook_server = std::make_unique<webhook::WebhookServer>(std::move(webhook_options));
    if (absl::Status status = webhook_server->Start(); !status.ok()) {
      return Fail(status, ExitCodeFor(status));
    }
    kube::LogLine(absl::StrCat("admission webhook on https://", webhook_address->host, ":",
                               webhook_server->port(), webhook::kValidatePath));
  }
  // Worker readings for rebalancing: Prometheus when given, else each worker pod's /metrics.
  std::shared_ptr<promql::PrometheusClient> prometheus;
  if (!flags->prometheus_url.empty()) {
    promql::PrometheusOptions prometheus_options;
    prometheus_options.url = flags->prometheus_url;
    absl::StatusOr<std::unique_ptr<promql::PrometheusClient>> created =
        promql::PrometheusClient::Create(prometheus_options);
    if (!created.ok()) return Fail(created.status(), kExitBadInput);
    prometheus = *std::move(created);
  }
  options.worker_readings = [prometheus](const JobCaches* caches) {
    return prometheus != nullptr ? NewPrometheusReadings(prometheus)
                                 : NewScrapedReadings(caches, absl::Seconds(5));
  };
  Controller controller(client->get(), std::move(options));
  if (absl::Status status = controller.Start(); !status.ok()) {
    return Fail(status, ExitCodeFor(status));
  }
  kube::LogLine(absl::StrCat(
      "started against ", (*client)->config().server, " (", (*client)->config().source,
      "), namespaces: ", flags->namespaces.empty() ? "all" : absl::StrJoin(flags->namespaces, ","),
      ", leader election: ", flags->leader_elect ? "on" : "off"));
  kube::LogLine(absl::StrCat("metrics on ",
                             Url(metrics_address, endpoints.metrics_port(), "/metrics")));
  kube::LogLine(absl::StrCat("health on ", Url(health_address, endpoints.health_port(), "/healthz")));
  kube::LogLine(absl::StrCat("worker metrics for rebalancing from ",
                             controller.rebalance_loop()->Describe()));

  bool ready = false;
  while (true) {
    struct timespec wait = {0, 100 * 1000 * 1000};
    int signal = sigtimedwait(&signals, nullptr, &wait);
    if (signal == SIGTERM || signal == SIGINT) {
      kube::LogLine(absl::StrCat("received ", signal == SIGTERM ? "SIGTERM" : "SIGINT",
                                 ", shutting down"));
      break;
    }
    if (!ready && controller.HasSynced()) {
      ready = true;
      endpoints.SetReady(true);
      kube::LogLine("caches synced, ready");
    }
  }
  endpoints.SetReady(false);
  controller.Stop();
  if (webhook_server != nullptr) webhook_server->Stop();
  endpoints.Stop();
  kube::LogLine("stopped");
  return kExitOk;
}

}  // namespace
}  // namespace hptrain::manager

int main(int argc, char** argv) {
  // Blocked before any thread starts, so every thread inherits the mask and the signals wait
  // for sigtimedwait in the main loop instead of interrupting whatever thread they hit.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return hptrain::manager::Run(argc, argv, signals);
}
