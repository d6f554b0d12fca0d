#include "controller/manager/rebalance_loop.h"

#include <chrono>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/kube/api_error.h"
#include "controller/kube/log.h"
#include "controller/kube/object_meta.h"
#include "controller/reconcile/allocation.h"
#include "controller/reconcile/labels.h"
#include "controller/reconcile/object_meta.h"
#include "controller/reconcile/parsed_job.h"
#include "controller/reconcile/plan.h"
#include "runtime/job/local_rebalancer.h"
#include "runtime/ps/coordinator_client.h"

namespace hptrain::manager {

struct RebalanceLoop::JobState {
  std::string uid;
  int64_t generation = -1;
  std::optional<job::JobSpec> spec;  // nullopt: the spec does not parse
  std::unique_ptr<job::LocalRebalancer> balancer;
  std::string address;
  std::string token;
  std::unique_ptr<ps::CoordinatorClient> coordinator;
  int64_t coordinator_generation = 0;
  std::string last_error;  // logged once until it changes
};

namespace {

bool RebalanceEnabled(const nlohmann::json& job) {
  const nlohmann::json* rebalance = nullptr;
  if (job.contains("spec") && job["spec"].is_object() && job["spec"].contains("rebalance")) {
    rebalance = &job["spec"]["rebalance"];
  }
  return rebalance != nullptr && rebalance->is_object() && rebalance->value("enabled", false);
}

// A restarted gang of a job with checkpoints whose resume step status does not hold yet
// (reconcile/resume_record.h): its workers are read until they report it.
bool ResumePending(const nlohmann::json& job) {
  const nlohmann::json* status = reconcile::Find(job, {"status"});
  const int64_t restarts = reconcile::IntAt(job, {"status", "restarts"}, 0);
  if (status == nullptr || restarts <= 0) return false;
  if (reconcile::StringAt(job, {"spec", "checkpoint", "path"}).empty()) return false;
  return reconcile::IntAt(job, {"status", "resume", "restart"}, -1) != restarts;
}

std::string PhaseOf(const nlohmann::json& job) {
  if (!job.contains("status") || !job["status"].is_object()) return "";
  return job["status"].value("phase", "");
}

// status.workers[r].batchSize in rank order; empty when any is missing.
std::vector<int> StatusBatchSizes(const nlohmann::json& job) {
  std::vector<int> sizes;
  if (!job.contains("status") || !job["status"].is_object()) return sizes;
  const nlohmann::json workers = job["status"].value("workers", nlohmann::json::array());
  for (const nlohmann::json& worker : workers) {
    if (!worker.is_object() || !worker.contains("batchSize") ||
        !worker["batchSize"].is_number_integer()) {
      return {};
    }
    sizes.push_back(worker["batchSize"].get<int>());
  }
  return sizes;
}

// The job token from the job's Secret in `observed`; "" when not there yet.
std::string TokenOf(const nlohmann::json& job, const reconcile::Observed& observed) {
  const std::string secret_name = reconcile::SecretName(kube::NameOf(job));
  for (const nlohmann::json& secret : observed.secrets) {
    if (kube::NameOf(secret) != secret_name) continue;
    std::string encoded =
        secret.value("data", nlohmann::json::object()).value("token", std::string());
    std::string token;
    if (!absl::Base64Unescape(encoded, &token)) return "";
    return token;
  }
  return "";
}

std::string DefaultCoordinatorAddress(const nlohmann::json& job) {
  const std::string name = kube::NameOf(job);
  return absl::StrCat(reconcile::PsPodName(name), ".", reconcile::ServiceName(name), ".",
                      kube::NamespaceOf(job), ".svc:", reconcile::kCoordinatorPort);
}

}  // namespace

RebalanceLoop::RebalanceLoop(const JobCaches* caches, std::unique_ptr<WorkerReadingsSource> source,
                             PlanExecutor* executor, metrics::Counter* rebalances,
                             RebalanceLoopOptions options)
    : caches_(caches),
      source_(std::move(source)),
      executor_(executor),
      rebalances_(rebalances),
      options_(std::move(options)),
      warnings_(options_.metrics_warnings) {}

RebalanceLoop::~RebalanceLoop() { Stop(); }

void RebalanceLoop::Start() {
  if (thread_.joinable()) return;
  stop_ = std::make_unique<absl::Notification>();
  thread_ = std::thread([this] {
    while (!stop_->WaitForNotificationWithTimeout(options_.period)) Tick(absl::Now());
  });
}

void RebalanceLoop::Stop() {
  if (!thread_.joinable()) return;
  stop_->Notify();
  thread_.join();
}

reconcile::WorkerMetricsMap RebalanceLoop::MetricsFor(const nlohmann::json& job) const {
  absl::MutexLock lock(&mu_);
  auto it = metrics_.find(kube::KeyOf(job));
  return it == metrics_.end() ? reconcile::WorkerMetricsMap{} : it->second;
}

void RebalanceLoop::Tick(absl::Time now) {
  std::vector<kube::ObjectPtr> eligible;  // rebalanced
  std::vector<kube::ObjectPtr> read;      // those, the ones whose resume step is awaited, and
                                          // those whose status reading is due
  std::map<std::string, kube::ObjectPtr> by_key;
  std::vector<std::string> status_due;  // jobs whose status gets this reading
  std::set<std::string> running;
  for (const std::string& key : caches_->JobKeys()) {
    kube::ObjectPtr job = caches_->Job(key);
    if (job == nullptr || PhaseOf(*job) != "Running") continue;
    running.insert(key);
    const bool rebalanced = RebalanceEnabled(*job);
    auto last = last_status_.find(key);
    const bool due = last == last_status_.end() || now - last->second >= options_.status_period;
    if (!rebalanced && !ResumePending(*job) && !due) continue;
    if (rebalanced) eligible.push_back(job);
    if (due) status_due.push_back(key);
    read.push_back(job);
    by_key[key] = job;
  }
  for (auto it = last_status_.begin(); it != last_status_.end();) {
    it = running.count(it->first) > 0 ? std::next(it) : last_status_.erase(it);
  }
  // Forget jobs that finished, stopped rebalancing or are gone.
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    it = by_key.count(it->first) > 0 ? std::next(it) : jobs_.erase(it);
  }
  {
    absl::MutexLock lock(&mu_);
    // A job read only for its status keeps its last readings between two such reads.
    for (auto it = metrics_.begin(); it != metrics_.end();) {
      it = running.count(it->first) > 0 ? std::next(it) : metrics_.erase(it);
    }
  }
  warnings_.Retain(running);
  if (read.empty()) return;

  absl::StatusOr<WorkerReadings> readings = source_->Read(read);
  if (!readings.ok()) {
    std::string error = absl::StrCat("rebalance: reading worker metrics from ", source_->Describe(),
                                     ": ", readings.status().message());
    if (error != last_error_) kube::LogLine(error);
    last_error_ = error;
    for (const kube::ObjectPtr& job : read) ReadingFailed(*job, now, readings.status().message());
    return;
  }
  last_error_.clear();
  const std::map<std::string, std::string> job_errors = source_->JobErrors();
  for (const kube::ObjectPtr& job : read) {
    const std::string key = kube::KeyOf(*job);
    auto error = job_errors.find(key);
    auto found = readings->find(key);
    if (error != job_errors.end()) {
      ReadingFailed(*job, now, error->second);
    } else if (found == readings->end() || found->second.empty()) {
      ReadingFailed(*job, now, "no hptrain_* series of the job's workers");
    } else {
      warnings_.Succeeded(key);
    }
  }
  std::vector<std::string> resumed;  // jobs whose workers newly report their resume step
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, ranks] : *readings) {
      reconcile::WorkerMetricsMap& map = metrics_[key];
      const std::string name = kube::NameOf(*by_key[key]);
      for (const auto& [rank, reading] : ranks) {
        reconcile::WorkerMetrics& m = map[reconcile::WorkerPodName(name, rank)];
        m.samples_per_second = reading.samples_per_second;
        m.step = reading.step;
        m.epoch = reading.epoch;
        if (reading.resumed_from_step != m.resumed_from_step && reading.resumed_from_step >= 0 &&
            ResumePending(*by_key[key])) {
          resumed.push_back(key);
        }
        m.resumed_from_step = reading.resumed_from_step;
        m.train_loss = reading.train_loss;
        m.eval_accuracy = reading.eval_accuracy;
        m.eval_metrics = reading.eval_metrics;
      }
    }
  }
  if (options_.on_resumed) {
    for (const std::string& key : resumed) options_.on_resumed(key);
  }
  for (const std::string& key : status_due) {
    last_status_[key] = now;
    if (options_.on_status && readings->count(key) > 0) options_.on_status(key);
  }
  static const std::map<int, WorkerReading> kNone;
  for (const kube::ObjectPtr& job : eligible) {
    auto found = readings->find(kube::KeyOf(*job));
    TickJob(*job, found == readings->end() ? kNone : found->second, now);
  }
}

RebalanceLoop::JobState* RebalanceLoop::StateFor(const nlohmann::json& job) {
  std::unique_ptr<JobState>& state = jobs_[kube::KeyOf(job)];
  const std::string uid = kube::UidOf(job);
  const int64_t generation = job["metadata"].value("generation", int64_t{0});
  if (state == nullptr || state->uid != uid || state->generation != generation) {
    state = std::make_unique<JobState>();
    state->uid = uid;
    state->generation = generation;
    absl::StatusOr<reconcile::ParsedJob> parsed = reconcile::ParseTrainingJob(job);
    if (parsed.ok()) {
      state->spec = parsed->spec;
      state->balancer = std::make_unique<job::LocalRebalancer>(*state->spec);
    }
  }
  return state->spec.has_value() ? state.get() : nullptr;
}

void RebalanceLoop::TickJob(const nlohmann::json& job, const std::map<int, WorkerReading>& ranks,
                            absl::Time now) {
  JobState* state = StateFor(job);
  if (state == nullptr) return;
  const std::string key = kube::KeyOf(job);
  auto fail = [&](const std::string& what, const absl::Status& status) {
    std::string error = absl::StrCat("rebalance ", key, ": ", what, ": ", status.message());
    if (error != state->last_error) kube::LogLine(error);
    state->last_error = error;
  };

  const std::string token = TokenOf(job, caches_->Observe(job));
  if (token.empty()) return;  // the reconciler has not created the Secret yet
  const std::string address = options_.coordinator_address ? options_.coordinator_address(job)
                                                           : DefaultCoordinatorAddress(job);
  if (state->coordinator == nullptr || address != state->address || token != state->token) {
    state->address = address;
    state->token = token;
    state->coordinator = std::make_unique<ps::CoordinatorClient>(
        address, token,
        std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.rpc_timeout)));
  }
  absl::StatusOr<v1::Allocation> current = state->coordinator->GetAllocation();
  if (!current.ok()) return fail("reading the allocation", current.status());
  if (current->generation() < state->coordinator_generation) {
    // A new coordinator (the gang restarted): new processes, old measurements.
    state->balancer = std::make_unique<job::LocalRebalancer>(*state->spec);
  }
  state->coordinator_generation = current->generation();
  std::vector<int> in_force(current->batch_sizes().begin(), current->batch_sizes().end());
  const std::vector<int> recorded = StatusBatchSizes(job);
  if (!recorded.empty() && recorded != in_force) {
    // A status write lost a race, or the coordinator started over: status follows it.
    Record(job, in_force, now, "status follows the coordinator");
    return;
  }

  std::vector<job::RankProgress> progress;
  for (const auto& [rank, reading] : ranks) {
    progress.push_back({rank, reading.compute_steps, reading.batch_size, reading.compute_seconds});
  }
  std::optional<std::vector<int>> proposal =
      state->balancer->Update(progress, absl::ToDoubleSeconds(now - absl::UnixEpoch()));
  if (!proposal.has_value()) return;
  absl::StatusOr<v1::Allocation> set =
      state->coordinator->SetAllocation(*proposal, options_.lead_steps);
  if (!set.ok()) return fail("setting the allocation", set.status());
  ++allocations_set_;
  state->coordinator_generation = set->generation();
  state->last_error.clear();
  Record(job, *proposal, now, "new allocation");
}

void RebalanceLoop::ReadingFailed(const nlohmann::json& job, absl::Time now,
                                  absl::string_view error) {
  std::optional<reconcile::Event> event =
      warnings_.Failed(kube::KeyOf(job), now, source_->Describe(), error);
  if (!event.has_value() || executor_ == nullptr) return;
  reconcile::Plan plan;  // the event alone: no status write
  plan.events.push_back(*std::move(event));
  absl::Status recorded = executor_->Execute(job, plan);
  if (!recorded.ok()) {
    kube::LogLine(absl::StrCat("rebalance ", kube::KeyOf(job), ": ", recorded.message()));
  }
}

void RebalanceLoop::Record(const nlohmann::json& job, const std::vector<int>& batch_sizes,
                           absl::Time now, const char* why) {
  const std::string key = kube::KeyOf(job);
  absl::StatusOr<reconcile::AllocationRecord> record =
      reconcile::RecordAllocation(job, batch_sizes, now);
  if (!record.ok()) {
    kube::LogLine(absl::StrCat("rebalance ", key, ": ", why, ": ", record.status().message()));
    return;
  }
  reconcile::Plan plan;
  plan.status = record->status;
  plan.events.push_back(record->event);
  absl::Status written = executor_->Execute(job, plan);
  if (!written.ok()) {
    // A conflict: the next pass compares status with the coordinator again.
    if (!kube::IsConflict(written)) {
      kube::LogLine(absl::StrCat("rebalance ", key, ": recording [",
                                 absl::StrJoin(batch_sizes, ", "), "]: ", written.message()));
    }
    return;
  }
  if (rebalances_ != nullptr) rebalances_->Inc();
}

}  // namespace hptrain::manager
