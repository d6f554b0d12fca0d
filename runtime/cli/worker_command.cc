// hptrain worker: one training process. Configured by flags or HPTRAIN_* environment variables
// (the controller sets the latter in pods). The sequence:
//   1. parse the job file; start /metrics, /healthz, /readyz;
//   2. reach the coordinator, register (rank, group, metrics address), read the allocation;
//   3. rendezvous with the other workers through the coordinator's KV store (Gloo TCP mesh) and,
//      for the parameter-server strategies, look the PS shards' addresses up there;
//   4. train, reporting progress to the coordinator and heartbeating in the background
//      (a coordinator-side stop request ends the run);
//   5. report done (or the failure) and exit.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/base/exit_codes.h"
#include "runtime/base/status.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/flags.h"
#include "runtime/cli/worker_device.h"
#include "runtime/cli/worker_metrics.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/topology.h"
#include "runtime/comm/gloo/gloo_transport.h"
#ifdef HPTRAIN_HAVE_NCCL
#include "runtime/comm/nccl/nccl_communicator.h"
#endif
#include "runtime/job/job_parser.h"
#include "runtime/job/job_validate.h"
#include "runtime/metrics/http_server.h"
#include "runtime/metrics/registry.h"
#include "runtime/ps/allocation_prefetcher.h"
#include "runtime/ps/coordinator_client.h"
#include "runtime/ps/progress_sender.h"
#include "runtime/ps/ps_client.h"
#include "runtime/ps/tls_credentials.h"
#include "runtime/sync/hierarchical.h"
#include "runtime/train/preflight.h"
#include "runtime/train/trainer.h"

namespace hptrain::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct WorkerFlags {
  std::string job_file;
  std::vector<std::string> overrides;
  std::string coordinator;
  int rank = -1;
  std::string group;
  std::string token_file;
  std::string metrics_host = "0.0.0.0";
  int metrics_port = 0;
  std::string bind_host = "127.0.0.1";
  std::string node_name;  // the node this worker runs on (docs/algorithms.md §2); "" = unknown
  int rendezvous_timeout_s = 120;
  bool resume = false;
  int workers_on_host = 1;  // a pod holds one worker; `hptrain run` passes the world size
  int local_rank = -1;      // index among the host's workers; -1: rank mod workers_on_host
  std::string tls_dir;      // spec.security.tls: ca.crt, tls.crt, tls.key
};

// $HPTRAIN_RESUME, "1"/"true" or "0"/"false": --resume for pods, which the controller can only
// configure through the environment (it sets it on every gang after the first). FlagSet's
// booleans read no environment variable, so this is read before the command line, which then
// overrides it.
absl::Status ResumeFromEnvironment(bool* resume) {
  const char* value = std::getenv("HPTRAIN_RESUME");
  if (value == nullptr || *value == '\0') return absl::OkStatus();
  const std::string text = value;
  if (text == "1" || text == "true") {
    *resume = true;
  } else if (text == "0" || text == "false") {
    *resume = false;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("$HPTRAIN_RESUME: expected 1, true, 0 or false, got \"", text, "\""));
  }
  return absl::OkStatus();
}

// Heartbeats every second; remembers a stop request or a coordinator that stays unreachable.
class Heartbeat {
 public:
  Heartbeat(ps::CoordinatorClient& client, int rank) : client_(client), rank_(rank) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  bool stop_requested() const { return stop_.load(); }
  std::string reason() {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }

 private:
  void Loop() {
    auto last_ok = Clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      cv_.wait_for(lock, std::chrono::seconds(1));
      if (done_) break;
      lock.unlock();
      auto response = client_.Heartbeat(rank_);
      lock.lock();
      if (response.ok()) {
        last_ok = Clock::now();
        if (response->stop()) {
          reason_ = response->stop_reason();
          stop_ = true;
        }
      } else if (Clock::now() - last_ok > std::chrono::seconds(30)) {
        reason_ = absl::StrCat("coordinator unreachable for 30 s: ", response.status().message());
        stop_ = true;
      }
    }
  }

  ps::CoordinatorClient& client_;
  int rank_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::string reason_;
  bool done_ = false;
  std::thread thread_;
};

absl::Status RunWorker(const WorkerFlags& flags) {
  HPTRAIN_ASSIGN_OR_RETURN(job::JobSpec spec, job::ParseJobFile(flags.job_file, flags.overrides));
  const int world = spec.WorldSize();
  if (flags.rank < 0 || flags.rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank ", flags.rank, " out of range: the job has ", world, " workers"));
  }
  const std::string group = spec.RankGroups()[flags.rank];
  if (!flags.group.empty() && flags.group != group) {
    return absl::InvalidArgumentError(absl::StrCat("--group ", flags.group, " does not match rank ",
                                                   flags.rank, "'s group ", group));
  }
  if (flags.coordinator.empty()) {
    return absl::InvalidArgumentError("--coordinator (or $HPTRAIN_COORDINATOR) is required");
  }
  if (flags.workers_on_host < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers-on-host must be at least 1, got ", flags.workers_on_host));
  }
  HPTRAIN_ASSIGN_OR_RETURN(std::string token, ps::ReadTokenFile(flags.token_file));
  HPTRAIN_RETURN_IF_ERROR(
      ps::UseJobTls(spec.security.tls.enabled, spec.security.tls.mutual, flags.tls_dir));

  metrics::Registry registry(
      {{"job", spec.name}, {"role", "worker"}, {"rank", std::to_string(flags.rank)}});
  WorkerMetrics worker_metrics(registry);
  metrics::MetricsServer server(&registry);
  HPTRAIN_RETURN_IF_ERROR(server.Start(flags.metrics_host, flags.metrics_port));

  ps::CoordinatorClient client(flags.coordinator, token);
  HPTRAIN_RETURN_IF_ERROR(client.WaitUntilReachable(std::chrono::seconds(30)));
  hptrain::v1::RegisterRequest registration;
  registration.set_rank(flags.rank);
  registration.set_group(group);
  registration.set_metrics_address(absl::StrCat(flags.bind_host, ":", server.port()));
  char hostname[256] = {0};
  gethostname(hostname, sizeof(hostname) - 1);
  registration.set_hostname(hostname);
  registration.set_pid(getpid());
  registration.set_node_name(flags.node_name);
  HPTRAIN_RETURN_IF_ERROR(client.Register(registration).status());
  HPTRAIN_ASSIGN_OR_RETURN(hptrain::v1::Allocation allocation, client.GetAllocation());

  // Where this worker trains, and the check that every worker of the job chose alike.
#ifdef HPTRAIN_HAVE_NCCL
  constexpr bool kNcclBuilt = true;
#else
  constexpr bool kNcclBuilt = false;
#endif
  const int local_rank =
      flags.local_rank >= 0 ? flags.local_rank : flags.rank % flags.workers_on_host;
  HPTRAIN_ASSIGN_OR_RETURN(
      WorkerDevice device,
      ChooseWorkerDevice(spec, local_rank, flags.workers_on_host, train::VisibleCudaDevices(),
                         kNcclBuilt));
  HPTRAIN_RETURN_IF_ERROR(CheckSameDevice(client, flags.rank, world, device,
                                          std::chrono::seconds(flags.rendezvous_timeout_s)));
  if (device.kind == "cuda") {
    std::fprintf(stderr, "hptrain worker %d: training on %s, exchanging over %s\n", flags.rank,
                 device.device.c_str(), device.backend.c_str());
    worker_metrics.EnableGpu(device.cuda_index);
  }

  comm::GlooOptions gloo;
  gloo.bind_host = flags.bind_host;
  gloo.timeout = std::chrono::seconds(flags.rendezvous_timeout_s);
  // A hung or cut-off peer (spec.runPolicy.peerTimeoutSeconds) fails this worker within the limit.
  if (spec.run_policy.peer_timeout_seconds > 0) {
    gloo.timeout = std::chrono::seconds(spec.run_policy.peer_timeout_seconds);
  }
  HPTRAIN_ASSIGN_OR_RETURN(auto transport,
                           comm::GlooTransport::Connect(client, flags.rank, world, gloo));
  // The workers' nodes: spec.topology, else the node names the coordinator published (every
  // worker of a job has one or none). They pick the hierarchical all-reduce and split the bytes.
  std::optional<comm::Topology> named;
  if (!spec.topology.set() && !flags.node_name.empty()) {
    HPTRAIN_ASSIGN_OR_RETURN(
        named, comm::TopologyFromStore(client, world,
                                       std::chrono::seconds(flags.rendezvous_timeout_s)));
  }
  HPTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> job_communicator,
                           sync::MakeJobCommunicator(spec, std::move(transport), named));
  comm::Communicator& communicator = *job_communicator;
  // The gradients' communicator on nccl (device buffers); Gloo keeps everything else.
  std::unique_ptr<comm::Communicator> device_communicator;
  if (device.backend == "nccl") {
#ifdef HPTRAIN_HAVE_NCCL
    auto nccl = comm::NcclCommunicator::Create(client, flags.rank, world, device.cuda_index,
                                               gloo.timeout, "nccl");
    if (!nccl.ok()) return Annotate(nccl.status(), "spec.communicator.backend: nccl");
    device_communicator = *std::move(nccl);
#else
    return absl::FailedPreconditionError(
        "spec.communicator.backend: nccl, but this build has no NCCL");
#endif
  }
  std::unique_ptr<ps::PsClient> ps_client;
  if (job::UsesParameterServer(spec.strategy.type)) {
    HPTRAIN_ASSIGN_OR_RETURN(
        ps_client, ps::PsClient::Discover(client, spec.ps_shards, token,
                                          std::chrono::seconds(flags.rendezvous_timeout_s)));
  }
  // Everything this worker put on and took off the network: collectives and the PS.
  auto bytes_sent = [&] {
    return communicator.bytes_sent() + (ps_client ? ps_client->bytes_sent() : 0) +
           (device_communicator ? device_communicator->bytes_sent() : 0);
  };
  auto bytes_received = [&] {
    return communicator.bytes_received() + (ps_client ? ps_client->bytes_received() : 0) +
           (device_communicator ? device_communicator->bytes_received() : 0);
  };

  Heartbeat heartbeat(client, flags.rank);
  train::TrainerOptions options;
  options.rank = flags.rank;
  options.allocation.assign(allocation.batch_sizes().begin(), allocation.batch_sizes().end());
  options.resume = flags.resume;
  options.workers_on_host = flags.workers_on_host;
  options.ps = ps_client.get();
  options.device = device.device;
  options.device_comm = device_communicator.get();
  options.device_path_on_cpu = spec.testing.device_path;

  auto last_report = Clock::now() - std::chrono::seconds(1);
  double compute_total = 0, comm_total = 0, exposed_total = 0, train_total = 0;
  int64_t exchanges = 0;
  hptrain::v1::ProgressReport report;
  // Reports go out from a background thread: a round trip must not delay the next step.
  ps::ProgressSender sender(
      [&client](const hptrain::v1::ProgressReport& r) { return client.ReportProgress(r); });
  auto send_report = [&] {
    report.set_bytes_sent(bytes_sent());
    report.set_bytes_received(bytes_received());
    if (ps_client) {
      report.set_ps_bytes_sent(ps_client->bytes_sent());
      report.set_ps_bytes_received(ps_client->bytes_received());
    }
    report.set_compute_seconds(compute_total);
    report.set_comm_seconds(comm_total);
    report.set_exposed_comm_seconds(exposed_total);
    report.set_train_seconds(train_total);
    report.set_exchanges(exchanges);
    sender.Offer(report);
  };
  auto record_node_bytes = [&] {
    worker_metrics.OnNodeBytes(communicator.bytes_sent() - communicator.inter_node_bytes_sent(),
                               communicator.bytes_received() -
                                   communicator.inter_node_bytes_received(),
                               communicator.inter_node_bytes_sent(),
                               communicator.inter_node_bytes_received());
  };
  train::TrainerCallbacks callbacks;
  callbacks.on_step = [&](const train::StepStats& stats) {
    compute_total += stats.compute_seconds;
    comm_total += stats.comm_seconds;
    exposed_total += stats.exposed_comm_seconds;
    train_total += stats.step_seconds;
    exchanges = stats.exchanges;
    worker_metrics.OnStep(stats, bytes_sent(), bytes_received());
    record_node_bytes();
    const bool last = stats.step == stats.total_steps;
    // The launcher's balancer (spec.rebalance) measures speeds from these reports: more often then.
    const auto period = std::chrono::milliseconds(spec.rebalance.enabled ? 200 : 500);
    if (!last && Clock::now() - last_report < period) return;
    last_report = Clock::now();
    report.set_rank(flags.rank);
    report.set_step(stats.step);
    report.set_epoch(stats.epoch);
    report.set_steps_per_epoch(stats.steps_per_epoch);
    report.set_train_loss(stats.train_loss);
    report.set_samples_per_second(stats.step_seconds > 0 ? stats.batch_size / stats.step_seconds
                                                         : 0);
    report.set_batch_size(stats.batch_size);
    send_report();
  };
  callbacks.on_resumed = [&](int64_t step) {
    worker_metrics.SetResumedFromStep(step);
    std::fprintf(stderr, "hptrain worker %d: resuming from step %lld%s\n", flags.rank,
                 static_cast<long long>(step), step == 0 ? " (no checkpoint yet)" : "");
  };
  callbacks.on_epoch = [&](const train::EpochStats& stats) {
    worker_metrics.OnEpoch(stats);
    if (flags.rank != 0) return;
    hptrain::v1::EpochReport report;
    report.set_epoch(stats.epoch);
    report.set_test_accuracy(stats.test_accuracy);
    report.set_test_loss(stats.test_loss);
    report.set_train_loss(stats.train_loss);
    report.set_wall_seconds(stats.wall_seconds);
    report.set_step(stats.step);
    report.set_epochs_done(stats.epochs_done);
    report.set_interim(stats.interim);
    for (double accuracy : stats.worker_test_accuracy) report.add_worker_test_accuracy(accuracy);
    report.set_end_unix_seconds(
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    (void)client.ReportEpoch(report);
  };
  callbacks.should_stop = [&] { return heartbeat.stop_requested(); };
  // Every step's allocation is asked for (one step ahead, off the step's critical path), so every
  // worker switches allocations at the same step boundary.
  ps::AllocationPrefetcher prefetcher([&client](int64_t step) -> absl::StatusOr<std::vector<int>> {
    HPTRAIN_ASSIGN_OR_RETURN(hptrain::v1::Allocation a, client.GetAllocation(step));
    return std::vector<int>(a.batch_sizes().begin(), a.batch_sizes().end());
  });
  if (spec.rebalance.enabled) {
    callbacks.allocation_for_step = [&](int64_t step) { return prefetcher.For(step); };
  }

  HPTRAIN_ASSIGN_OR_RETURN(auto trainer,
                           train::Trainer::Create(spec, options, &communicator, callbacks));
  const train::ThreadChoice& threads = trainer->threads();
  std::fprintf(stderr, "hptrain worker %d: %d libtorch thread%s (%s)\n", flags.rank,
               threads.threads, threads.threads == 1 ? "" : "s", threads.basis.c_str());
  worker_metrics.SetTorchThreads(threads.threads);
  server.SetReady(true);
  absl::Status status = trainer->Run();
  if (absl::IsCancelled(status)) {
    status = absl::AbortedError(absl::StrCat("stopped: ", heartbeat.reason()));
  }
  // Final progress (byte totals including the end-of-epoch collectives) and the outcome.
  record_node_bytes();
  if (report.step() > 0) send_report();
  sender.Flush();
  (void)client.ReportDone(flags.rank, status.ok(), std::string(status.message()));
  return status;
}

}  // namespace

int WorkerCommand(int argc, char** argv) {
  WorkerFlags flags;
  FlagSet set("worker", "--job JOB.yaml --coordinator HOST:PORT --rank N --token-file PATH");
  set.String("job", &flags.job_file, "HPTRAIN_JOB", "TrainingJob file");
  set.Repeated("set", &flags.overrides, "override a job field: path=value (repeatable)");
  set.String("coordinator", &flags.coordinator, "HPTRAIN_COORDINATOR",
             "address of the job's coordinator (hptrain ps)");
  set.Int("rank", &flags.rank, "HPTRAIN_RANK", "this worker's rank, 0-based, groups in order");
  set.String("group", &flags.group, "HPTRAIN_GROUP", "worker group (checked against the rank)");
  set.String("token-file", &flags.token_file, "HPTRAIN_TOKEN_FILE", "file holding the job token");
  set.String("tls-dir", &flags.tls_dir, "HPTRAIN_TLS_DIR",
             "directory holding ca.crt, tls.crt and tls.key (spec.security.tls)");
  set.String("metrics-host", &flags.metrics_host, "HPTRAIN_METRICS_HOST",
             "address /metrics listens on (default 0.0.0.0)");
  set.Int("metrics-port", &flags.metrics_port, "HPTRAIN_METRICS_PORT",
          "port of /metrics, /healthz, /readyz (0 = any free port)");
  set.String("node-name", &flags.node_name, "HPTRAIN_NODE_NAME",
             "the node this worker runs on; workers with equal names share a node");
  set.String("bind", &flags.bind_host, "HPTRAIN_BIND_HOST",
             "address peers reach this worker on (default 127.0.0.1)");
  set.Int("rendezvous-timeout", &flags.rendezvous_timeout_s, "HPTRAIN_RENDEZVOUS_TIMEOUT",
          "seconds to wait for all workers to join, and for one collective (default 120)");
  set.Bool("resume", &flags.resume,
           "continue from spec.checkpoint.path if it exists [$HPTRAIN_RESUME: 1 or true]");
  set.Int("local-rank", &flags.local_rank, "HPTRAIN_LOCAL_RANK",
          "this worker's index among its host's workers, which picks its GPU (default: rank "
          "mod --workers-on-host)");
  set.Int("workers-on-host", &flags.workers_on_host, "HPTRAIN_WORKERS_ON_HOST",
          "workers of the job sharing this host's CPUs, among which spec.threads 0 divides the "
          "CPU quota or cores (default 1, as in a pod)");
  // Before the command line, which overrides it; a bad value is reported after --help had its say.
  const absl::Status resume_from_env = ResumeFromEnvironment(&flags.resume);
  int exit_code = kExitOk;
  if (!set.ParseOrExit(argc, argv, &exit_code)) return exit_code;
  if (!resume_from_env.ok()) return ReportError("worker", resume_from_env);
  if (flags.job_file.empty()) {
    return ReportError("worker", absl::InvalidArgumentError("--job (or $HPTRAIN_JOB) is required"));
  }
  absl::Status status = RunWorker(flags);
  if (!status.ok()) return ReportError(absl::StrCat("worker ", flags.rank), status);
  return kExitOk;
}

}  // namespace hptrain::cli
