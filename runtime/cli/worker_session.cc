#include "runtime/cli/worker_session.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status.h"
#include "runtime/cli/flags.h"
#include "runtime/cli/worker_metrics.h"
#include "runtime/comm/gloo/gloo_transport.h"
#include "runtime/comm/topology.h"
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

namespace hptrain::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Heartbeats every second; remembers a stop request or a coordinator that stays unreachable, and
// (elastic jobs) whether an epoch newer than the worker's began with a loss, calling `on_lost`
// with it once for each such epoch.
class Heartbeat {
 public:
  Heartbeat(ps::CoordinatorClient& client, int rank, const std::atomic<int64_t>& epoch,
            std::function<void(int64_t lost_epoch)> on_lost)
      : client_(client), rank_(rank), epoch_(epoch), on_lost_(std::move(on_lost)) {
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
  // A newer epoch than the worker's began with a loss (as of the last heartbeat).
  bool membership_lost() const { return lost_epoch_.load() > epoch_.load(); }
  std::string reason() const {
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
      const int64_t epoch = epoch_.load();
      auto response = client_.Heartbeat(rank_, epoch);
      if (response.ok() && response->membership_lost() && response->lost_epoch() > epoch &&
          response->lost_epoch() > lost_epoch_.load()) {
        lost_epoch_ = response->lost_epoch();
        if (on_lost_) on_lost_(lost_epoch_.load());
      }
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
  const std::atomic<int64_t>& epoch_;
  std::function<void(int64_t)> on_lost_;
  std::atomic<int64_t> lost_epoch_{0};
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string reason_;
  bool done_ = false;
  std::thread thread_;
};

train::MembershipEpoch MembershipOf(const hptrain::v1::Allocation& allocation) {
  train::MembershipEpoch membership;
  membership.epoch = allocation.membership_epoch();
  membership.members.assign(allocation.members().begin(), allocation.members().end());
  membership.batch_sizes.assign(allocation.batch_sizes().begin(), allocation.batch_sizes().end());
  membership.lost = allocation.membership_reason() == "lost";
  return membership;
}

int RankIn(const std::vector<int>& members, int slot) {
  auto it = std::find(members.begin(), members.end(), slot);
  return it == members.end() ? -1 : static_cast<int>(it - members.begin());
}

}  // namespace

void DefineWorkerFlags(FlagSet& set, WorkerConfig* config) {
  set.String("job", &config->job_file, "HPTRAIN_JOB", "TrainingJob file");
  set.Repeated("set", &config->overrides,
               "override a job field: path=value (repeatable) [$HPTRAIN_SET: one per line]");
  set.String("coordinator", &config->coordinator, "HPTRAIN_COORDINATOR",
             "address of the job's coordinator (hptrain ps)");
  set.Int("rank", &config->rank, "HPTRAIN_RANK", "this worker's rank, 0-based, groups in order");
  set.String("group", &config->group, "HPTRAIN_GROUP", "worker group (checked against the rank)");
  set.String("token-file", &config->token_file, "HPTRAIN_TOKEN_FILE",
             "file holding the job token");
  set.String("tls-dir", &config->tls_dir, "HPTRAIN_TLS_DIR",
             "directory holding ca.crt, tls.crt and tls.key (spec.security.tls)");
  set.String("metrics-host", &config->metrics_host, "HPTRAIN_METRICS_HOST",
             "address /metrics listens on (default 0.0.0.0)");
  set.Int("metrics-port", &config->metrics_port, "HPTRAIN_METRICS_PORT",
          "port of /metrics, /healthz, /readyz (0 = any free port)");
  set.String("node-name", &config->node_name, "HPTRAIN_NODE_NAME",
             "the node this worker runs on; workers with equal names share a node");
  set.String("bind", &config->bind_host, "HPTRAIN_BIND_HOST",
             "address peers reach this worker on (default 127.0.0.1)");
  set.Int("rendezvous-timeout", &config->rendezvous_timeout_s, "HPTRAIN_RENDEZVOUS_TIMEOUT",
          "seconds to wait for all workers to join, and for one collective (default 120)");
  set.Bool("resume", &config->resume,
           "continue from spec.checkpoint.path if it exists [$HPTRAIN_RESUME: 1 or true]");
  set.Int("local-rank", &config->local_rank, "HPTRAIN_LOCAL_RANK",
          "this worker's index among its host's workers, which picks its GPU (default: rank "
          "mod --workers-on-host)");
  set.Int("workers-on-host", &config->workers_on_host, "HPTRAIN_WORKERS_ON_HOST",
          "workers of the job sharing this host's CPUs, among which spec.threads 0 divides the "
          "CPU quota or cores (default 1, as in a pod)");
}

// FlagSet's booleans read no environment variable, so this is read before the command line,
// which then overrides it.
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

void OverridesFromEnvironment(std::vector<std::string>* overrides) {
  const char* text = std::getenv("HPTRAIN_SET");
  if (text == nullptr) return;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    overrides->emplace_back(line);
  }
}

absl::StatusOr<WorkerConfig> WorkerConfigFromEnvironment(const std::string& caller) {
  for (const char* name :
       {"HPTRAIN_JOB", "HPTRAIN_COORDINATOR", "HPTRAIN_RANK", "HPTRAIN_TOKEN_FILE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
      return absl::FailedPreconditionError(absl::StrCat(
          caller, ": $", name,
          " is not set: run this program as a TrainingJob's spec.trainer, under `hptrain run` "
          "or on Kubernetes"));
    }
  }
  WorkerConfig config;
  FlagSet set("worker", "");
  DefineWorkerFlags(set, &config);
  char program[] = "hptrain-worker";
  char* argv[] = {program, nullptr};
  HPTRAIN_RETURN_IF_ERROR(set.Parse(1, argv), caller);
  HPTRAIN_RETURN_IF_ERROR(ResumeFromEnvironment(&config.resume), caller);
  OverridesFromEnvironment(&config.overrides);
  return config;
}

class WorkerSession::Impl {
 public:
  absl::Status Init(const WorkerConfig& config);
  // The communicators of membership epoch `epoch` (epoch 0: the job's start), as rank `rank` of
  // `members` (slots).
  absl::Status ConnectEpoch(int64_t epoch, int rank, const std::vector<int>& members);
  // Elastic jobs: TrainerCallbacks::regroup (docs/elastic.md).
  absl::StatusOr<train::EpochGroup> Regroup(const train::MembershipEpoch& target, bool after_loss);
  // Asks the coordinator for every step's membership, one step ahead.
  std::unique_ptr<ps::StepPrefetcher<train::MembershipEpoch>> MembershipPrefetcher() {
    ps::CoordinatorClient* client = client_.get();
    return std::make_unique<ps::StepPrefetcher<train::MembershipEpoch>>(
        [client](int64_t step) -> absl::StatusOr<train::MembershipEpoch> {
          HPTRAIN_ASSIGN_OR_RETURN(hptrain::v1::Allocation a, client->GetAllocation(step));
          return MembershipOf(a);
        });
  }
  // The newest epoch after `epoch` that began with a loss, if any.
  absl::StatusOr<std::optional<train::MembershipEpoch>> LossAfter(int64_t epoch);
  // Waits until every member of `target` has arrived at its rendezvous: true; false when a loss
  // superseded it meanwhile.
  absl::StatusOr<bool> WaitForMembers(const train::MembershipEpoch& target,
                                      Clock::time_point deadline);

  WorkerConfig config_;
  job::JobSpec spec_;
  int world_ = 0;
  int rank_ = 0;  // in the current membership epoch (the slot, config_.rank, for a static job)
  WorkerDevice device_;
  comm::GlooOptions gloo_;
  std::chrono::milliseconds timeout_{0};
  // Elastic jobs: the epoch of the communicators in use, the epoch a joiner joins, and the
  // membership of every step (asked one step ahead).
  std::atomic<int64_t> epoch_{0};
  std::optional<train::MembershipEpoch> joining_;
  std::unique_ptr<ps::StepPrefetcher<train::MembershipEpoch>> membership_prefetcher_;
  std::vector<int> allocation_;
  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<WorkerMetrics> metrics_;
  std::unique_ptr<metrics::MetricsServer> server_;
  std::unique_ptr<ps::CoordinatorClient> client_;
  std::unique_ptr<comm::Communicator> communicator_;
  std::unique_ptr<comm::Communicator> device_communicator_;
  std::unique_ptr<ps::PsClient> ps_client_;
  std::atomic<ps::PsClient*> ps_to_cancel_{nullptr};  // ps_client_, for the heartbeat's thread
  std::unique_ptr<Heartbeat> heartbeat_;
  std::unique_ptr<ps::ProgressSender> sender_;
  std::unique_ptr<ps::AllocationPrefetcher> prefetcher_;

  // Running totals of the progress reports.
  Clock::time_point last_report_ = Clock::now() - std::chrono::seconds(1);
  double compute_total_ = 0, comm_total_ = 0, exposed_total_ = 0, train_total_ = 0;
  int64_t exchanges_ = 0;
  double gossip_threshold_ = 0;
  std::string strategy_decision_;  // StepStats::strategy_decision of the last step
  hptrain::v1::ProgressReport report_;

  // The collectives' bytes, of every membership epoch's communicators so far: the host
  // communicator's sent and received, each in total and between nodes, and the device
  // communicator's (NCCL).
  struct CommBytes {
    int64_t sent = 0, received = 0, inter_sent = 0, inter_received = 0;
    int64_t device_sent = 0, device_received = 0;
  };
  CommBytes released_;  // of the communicators of earlier epochs
  CommBytes comm_bytes() const {
    CommBytes b = released_;
    if (const comm::Communicator* c = communicator_.get()) {
      b.sent += c->bytes_sent();
      b.received += c->bytes_received();
      b.inter_sent += c->inter_node_bytes_sent();
      b.inter_received += c->inter_node_bytes_received();
    }
    if (const comm::Communicator* d = device_communicator_.get()) {
      b.device_sent += d->bytes_sent();
      b.device_received += d->bytes_received();
    }
    return b;
  }
  // Closes the communicators of the epoch being left, keeping their byte counts.
  void ReleaseCommunicators() {
    released_ = comm_bytes();
    device_communicator_.reset();
    communicator_.reset();
  }
  // Everything this worker put on and took off the network: collectives and the PS.
  int64_t bytes_sent() const {
    const CommBytes b = comm_bytes();
    return b.sent + b.device_sent + (ps_client_ ? ps_client_->bytes_sent() : 0);
  }
  int64_t bytes_received() const {
    const CommBytes b = comm_bytes();
    return b.received + b.device_received + (ps_client_ ? ps_client_->bytes_received() : 0);
  }
  void SendReport();
  void RecordNodeBytes();
  void OnStep(const train::StepStats& stats);
  void OnEpoch(const train::EpochStats& stats);
};

absl::Status WorkerSession::Impl::Init(const WorkerConfig& config) {
  config_ = config;
  HPTRAIN_ASSIGN_OR_RETURN(spec_, job::ParseJobFile(config.job_file, config.overrides));
  world_ = spec_.WorldSize();
  rank_ = config.rank;
  if (config.rank < 0 || config.rank >= spec_.Slots()) {
    return absl::InvalidArgumentError(absl::StrCat("--rank ", config.rank,
                                                   " out of range: the job has ", spec_.Slots(),
                                                   spec_.elastic.enabled ? " worker slots"
                                                                         : " workers"));
  }
  const std::string group = spec_.SlotGroups()[config.rank];
  if (!config.group.empty() && config.group != group) {
    return absl::InvalidArgumentError(absl::StrCat("--group ", config.group,
                                                   " does not match rank ", config.rank,
                                                   "'s group ", group));
  }
  if (config.coordinator.empty()) {
    return absl::InvalidArgumentError("--coordinator (or $HPTRAIN_COORDINATOR) is required");
  }
  if (config.workers_on_host < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers-on-host must be at least 1, got ", config.workers_on_host));
  }
  HPTRAIN_ASSIGN_OR_RETURN(std::string token, ps::ReadTokenFile(config.token_file));
  HPTRAIN_RETURN_IF_ERROR(
      ps::UseJobTls(spec_.security.tls.enabled, spec_.security.tls.mutual, config.tls_dir));

  registry_ = std::make_unique<metrics::Registry>(
      metrics::ProcessLabels(spec_.name, "worker", config.rank));
  metrics_ = std::make_unique<WorkerMetrics>(*registry_);
  server_ = std::make_unique<metrics::MetricsServer>(registry_.get());
  HPTRAIN_RETURN_IF_ERROR(server_->Start(config.metrics_host, config.metrics_port));

  client_ = std::make_unique<ps::CoordinatorClient>(config.coordinator, token);
  ps::CoordinatorClient& client = *client_;
  HPTRAIN_RETURN_IF_ERROR(client.WaitUntilReachable(std::chrono::seconds(30)));
  hptrain::v1::RegisterRequest registration;
  registration.set_rank(config.rank);
  registration.set_group(group);
  registration.set_metrics_address(absl::StrCat(config.bind_host, ":", server_->port()));
  char hostname[256] = {0};
  gethostname(hostname, sizeof(hostname) - 1);
  registration.set_hostname(hostname);
  registration.set_pid(getpid());
  registration.set_node_name(config.node_name);
  HPTRAIN_ASSIGN_OR_RETURN(hptrain::v1::RegisterResponse registered, client.Register(registration));
  HPTRAIN_ASSIGN_OR_RETURN(hptrain::v1::Allocation allocation, client.GetAllocation());
  allocation_.assign(allocation.batch_sizes().begin(), allocation.batch_sizes().end());
  if (registered.joining()) {
    // A worker joining a running elastic job: its communicators and its state come when the
    // members switch to the epoch it joins (Regroup).
    joining_ = MembershipOf(registered.allocation());
    allocation_ = joining_->batch_sizes;
    rank_ = RankIn(joining_->members, config.rank);
    world_ = static_cast<int>(joining_->members.size());
    std::fprintf(stderr, "hptrain worker %d: joining the job in membership epoch %lld\n",
                 config.rank, static_cast<long long>(joining_->epoch));
  }

  // Where this worker trains, and the check that every worker of the job chose alike.
#ifdef HPTRAIN_HAVE_NCCL
  constexpr bool kNcclBuilt = true;
#else
  constexpr bool kNcclBuilt = false;
#endif
  const int local_rank =
      config.local_rank >= 0 ? config.local_rank : config.rank % config.workers_on_host;
  HPTRAIN_ASSIGN_OR_RETURN(device_, ChooseWorkerDevice(spec_, local_rank, config.workers_on_host,
                                                       train::VisibleCudaDevices(), kNcclBuilt,
                                                       train::CudaBuilt()));
  const auto timeout = std::chrono::seconds(config.rendezvous_timeout_s);
  timeout_ = timeout;
  // A joiner's device was checked against nobody, nor are an elastic job's (its members may
  // never all be there).
  if (!spec_.elastic.enabled) {
    HPTRAIN_RETURN_IF_ERROR(CheckSameDevice(client, config.rank, world_, device_, timeout));
  }
  if (device_.kind == "cuda") {
    std::fprintf(stderr, "hptrain worker %d: training on %s, exchanging over %s\n", config.rank,
                 device_.device.c_str(), device_.backend.c_str());
    metrics_->EnableGpu(device_.cuda_index);
  }

  gloo_.bind_host = config.bind_host;
  gloo_.timeout = timeout;
  // A hung or cut-off peer (spec.runPolicy.peerTimeoutSeconds) fails this worker within the limit.
  if (spec_.run_policy.peer_timeout_seconds > 0) {
    gloo_.timeout = std::chrono::seconds(spec_.run_policy.peer_timeout_seconds);
  }
  if (spec_.elastic.enabled) {
    // Before the rendezvous, which waits for the other members: a member that does not heartbeat
    // meanwhile is taken for lost.
    heartbeat_ = std::make_unique<Heartbeat>(client, config.rank, epoch_, [this](int64_t lost) {
      // The parameter-server calls of the epoch being left may wait for pushes that never come
      // (not those of an epoch the trainer has moved on to meanwhile).
      ps::PsClient* ps = ps_to_cancel_.load();
      if (ps != nullptr && ps->membership_epoch() < lost) ps->CancelPending();
    });
  }
  if (!joining_) {
    std::vector<int> members;
    for (int r = 0; r < world_; ++r) members.push_back(r);
    if (spec_.elastic.enabled) {
      // The first epoch forms like any other: the one in force at step 0 (a member lost before it
      // formed drops out of it; a planned change comes later).
      HPTRAIN_ASSIGN_OR_RETURN(hptrain::v1::Allocation first, client.GetAllocation(0));
      HPTRAIN_ASSIGN_OR_RETURN(train::EpochGroup group, Regroup(MembershipOf(first), false));
      if (group.left) {
        return absl::UnavailableError(
            "this worker was taken for lost before the job's first membership epoch formed");
      }
      allocation_ = group.membership.batch_sizes;
    } else {
      HPTRAIN_RETURN_IF_ERROR(ConnectEpoch(0, config.rank, members));
    }
  }
  if (job::UsesParameterServer(spec_.strategy.type)) {
    HPTRAIN_ASSIGN_OR_RETURN(ps_client_,
                             ps::PsClient::Discover(client, spec_.ps_shards, token, timeout));
    ps_to_cancel_ = ps_client_.get();
  }
  if (!heartbeat_) heartbeat_ = std::make_unique<Heartbeat>(client, config.rank, epoch_, nullptr);
  if (spec_.elastic.enabled) {
    membership_prefetcher_ = MembershipPrefetcher();
  }
  // Reports go out from a background thread: a round trip must not delay the next step.
  sender_ = std::make_unique<ps::ProgressSender>(
      [&client](const hptrain::v1::ProgressReport& r) { return client.ReportProgress(r); });
  // Every step's allocation is asked for (one step ahead, off the step's critical path), so
  // every worker switches allocations at the same step boundary.
  prefetcher_ = std::make_unique<ps::AllocationPrefetcher>(
      [&client](int64_t step) -> absl::StatusOr<std::vector<int>> {
        HPTRAIN_ASSIGN_OR_RETURN(hptrain::v1::Allocation a, client.GetAllocation(step));
        return std::vector<int>(a.batch_sizes().begin(), a.batch_sizes().end());
      });
  return absl::OkStatus();
}

absl::Status WorkerSession::Impl::ConnectEpoch(int64_t epoch, int rank,
                                               const std::vector<int>& members) {
  ps::CoordinatorClient& client = *client_;
  const int world = static_cast<int>(members.size());
  // Epoch 0 keeps the job's first keys; every later epoch rendezvous under keys of its own.
  comm::GlooOptions gloo = gloo_;
  const std::string suffix = epoch == 0 ? "" : absl::StrCat("/e", epoch);
  gloo.store_prefix += suffix;
  HPTRAIN_ASSIGN_OR_RETURN(auto transport, comm::GlooTransport::Connect(client, rank, world, gloo));
  // The workers' nodes: spec.topology, else the node names the coordinator published (every
  // worker of a job has one or none). They pick the hierarchical all-reduce and split the bytes.
  std::optional<comm::Topology> named;
  if (!spec_.topology.set() && !config_.node_name.empty()) {
    HPTRAIN_ASSIGN_OR_RETURN(named, comm::TopologyFromStore(client, members, timeout_));
  }
  HPTRAIN_ASSIGN_OR_RETURN(communicator_,
                           sync::MakeJobCommunicator(spec_, std::move(transport), named));
  // The gradients' communicator on nccl (device buffers); Gloo keeps everything else.
  if (device_.backend == "nccl") {
#ifdef HPTRAIN_HAVE_NCCL
    auto nccl = comm::NcclCommunicator::Create(client, rank, world, device_.cuda_index,
                                               gloo.timeout, "nccl" + suffix);
    if (!nccl.ok()) return Annotate(nccl.status(), "spec.communicator.backend: nccl");
    device_communicator_ = *std::move(nccl);
#else
    return absl::FailedPreconditionError(
        "spec.communicator.backend: nccl, but this build has no NCCL");
#endif
  }
  world_ = world;
  rank_ = rank;
  epoch_ = epoch;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<train::MembershipEpoch>> WorkerSession::Impl::LossAfter(
    int64_t epoch) {
  HPTRAIN_ASSIGN_OR_RETURN(hptrain::v1::JobStatus status, client_->GetJobStatus());
  std::optional<train::MembershipEpoch> loss;
  for (const hptrain::v1::MembershipChange& change : status.membership_changes()) {
    if (change.epoch() <= epoch || change.reason() != "lost") continue;
    train::MembershipEpoch m;
    m.epoch = change.epoch();
    m.members.assign(change.members().begin(), change.members().end());
    m.batch_sizes =
        job::EvenAllocation(spec_.global_batch_size, static_cast<int>(m.members.size()));
    m.lost = true;
    loss = std::move(m);
  }
  return loss;
}

absl::StatusOr<bool> WorkerSession::Impl::WaitForMembers(const train::MembershipEpoch& target,
                                                         Clock::time_point deadline) {
  const std::string prefix = absl::StrCat("membership/e", target.epoch, "/");
  HPTRAIN_RETURN_IF_ERROR(client_->Set(prefix + std::to_string(config_.rank), "1"));
  std::vector<std::string> keys;
  for (int slot : target.members) keys.push_back(prefix + std::to_string(slot));
  while (Clock::now() < deadline) {
    absl::Status arrived = client_->Wait(keys, std::chrono::milliseconds(500));
    if (arrived.ok()) return true;
    if (!absl::IsDeadlineExceeded(arrived)) return arrived;
    HPTRAIN_ASSIGN_OR_RETURN(std::optional<train::MembershipEpoch> loss, LossAfter(target.epoch));
    if (loss.has_value()) return false;
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "membership epoch ", target.epoch, ": not every member arrived within ",
      spec_.elastic.join_timeout_seconds, " s (spec.elastic.joinTimeoutSeconds)"));
}

absl::StatusOr<train::EpochGroup> WorkerSession::Impl::Regroup(
    const train::MembershipEpoch& target, bool after_loss) {
  ReleaseCommunicators();
  // A membership prefetched before the change may be of an epoch that has ended since (a loss
  // replaces the coordinator's schedule): the new epoch asks afresh. Kept, a worker a step behind
  // the new rank 0 would take the stale answer for its first step and regroup into the ended epoch
  // again, on the rendezvous addresses of its first forming.
  if (membership_prefetcher_) membership_prefetcher_ = MembershipPrefetcher();
  const auto deadline = Clock::now() + std::chrono::seconds(spec_.elastic.join_timeout_seconds);
  train::MembershipEpoch want = target;
  // After a loss, and whenever a rendezvous fails, the epoch to form is the one the coordinator
  // begins without whoever vanished: newer than `loss_after`.
  std::optional<int64_t> loss_after;
  if (after_loss) loss_after = std::max(epoch_.load(), target.epoch - 1);
  while (true) {
    HPTRAIN_ASSIGN_OR_RETURN(std::optional<train::MembershipEpoch> loss,
                             LossAfter(loss_after.value_or(want.epoch)));
    if (loss.has_value()) {
      want = *std::move(loss);
      loss_after.reset();
    } else if (loss_after.has_value()) {
      if (Clock::now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "no new membership epoch within ", spec_.elastic.join_timeout_seconds,
            " s of a failed step (spec.elastic.joinTimeoutSeconds)"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    train::EpochGroup group;
    group.membership = want;
    group.rank = RankIn(want.members, config_.rank);
    if (group.rank < 0) {
      group.left = true;
      epoch_ = want.epoch;
      return group;
    }
    HPTRAIN_ASSIGN_OR_RETURN(bool arrived, WaitForMembers(want, deadline));
    if (!arrived) continue;  // a loss superseded it
    absl::Status connected = ConnectEpoch(want.epoch, group.rank, want.members);
    if (!connected.ok()) {
      std::fprintf(stderr, "hptrain worker %d: membership epoch %lld did not connect (%s)\n",
                   config_.rank, static_cast<long long>(want.epoch),
                   std::string(connected.message()).c_str());
      ReleaseCommunicators();
      loss_after = want.epoch;
      continue;
    }
    group.comm = communicator_.get();
    group.device_comm = device_communicator_.get();
    return group;
  }
}

void WorkerSession::Impl::SendReport() {
  report_.set_bytes_sent(bytes_sent());
  report_.set_bytes_received(bytes_received());
  if (ps_client_) {
    report_.set_ps_bytes_sent(ps_client_->bytes_sent());
    report_.set_ps_bytes_received(ps_client_->bytes_received());
  }
  report_.set_compute_seconds(compute_total_);
  report_.set_comm_seconds(comm_total_);
  report_.set_exposed_comm_seconds(exposed_total_);
  report_.set_train_seconds(train_total_);
  report_.set_exchanges(exchanges_);
  report_.set_gossip_threshold(gossip_threshold_);
  report_.set_strategy_decision(strategy_decision_);
  report_.set_membership_epoch(epoch_.load());
  sender_->Offer(report_);
}

void WorkerSession::Impl::RecordNodeBytes() {
  const CommBytes b = comm_bytes();
  metrics_->OnNodeBytes(b.sent - b.inter_sent, b.received - b.inter_received, b.inter_sent,
                        b.inter_received);
}

void WorkerSession::Impl::OnStep(const train::StepStats& stats) {
  compute_total_ += stats.compute_seconds;
  comm_total_ += stats.comm_seconds;
  exposed_total_ += stats.exposed_comm_seconds;
  train_total_ += stats.step_seconds;
  exchanges_ = stats.exchanges;
  gossip_threshold_ = stats.gossip_threshold;
  strategy_decision_ = stats.strategy_decision;
  metrics_->OnStep(stats, bytes_sent(), bytes_received());
  RecordNodeBytes();
  const bool last = stats.step == stats.total_steps;
  // The launcher's balancer (spec.rebalance) measures speeds from these reports: more often then.
  const auto period = std::chrono::milliseconds(spec_.rebalance.enabled ? 200 : 500);
  if (!last && Clock::now() - last_report_ < period) return;
  last_report_ = Clock::now();
  report_.set_rank(config_.rank);
  report_.set_step(stats.step);
  report_.set_epoch(stats.epoch);
  report_.set_steps_per_epoch(stats.steps_per_epoch);
  report_.set_train_loss(stats.train_loss);
  report_.set_samples_per_second(stats.step_seconds > 0 ? stats.batch_size / stats.step_seconds
                                                        : 0);
  report_.set_batch_size(stats.batch_size);
  SendReport();
}

void WorkerSession::Impl::OnEpoch(const train::EpochStats& stats) {
  metrics_->OnEpoch(stats);
  if (rank_ != 0) return;
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
  report.set_task(spec_.task);
  for (const auto& [name, value] : stats.metrics) {
    hptrain::v1::NamedMetric* metric = report.add_metrics();
    metric->set_name(name);
    metric->set_value(value);
  }
  report.set_end_unix_seconds(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  (void)client_->ReportEpoch(report);
}

WorkerSession::WorkerSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WorkerSession::~WorkerSession() = default;

absl::StatusOr<std::unique_ptr<WorkerSession>> WorkerSession::Create(const WorkerConfig& config) {
  auto impl = std::make_unique<Impl>();
  HPTRAIN_RETURN_IF_ERROR(impl->Init(config));
  return std::unique_ptr<WorkerSession>(new WorkerSession(std::move(impl)));
}

const job::JobSpec& WorkerSession::spec() const { return impl_->spec_; }
const WorkerConfig& WorkerSession::config() const { return impl_->config_; }
int WorkerSession::rank() const { return impl_->config_.rank; }
int WorkerSession::world() const { return impl_->world_; }
bool WorkerSession::joining() const { return impl_->joining_.has_value(); }
const WorkerDevice& WorkerSession::device() const { return impl_->device_; }
const std::vector<int>& WorkerSession::initial_allocation() const { return impl_->allocation_; }
comm::Communicator* WorkerSession::communicator() { return impl_->communicator_.get(); }

train::TrainerOptions WorkerSession::TrainerOptions() const {
  train::TrainerOptions options;
  options.rank = impl_->rank_;
  options.allocation = impl_->allocation_;
  options.elastic = impl_->spec_.elastic.enabled;
  options.membership_epoch = impl_->epoch_.load();
  options.slot = impl_->config_.rank;
  options.joining = impl_->joining_;
  options.resume = impl_->config_.resume;
  options.workers_on_host = impl_->config_.workers_on_host;
  options.ps = impl_->ps_client_.get();
  options.device = impl_->device_.device;
  options.device_comm = impl_->device_communicator_.get();
  options.device_path_on_cpu = impl_->spec_.testing.device_path;
  return options;
}

train::TrainerCallbacks WorkerSession::TrainerCallbacks() {
  Impl* impl = impl_.get();
  train::TrainerCallbacks callbacks;
  callbacks.on_step = [impl](const train::StepStats& stats) { impl->OnStep(stats); };
  callbacks.on_epoch = [impl](const train::EpochStats& stats) { impl->OnEpoch(stats); };
  callbacks.on_resumed = [impl](int64_t step) {
    impl->metrics_->SetResumedFromStep(step);
    std::fprintf(stderr, "hptrain worker %d: resuming from step %lld%s\n", impl->config_.rank,
                 static_cast<long long>(step), step == 0 ? " (no checkpoint yet)" : "");
  };
  callbacks.should_stop = [impl] { return impl->heartbeat_->stop_requested(); };
  if (impl->membership_prefetcher_) {
    callbacks.membership_for_step = [impl](int64_t step) {
      return impl->membership_prefetcher_->For(step);
    };
    callbacks.regroup = [impl](const train::MembershipEpoch& target, bool after_loss) {
      return impl->Regroup(target, after_loss);
    };
    callbacks.membership_lost = [impl] { return impl->heartbeat_->membership_lost(); };
    callbacks.on_membership_change = [impl](const train::MembershipChangeStats& change) {
      impl->metrics_->OnMembershipChange(change.epoch, change.seconds, change.dropped_values);
      std::fprintf(stderr,
                   "hptrain worker %d: membership epoch %lld: rank %d of %d from step %lld, "
                   "parameters %016llx (%s change, %.2f s)\n",
                   impl->config_.rank, static_cast<long long>(change.epoch), change.rank,
                   change.world, static_cast<long long>(change.step),
                   static_cast<unsigned long long>(change.parameters_hash),
                   change.planned ? "planned" : "unplanned", change.seconds);
    };
  } else if (impl->spec_.rebalance.enabled) {
    callbacks.allocation_for_step = [impl](int64_t step) { return impl->prefetcher_->For(step); };
  }
  return callbacks;
}

void WorkerSession::SetTorchThreads(int threads, const std::string& basis) {
  std::fprintf(stderr, "hptrain worker %d: %d libtorch thread%s (%s)\n", rank(), threads,
               threads == 1 ? "" : "s", basis.c_str());
  impl_->metrics_->SetTorchThreads(threads);
}

void WorkerSession::SetReady() { impl_->server_->SetReady(true); }
bool WorkerSession::stop_requested() const { return impl_->heartbeat_->stop_requested(); }
std::string WorkerSession::stop_reason() const { return impl_->heartbeat_->reason(); }

absl::Status WorkerSession::Finish(absl::Status status) {
  if (absl::IsCancelled(status)) {
    status = absl::AbortedError(absl::StrCat("stopped: ", stop_reason()));
  }
  // Final progress (byte totals including the end-of-epoch collectives) and the outcome.
  impl_->RecordNodeBytes();
  if (impl_->report_.step() > 0) impl_->SendReport();
  impl_->sender_->Flush();
  (void)impl_->client_->ReportDone(rank(), status.ok(), std::string(status.message()));
  return status;
}

}  // namespace hptrain::cli
