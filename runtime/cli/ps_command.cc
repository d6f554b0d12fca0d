// hptrain ps: the job's coordinator process (and, for parameter-server strategies, the server).
// Serves until a Shutdown call, SIGTERM/SIGINT, or --linger seconds after every worker reported
// done (so the launcher or the controller can read the final status).
//
// For the strategies ps, hps and mp2 the process also serves one parameter-server shard
// (runtime/ps/param_store.h): shard 0 on the coordinator's port, in ps-0; shard s > 0 (--shard s)
// in a process of its own that serves only the shard and registers its address (--advertise)
// with the coordinator given by --coordinator. A shard process ends when the coordinator reports
// every worker done (after --linger) or stops answering for 30 s.
//
// There is no --resume (nor $HPTRAIN_RESUME) here: a ps starts empty either way, and on a resume
// worker rank 0 reads the checkpoint and re-initialises every shard from its "ps." sections.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/status.h"
#include "runtime/cli/commands.h"
#include "runtime/base/exit_codes.h"
#include "runtime/cli/flags.h"
#include "runtime/job/job_parser.h"
#include "runtime/job/job_validate.h"
#include "runtime/metrics/http_server.h"
#include "runtime/metrics/registry.h"
#include "runtime/ps/coordinator_client.h"
#include "runtime/ps/coordinator_server.h"
#include "runtime/ps/grpc_server.h"
#include "runtime/ps/mp2/job_options.h"
#include "runtime/ps/param_store.h"
#include "runtime/ps/ps_client.h"
#include "runtime/ps/ps_service.h"
#include "runtime/ps/tls_credentials.h"

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
  int shard = 0;
  std::string coordinator;  // shards > 0: the coordinator to register with
  std::string advertise;    // the address workers reach this shard on (default host:port)
  std::string tls_dir;      // spec.security.tls: ca.crt, tls.crt, tls.key
};

// The coordinator's view of the members (docs/elastic.md, docs/metrics.md): the membership
// epoch, how many workers train in it against how many the spec asks for, and the changes so far
// by reason. A job without spec.elastic stays in epoch 0 with every worker a member.
class MembershipMetrics {
 public:
  MembershipMetrics(metrics::Registry& registry, const job::JobSpec& spec)
      : world_size_(spec.WorldSize()),
        epoch_(registry
                   .Gauge("hptrain_membership_epoch",
                          "Membership epoch of the job: 0 at the start, one more at every "
                          "change of its members (spec.elastic).")
                   ->Get()),
        members_(registry
                     .Gauge("hptrain_membership_members",
                            "Workers that are members of the current membership epoch.")
                     ->Get()),
        changes_(registry.Counter("hptrain_membership_changes_total",
                                  "Membership changes by reason: joined, removed or lost.",
                                  {"reason"})) {
    registry
        .Gauge("hptrain_membership_replicas",
               "Workers the job's spec asks for (its replicas), the members it should have.")
        ->Get()
        ->Set(world_size_);
    for (const char* reason : {"joined", "removed", "lost"}) changes_->WithLabels({reason});
  }

  // Called with every snapshot; the counters add the changes not seen before.
  void Update(const hptrain::v1::JobStatus& status) {
    epoch_->Set(static_cast<double>(status.membership_epoch()));
    int members = status.members_size();
    if (members == 0) members = status.world_size() > 0 ? status.world_size() : world_size_;
    members_->Set(members);
    for (int i = counted_; i < status.membership_changes_size(); ++i) {
      changes_->WithLabels({status.membership_changes(i).reason()})->Inc();
    }
    counted_ = std::max(counted_, status.membership_changes_size());
  }

 private:
  const int world_size_;
  metrics::Gauge* epoch_;
  metrics::Gauge* members_;
  metrics::CounterFamily* changes_;
  int counted_ = 0;  // membership_changes already added to changes_
};

// hptrain_rpc_rejected_total{reason}: calls refused for their job token, by the coordinator or a
// shard; returns what the services call with "missing_token" or "bad_token".
std::function<void(const std::string&)> CountRefusedTokens(metrics::Registry& registry) {
  auto* rejected = registry.Counter("hptrain_rpc_rejected_total",
                                    "RPCs refused for a missing or wrong job token.", {"reason"});
  auto* missing_token = rejected->WithLabels({"missing_token"});
  auto* bad_token = rejected->WithLabels({"bad_token"});
  return [missing_token, bad_token](const std::string& reason) {
    (reason == "missing_token" ? missing_token : bad_token)->Inc();
  };
}

// The parameter-server shard of this process: its state, its gRPC service and its metrics.
struct Shard {
  std::shared_ptr<const ps::mp2::PredictorRunner> predictor;  // mp2; null: the zero change
  std::unique_ptr<ps::ParamStore> store;
  std::unique_ptr<ps::PsService> service;
  metrics::Counter* push_bytes = nullptr;
  metrics::Counter* pull_bytes = nullptr;
  metrics::Gauge* version = nullptr;
  int64_t pushed = 0;
  int64_t pulled = 0;

  // Brings the byte counters and the version gauge up to date.
  void UpdateMetrics() {
    const int64_t push = store->push_bytes(), pull = store->pull_bytes();
    push_bytes->Inc(static_cast<double>(push - pushed));
    pull_bytes->Inc(static_cast<double>(pull - pulled));
    pushed = push;
    pulled = pull;
    version->Set(static_cast<double>(store->version()));
  }
};

absl::StatusOr<Shard> MakeShard(const job::JobSpec& spec, const PsFlags& flags,
                                const std::string& token, metrics::Registry& registry,
                                const std::function<void(const std::string&)>& on_unauthenticated) {
  ps::ParamStoreConfig config;
  config.shard = flags.shard;
  // Elastic: rounds are of each membership epoch's workers, at most every slot's.
  config.world_size = spec.Slots();
  config.elastic = spec.elastic.enabled;
  config.global_batch = spec.global_batch_size;
  config.optimizer = spec.optimizer;
  // Pushes may run ahead of the model by the staleness bound: hps's (default 1), else none.
  config.max_lead = 0;
  if (spec.strategy.type == "hps") {
    config.max_lead = static_cast<int>(spec.strategy.Int("staleness"));
  }
  Shard shard;
  if (spec.strategy.type == "mp2") {
    HPTRAIN_ASSIGN_OR_RETURN(shard.predictor, ps::mp2::OpenPredictor(spec));
    ps::Mp2StoreConfig mp2;
    mp2.prediction = ps::mp2::PredictionOptionsFor(spec);
    // The shard's inference may use the cores its pod was given (spec.threads), one by default.
    mp2.prediction.threads = std::max(1, spec.threads);
    mp2.predictor = shard.predictor.get();
    config.mp2 = mp2;
  }
  shard.store = std::make_unique<ps::ParamStore>(config);
  auto* rejected = registry.Counter("hptrain_ps_pushes_rejected_total",
                                    "Parameter-server calls refused, by reason.", {"reason"});
  shard.store->set_on_rejected(
      [rejected](const std::string& reason) { rejected->WithLabels({reason})->Inc(); });
  auto* wait = registry.Histogram("hptrain_ps_aggregation_wait_seconds",
                                  "Time from a round's first push to its last.")->Get();
  shard.store->set_on_round([wait](double seconds) { wait->Observe(seconds); });
  if (config.mp2.has_value()) {
    auto* inference = registry.Histogram(
        "hptrain_mp2_inference_seconds",
        "mp2: time the shard's predictor took per round (every element of the predicted tensors).")
        ->Get();
    auto* predicted = registry.Counter("hptrain_mp2_predicted_elements_total",
                                       "mp2: parameters the shard predicted instead of receiving.")
                          ->Get();
    shard.store->set_on_prediction([inference, predicted](const ps::mp2::RoundStats& stats) {
      inference->Observe(stats.inference_seconds);
      predicted->Inc(static_cast<double>(stats.predicted));
    });
  }
  shard.push_bytes = registry.Counter("hptrain_ps_push_bytes_total",
                                      "Payload bytes of the gradients pushed to this shard.")->Get();
  shard.pull_bytes = registry.Counter("hptrain_ps_pull_bytes_total",
                                      "Payload bytes of the parameters pulled from this shard.")->Get();
  shard.version = registry.Gauge("hptrain_ps_model_version",
                                 "Model version of this shard: optimizer steps applied.")->Get();
  shard.service = std::make_unique<ps::PsService>(token, shard.store.get());
  shard.service->set_on_unauthenticated(on_unauthenticated);
  return shard;
}

// A shard s > 0: serves its parameters until the job is over.
absl::Status RunShard(const job::JobSpec& spec, const PsFlags& flags, const std::string& token) {
  if (flags.coordinator.empty()) {
    return absl::InvalidArgumentError(
        "--coordinator (or $HPTRAIN_COORDINATOR) is required for --shard above 0");
  }
  metrics::Registry registry(metrics::ProcessLabels(spec.name, "ps", flags.shard));
  HPTRAIN_ASSIGN_OR_RETURN(Shard shard,
                           MakeShard(spec, flags, token, registry, CountRefusedTokens(registry)));
  HPTRAIN_ASSIGN_OR_RETURN(
      ps::RunningServer server,
      ps::StartGrpcServer(flags.host, flags.port, {shard.service.get()}, "parameter server"));
  metrics::MetricsServer metrics_server(&registry);
  HPTRAIN_RETURN_IF_ERROR(metrics_server.Start(flags.metrics_host, flags.metrics_port));
  const std::string advertise =
      flags.advertise.empty() ? absl::StrCat(flags.host, ":", server.port) : flags.advertise;
  ps::CoordinatorClient client(flags.coordinator, token, std::chrono::seconds(5));
  HPTRAIN_RETURN_IF_ERROR(client.WaitUntilReachable(std::chrono::seconds(60)));
  HPTRAIN_RETURN_IF_ERROR(client.Set(ps::ShardAddressKey(flags.shard), advertise),
                          "registering parameter-server shard ", flags.shard);
  metrics_server.SetReady(true);
  if (!flags.port_file.empty()) {
    HPTRAIN_RETURN_IF_ERROR(WriteFileAtomically(
        flags.port_file, absl::StrCat(server.port, " ", metrics_server.port(), "\n")));
  }
  std::fprintf(stderr, "hptrain ps: parameter-server shard %d on %s, metrics on port %d\n",
               flags.shard, advertise.c_str(), metrics_server.port());
  // The shard lives as long as its coordinator: it stops once ps-0 has stopped answering for
  // 3 s (the job is over, or ps-0 failed, which the workers and the launcher report), or
  // --linger seconds after every worker reported done.
  using Clock = std::chrono::steady_clock;
  auto last_answer = Clock::now();
  auto finished_at = Clock::time_point::max();
  while (g_signal == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    shard.UpdateMetrics();
    absl::StatusOr<hptrain::v1::JobStatus> status = client.GetJobStatus();
    if (status.ok()) {
      last_answer = Clock::now();
      if (status->world_size() > 0 && status->done() + status->failed() >= status->world_size() &&
          finished_at == Clock::time_point::max()) {
        finished_at = Clock::now();
      }
    } else if (Clock::now() - last_answer > std::chrono::seconds(3)) {
      std::fprintf(stderr, "hptrain ps: shard %d stopping: coordinator %s gone (%s)\n",
                   flags.shard, flags.coordinator.c_str(),
                   std::string(status.status().message()).c_str());
      break;
    }
    if (Clock::now() - finished_at > std::chrono::seconds(flags.linger_s)) break;
  }
  shard.store->Shutdown();
  server.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  metrics_server.Stop();
  return absl::OkStatus();
}

absl::Status RunPs(const PsFlags& flags) {
  HPTRAIN_ASSIGN_OR_RETURN(job::JobSpec spec, job::ParseJobFile(flags.job_file, flags.overrides));
  HPTRAIN_ASSIGN_OR_RETURN(std::string token, ps::ReadTokenFile(flags.token_file));
  HPTRAIN_RETURN_IF_ERROR(
      ps::UseJobTls(spec.security.tls.enabled, spec.security.tls.mutual, flags.tls_dir));
  if (flags.shard < 0 || flags.shard >= spec.ps_shards) {
    return absl::InvalidArgumentError(absl::StrCat("--shard ", flags.shard,
                                                   " out of range: the job has ", spec.ps_shards,
                                                   " parameter-server shards (spec.ps.shards)"));
  }
  if (flags.shard > 0) return RunShard(spec, flags, token);

  metrics::Registry registry(metrics::ProcessLabels(spec.name, "ps", 0));
  const auto on_unauthenticated = CountRefusedTokens(registry);
  auto* registered = registry.Gauge("hptrain_workers_registered",
                                    "Workers that registered with the coordinator.")->Get();
  auto* done = registry.Gauge("hptrain_workers_done", "Workers that finished successfully.")->Get();
  auto* step = registry.Gauge("hptrain_step", "Highest global step any worker reported.")->Get();
  auto* generation = registry.Gauge("hptrain_allocation_generation",
                                    "Generation of the current batch allocation.")->Get();
  MembershipMetrics membership(registry, spec);

  ps::CoordinatorConfig config;
  config.job = spec.name;
  config.strategy = spec.strategy.type;
  config.token = token;
  config.groups = spec.SlotGroups();
  config.allocation = spec.InitialAllocation();
  config.global_batch = spec.global_batch_size;
  config.elastic = spec.elastic.enabled;
  config.initial_members = spec.WorldSize();
  if (spec.run_policy.peer_timeout_seconds > 0) {
    config.heartbeat_timeout = std::chrono::seconds(spec.run_policy.peer_timeout_seconds);
  }
  auto service = std::make_unique<ps::CoordinatorService>(config);
  service->set_on_rejected(on_unauthenticated);
  // Shard 0 of the parameter server shares the coordinator's port.
  std::optional<Shard> shard;
  std::vector<grpc::Service*> extra;
  if (job::UsesParameterServer(spec.strategy.type)) {
    HPTRAIN_ASSIGN_OR_RETURN(Shard made,
                             MakeShard(spec, flags, token, registry, on_unauthenticated));
    shard.emplace(std::move(made));
    extra.push_back(shard->service.get());
  }
  HPTRAIN_ASSIGN_OR_RETURN(auto server, ps::CoordinatorServer::Start(flags.host, flags.port,
                                                                     std::move(service), extra));
  if (shard) {
    server->service().SetKey(ps::ShardAddressKey(0),
                             flags.advertise.empty()
                                 ? absl::StrCat(flags.host, ":", server->port())
                                 : flags.advertise);
  }
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
    server->service().ExpireSilentMembers();
    hptrain::v1::JobStatus status = server->service().Snapshot();
    registered->Set(status.registered());
    done->Set(status.done());
    int64_t highest = 0;
    for (const auto& r : status.ranks()) highest = std::max<int64_t>(highest, r.step());
    step->Set(static_cast<double>(highest));
    generation->Set(static_cast<double>(status.allocation().generation()));
    membership.Update(status);
    if (shard) shard->UpdateMetrics();
    if (server->service().shutdown_requested()) break;
    if (finished && finished_at == std::chrono::steady_clock::time_point::max()) {
      finished_at = std::chrono::steady_clock::now();
    }
    if (std::chrono::steady_clock::now() - finished_at > std::chrono::seconds(flags.linger_s)) {
      break;
    }
  }
  if (shard) shard->store->Shutdown();  // wakes pulls still waiting
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
  set.String("tls-dir", &flags.tls_dir, "HPTRAIN_TLS_DIR",
             "directory holding ca.crt, tls.crt and tls.key (spec.security.tls)");
  set.String("metrics-host", &flags.metrics_host, "HPTRAIN_METRICS_HOST",
             "address /metrics listens on (default 0.0.0.0)");
  set.Int("metrics-port", &flags.metrics_port, "HPTRAIN_METRICS_PORT",
          "port of /metrics, /healthz, /readyz (0 = any free port)");
  set.Int("linger", &flags.linger_s, "HPTRAIN_PS_LINGER",
          "seconds to keep serving after every worker is done (default 30)");
  set.Int("shard", &flags.shard, "HPTRAIN_PS_SHARD",
          "parameter-server shard this process serves (default 0: with the coordinator)");
  set.String("coordinator", &flags.coordinator, "HPTRAIN_COORDINATOR",
             "shards above 0: the job's coordinator (ps-0), to register with");
  set.String("advertise", &flags.advertise, "HPTRAIN_PS_ADVERTISE",
             "host:port workers reach this shard on (default --host and the bound port)");
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
