#include "controller/manager/controller.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "controller/kube/object_meta.h"
#include "controller/reconcile/labels.h"
#include "controller/kube/api_error.h"
#include "controller/kube/log.h"
#include "controller/manager/job_token.h"
#include "controller/reconcile/events.h"
#include "runtime/base/status.h"

namespace hptrain::manager {
namespace {

// How long an idle worker waits for a key before it looks at the stop flag again.
constexpr absl::Duration kWorkerPoll = absl::Milliseconds(100);
constexpr absl::Duration kSyncPoll = absl::Milliseconds(20);

kube::EventRecorderOptions RecorderOptions(const ControllerOptions& options) {
  kube::EventRecorderOptions events = options.events;
  if (events.instance.empty() && options.leader_election.has_value()) {
    events.instance = options.leader_election->identity;
  }
  return events;
}

JobCachesOptions CachesOptions(const ControllerOptions& options) {
  JobCachesOptions caches;
  caches.namespaces = options.namespaces;
  caches.watch_timeout_seconds = options.watch_timeout_seconds;
  caches.backoff = options.informer_backoff;
  caches.absent_kind_relist = options.absent_kind_relist;
  return caches;
}

// spec.elastic is present, and the job is not finished.
bool LiveElastic(const nlohmann::json& job) {
  const nlohmann::json* spec = reconcile::Find(job, {"spec"});
  if (spec == nullptr || !spec->is_object() || !spec->contains("elastic") ||
      !(*spec)["elastic"].is_object()) {
    return false;
  }
  const std::string phase = reconcile::StringAt(job, {"status", "phase"});
  return phase != "Succeeded" && phase != "Failed";
}

// The job token from the job's Secret in `observed`; "" when it is not there yet.
std::string TokenOf(const nlohmann::json& job, const reconcile::Observed& observed) {
  const std::string secret_name = reconcile::SecretName(kube::NameOf(job));
  for (const nlohmann::json& secret : observed.secrets) {
    if (kube::NameOf(secret) != secret_name) continue;
    std::string token;
    const std::string encoded =
        secret.value("data", nlohmann::json::object()).value("token", std::string());
    return absl::Base64Unescape(encoded, &token) ? token : "";
  }
  return "";
}

}  // namespace

Controller::Controller(kube::Client* client, ControllerOptions options)
    : client_(client),
      options_(std::move(options)),
      own_registry_(options_.registry == nullptr ? std::make_unique<metrics::Registry>()
                                                 : nullptr),
      registry_(options_.registry != nullptr ? options_.registry : own_registry_.get()),
      metrics_(registry_),
      queue_(std::move(options_.rate_limiter)),
      recorder_(client_, RecorderOptions(options_)),
      executor_(client_, &recorder_),
      caches_(client_, CachesOptions(options_), [this](const std::string& key) { Enqueue(key); }) {
  if (options_.membership == nullptr) {
    options_.membership =
        NewGrpcMembershipClient(options_.rebalance.coordinator_address,
                                options_.rebalance.rpc_timeout);
  }
  if (options_.worker_readings) {
    RebalanceLoopOptions rebalance = options_.rebalance;
    if (!rebalance.on_resumed) {
      rebalance.on_resumed = [this](const std::string& key) { Enqueue(key); };
    }
    if (!rebalance.on_status) {
      rebalance.on_status = [this](const std::string& key) { Enqueue(key); };
    }
    rebalance_ = std::make_unique<RebalanceLoop>(&caches_, options_.worker_readings(&caches_),
                                                 &executor_, metrics_.rebalances, rebalance);
  }
}

Controller::~Controller() { Stop(); }

absl::Status Controller::Start() {
  absl::MutexLock lock(&lifecycle_mu_);
  if (started_) return absl::FailedPreconditionError("the controller is already started");
  if (options_.workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("workers must be at least 1, got ", options_.workers));
  }
  if (options_.leader_election.has_value()) {
    kube::LeaderElectionConfig config = *options_.leader_election;
    config.on_started_leading = [this] { StartLeading(); };
    config.on_stopped_leading = [this] { StopLeading(); };
    elector_ = std::make_unique<kube::LeaderElector>(client_, std::move(config));
  }
  HPTRAIN_RETURN_IF_ERROR(caches_.Start());
  if (elector_ != nullptr) {
    absl::Status status = elector_->Start();
    if (!status.ok()) {
      caches_.Stop();
      elector_.reset();
      return status;
    }
  } else {
    StartLeading();
  }
  started_ = true;
  return absl::OkStatus();
}

void Controller::Stop() {
  absl::MutexLock lock(&lifecycle_mu_);
  if (!started_) return;
  // The elector calls StopLeading on its own thread before it releases the lease, so no other
  // replica starts while a pass of ours is still writing.
  if (elector_ != nullptr) elector_->Stop();
  StopLeading();
  caches_.Stop();
  recorder_.Flush(options_.event_flush_timeout);
  started_ = false;
}

void Controller::Enqueue(const std::string& key) {
  queue_.Add(key);
  metrics_.queue_depth->Set(static_cast<double>(queue_.Len()));
}

void Controller::StartLeading() {
  StartWorkers();
  leading_ = true;
  metrics_.is_leader->Set(1);
  if (rebalance_ != nullptr) rebalance_->Start();
  // Whatever changed while another replica led, every job is looked at once.
  for (const std::string& key : caches_.JobKeys()) Enqueue(key);
}

void Controller::StopLeading() {
  if (rebalance_ != nullptr) rebalance_->Stop();
  StopWorkers();
  leading_ = false;
  metrics_.is_leader->Set(0);
}

void Controller::StartWorkers() {
  absl::MutexLock lock(&workers_mu_);
  if (!workers_.empty()) return;
  workers_stop_ = false;
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

void Controller::StopWorkers() {
  absl::MutexLock lock(&workers_mu_);
  workers_stop_ = true;
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

void Controller::WorkerLoop() {
  while (!workers_stop_.load()) {
    // Decisions made from a half-listed cache would be wrong (pods that exist read as missing).
    if (!caches_.HasSynced()) {
      absl::SleepFor(kSyncPoll);
      continue;
    }
    std::optional<std::string> key = queue_.Get(kWorkerPoll);
    metrics_.queue_depth->Set(static_cast<double>(queue_.Len()));
    if (!key.has_value()) continue;
    Process(*key);
    queue_.Done(*key);
  }
}

void Controller::Process(const std::string& key) {
  absl::Time started = absl::Now();
  std::optional<absl::Duration> requeue_after;
  absl::Status status = ReconcileKey(key, &requeue_after);
  metrics_.reconcile_duration->Observe(absl::ToDoubleSeconds(absl::Now() - started));
  ++reconciles_;
  if (!status.ok()) {
    metrics_.reconcile_errors->Inc();
    // A conflict only says the cache was behind; the retry reads the newer object.
    if (!kube::IsConflict(status)) {
      kube::LogLine(absl::StrCat("reconcile ", key, ": ", status.message()));
    }
    queue_.AddRateLimited(key);
    return;
  }
  queue_.Forget(key);
  if (!requeue_after.has_value() || *requeue_after == absl::InfiniteDuration()) return;
  queue_.AddAfter(key, *requeue_after);
}

absl::Status Controller::ReconcileKey(const std::string& key,
                                      std::optional<absl::Duration>* requeue_after) {
  kube::ObjectPtr job = caches_.Job(key);
  if (job == nullptr) return absl::OkStatus();  // deleted: garbage collection does the rest
  reconcile::Observed observed = caches_.Observe(*job);
  HPTRAIN_ASSIGN_OR_RETURN(observed.token, NewJobToken());
  if (options_.worker_metrics) {
    observed.worker_metrics = options_.worker_metrics(*job);
  } else if (rebalance_ != nullptr) {
    observed.worker_metrics = rebalance_->MetricsFor(*job);
  }
  if (LiveElastic(*job)) observed.membership = ReadMembership(*job, observed);
  reconcile::Plan plan = reconcile::Reconcile(observed, options_.reconcile, Now());
  if (!plan.membership.empty()) SendMembership(*job, observed, plan);
  HPTRAIN_RETURN_IF_ERROR(executor_.Execute(*job, plan));
  for (const reconcile::Event& event : plan.events) {
    if (event.reason == reconcile::kReasonRebalanced) metrics_.rebalances->Inc();
  }
  absl::Duration next = options_.resync_period;
  if (plan.requeue_after.has_value()) {
    next = std::min(next, std::max(absl::ZeroDuration(), *plan.requeue_after));
  }
  *requeue_after = next;
  return absl::OkStatus();
}

std::optional<reconcile::CoordinatorMembership> Controller::ReadMembership(
    const nlohmann::json& job, const reconcile::Observed& observed) {
  const std::string token = TokenOf(job, observed);
  if (token.empty()) return std::nullopt;  // no Secret yet: no coordinator either
  absl::StatusOr<reconcile::CoordinatorMembership> membership =
      options_.membership->Read(job, token);
  if (!membership.ok()) return std::nullopt;  // starting, restarting, or gone: unknown
  return *std::move(membership);
}

void Controller::SendMembership(const nlohmann::json& job, const reconcile::Observed& observed,
                                const reconcile::Plan& plan) {
  const std::string key = kube::KeyOf(job);
  const std::string uid = kube::UidOf(job);
  const int64_t epoch = observed.membership.has_value() ? observed.membership->epoch : -1;
  const std::string token = TokenOf(job, observed);
  if (token.empty()) return;
  for (const reconcile::MembershipRequest& request : plan.membership) {
    const std::pair<int, int> id{static_cast<int>(request.kind), request.slot};
    {
      absl::MutexLock lock(&membership_mu_);
      SentRequests& sent = membership_sent_[key];
      if (sent.uid != uid || sent.epoch != epoch) sent = SentRequests{uid, epoch, {}};
      if (sent.sent.count(id) > 0) continue;
    }
    absl::Status status = options_.membership->Change(job, token, request);
    if (!status.ok()) {
      kube::LogLine(absl::StrCat("membership ", key, ": ", status.message()));
      continue;  // asked again by the next pass
    }
    kube::LogLine(absl::StrCat("membership ", key, ": ", reconcile::KindName(request.kind),
                               " slot ", request.slot, " (", request.reason, ")"));
    absl::MutexLock lock(&membership_mu_);
    SentRequests& sent = membership_sent_[key];
    if (sent.uid == uid && sent.epoch == epoch) sent.sent.insert(id);
  }
}

}  // namespace hptrain::manager
