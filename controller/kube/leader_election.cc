#include "controller/kube/leader_election.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "controller/kube/api_error.h"
#include "controller/kube/log.h"
#include "controller/kube/object_meta.h"
#include "controller/kube/timestamps.h"

namespace hptrain::kube {
namespace {

constexpr double kJitterFactor = 1.2;  // client-go's acquire-retry jitter

std::string HolderOf(const nlohmann::json& lease) {
  if (!lease.is_object()) return "";
  auto spec = lease.find("spec");
  if (spec == lease.end() || !spec->is_object()) return "";
  auto holder = spec->find("holderIdentity");
  return holder != spec->end() && holder->is_string() ? holder->get<std::string>() : "";
}

int64_t TransitionsOf(const nlohmann::json& lease) {
  auto spec = lease.find("spec");
  if (spec == lease.end() || !spec->is_object()) return 0;
  auto transitions = spec->find("leaseTransitions");
  return transitions != spec->end() && transitions->is_number_integer()
             ? transitions->get<int64_t>()
             : 0;
}

}  // namespace

LeaderElector::LeaderElector(Client* client, LeaderElectionConfig config)
    : client_(client),
      config_(std::move(config)),
      jitter_(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()))) {}

LeaderElector::~LeaderElector() { Stop(); }

absl::Status LeaderElector::Start() {
  if (config_.identity.empty() || config_.lease_namespace.empty() || config_.lease_name.empty()) {
    return absl::InvalidArgumentError(
        "leader election needs an identity, a lease namespace and a lease name");
  }
  if (!(config_.lease_duration > config_.renew_deadline &&
        config_.renew_deadline > config_.retry_period &&
        config_.retry_period > absl::ZeroDuration())) {
    return absl::InvalidArgumentError(
        absl::StrCat("leader election durations must satisfy lease duration (",
                     absl::FormatDuration(config_.lease_duration), ") > renew deadline (",
                     absl::FormatDuration(config_.renew_deadline), ") > retry period (",
                     absl::FormatDuration(config_.retry_period), ") > 0"));
  }
  absl::MutexLock lock(&mu_);
  if (running_) return absl::FailedPreconditionError("leader election is already running");
  running_ = true;
  stopping_ = false;
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void LeaderElector::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!running_) return;
    stopping_ = true;
  }
  thread_.join();
  absl::MutexLock lock(&mu_);
  running_ = false;
}

std::string LeaderElector::Leader() const {
  absl::MutexLock lock(&mu_);
  return observed_holder_;
}

bool LeaderElector::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool LeaderElector::Sleep(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), delay);
  return !stopping_;
}

std::string LeaderElector::Stamp() const {
  return FormatMicroTime(config_.now ? config_.now() : absl::Now());
}

void LeaderElector::Observe(const nlohmann::json& lease, absl::Time now) {
  std::string rv = ResourceVersionOf(lease);
  if (rv != observed_resource_version_) {
    observed_resource_version_ = rv;
    observed_time_ = now;
  }
  std::string holder = HolderOf(lease);
  bool changed;
  {
    absl::MutexLock lock(&mu_);
    changed = holder != observed_holder_;
    observed_holder_ = holder;
  }
  if (changed && config_.on_new_leader) config_.on_new_leader(holder);
}

bool LeaderElector::TryAcquireOrRenew() {
  absl::Time now = absl::Now();
  std::string stamp = Stamp();
  int64_t duration_seconds = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(config_.lease_duration))));
  std::string where = absl::StrCat("lease ", config_.lease_namespace, "/", config_.lease_name);

  absl::StatusOr<nlohmann::json> lease =
      client_->Get(Leases(), config_.lease_namespace, config_.lease_name);
  if (!lease.ok()) {
    if (!kube::IsNotFound(lease.status())) {
      LogLine(absl::StrCat(where, ": read failed: ", lease.status().message()));
      return false;
    }
    nlohmann::json fresh = {{"apiVersion", Leases().ApiVersion()},
                            {"kind", Leases().kind},
                            {"metadata", {{"name", config_.lease_name}}},
                            {"spec",
                             {{"holderIdentity", config_.identity},
                              {"leaseDurationSeconds", duration_seconds},
                              {"acquireTime", stamp},
                              {"renewTime", stamp},
                              {"leaseTransitions", 0}}}};
    absl::StatusOr<nlohmann::json> created =
        client_->Create(Leases(), config_.lease_namespace, fresh);
    if (!created.ok()) {
      if (!kube::IsAlreadyExists(created.status())) {
        LogLine(absl::StrCat(where, ": create failed: ", created.status().message()));
      }
      return false;  // AlreadyExists: another candidate created it first
    }
    Observe(*created, now);
    return true;
  }

  Observe(*lease, now);
  std::string holder = HolderOf(*lease);
  if (!holder.empty() && holder != config_.identity &&
      now < observed_time_ + config_.lease_duration) {
    return false;  // held, and renewed recently as far as this process can tell
  }
  nlohmann::json updated = *lease;
  nlohmann::json& spec = updated["spec"];
  if (!spec.is_object()) spec = nlohmann::json::object();
  if (holder != config_.identity) {
    spec["acquireTime"] = stamp;
    spec["leaseTransitions"] = TransitionsOf(*lease) + 1;
  } else if (!spec.contains("acquireTime")) {
    spec["acquireTime"] = stamp;
  }
  spec["holderIdentity"] = config_.identity;
  spec["leaseDurationSeconds"] = duration_seconds;
  spec["renewTime"] = stamp;
  absl::StatusOr<nlohmann::json> stored = client_->Update(Leases(), updated);
  if (!stored.ok()) {
    if (!IsConflict(stored.status())) {
      LogLine(absl::StrCat(where, ": update failed: ", stored.status().message()));
    }
    return false;  // Conflict: another candidate wrote the lease since we read it
  }
  Observe(*stored, now);
  return true;
}

void LeaderElector::Release() {
  absl::StatusOr<nlohmann::json> lease =
      client_->Get(Leases(), config_.lease_namespace, config_.lease_name);
  if (!lease.ok() || HolderOf(*lease) != config_.identity) return;
  nlohmann::json updated = *lease;
  nlohmann::json& spec = updated["spec"];
  std::string stamp = Stamp();
  spec["holderIdentity"] = "";
  spec["leaseDurationSeconds"] = 1;
  spec["acquireTime"] = stamp;
  spec["renewTime"] = stamp;
  absl::StatusOr<nlohmann::json> stored = client_->Update(Leases(), updated);
  if (!stored.ok()) {
    LogLine(absl::StrCat("lease ", config_.lease_namespace, "/", config_.lease_name,
                         ": release failed: ", stored.status().message()));
    return;
  }
  absl::MutexLock lock(&mu_);
  observed_holder_.clear();
}

void LeaderElector::Run() {
  while (!stopping()) {
    bool acquired = false;
    while (!stopping()) {
      if (TryAcquireOrRenew()) {
        acquired = true;
        break;
      }
      double r = std::uniform_real_distribution<double>(0.0, 1.0)(jitter_);
      Sleep(config_.retry_period * (1.0 + kJitterFactor * r));
    }
    if (!acquired) break;

    leading_ = true;
    if (config_.on_started_leading) config_.on_started_leading();
    absl::Time last_renew = absl::Now();
    bool lost = false;
    while (Sleep(config_.retry_period)) {
      if (TryAcquireOrRenew()) {
        last_renew = absl::Now();
      } else if (absl::Now() - last_renew >= config_.renew_deadline) {
        lost = true;
        break;
      }
    }
    leading_ = false;
    if (lost) {
      LogLine(absl::StrCat("lease ", config_.lease_namespace, "/", config_.lease_name,
                           ": leadership lost (no renewal for ",
                           absl::FormatDuration(config_.renew_deadline), ")"));
    }
    if (config_.on_stopped_leading) config_.on_stopped_leading();
    if (!lost) {
      if (config_.release_on_stop) Release();
      break;
    }
  }
}

}  // namespace hptrain::kube
