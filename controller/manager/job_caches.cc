#include "controller/manager/job_caches.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "controller/kube/object_meta.h"
#include "controller/kube/resource.h"
#include "controller/manager/owner_key.h"
#include "controller/reconcile/labels.h"

namespace hptrain::manager {
namespace {

// The namespaces to watch, deduplicated; {""} (all) when none is named or one is empty.
std::vector<std::string> Normalize(const std::vector<std::string>& namespaces) {
  std::set<std::string> unique;
  for (const std::string& ns : namespaces) {
    std::string trimmed(absl::StripAsciiWhitespace(ns));
    if (trimmed.empty()) return {""};
    unique.insert(std::move(trimmed));
  }
  if (unique.empty()) return {""};
  return {unique.begin(), unique.end()};
}

std::vector<nlohmann::json> Copies(const std::vector<kube::ObjectPtr>& objects) {
  std::vector<nlohmann::json> out;
  out.reserve(objects.size());
  for (const kube::ObjectPtr& object : objects) out.push_back(*object);
  return out;
}

}  // namespace

JobCaches::JobCaches(kube::Client* client, JobCachesOptions options, KeyHandler on_change)
    : client_(client), on_change_(std::move(on_change)) {
  for (const std::string& ns : Normalize(options.namespaces)) {
    kube::InformerOptions base;
    base.ns = ns;
    base.watch_timeout_seconds = options.watch_timeout_seconds;
    base.backoff = options.backoff;
    kube::InformerOptions owned = base;
    owned.label_selector = kOwnedSelector;
    owned.indexed_labels = {reconcile::kJobLabel};  // Observe() looks up one job's objects

    NamespaceInformers& set = informers_[ns];
    set.jobs = std::make_unique<kube::Informer>(client_, kube::TrainingJobs(), base);
    set.pods = std::make_unique<kube::Informer>(client_, kube::Pods(), owned);
    set.services = std::make_unique<kube::Informer>(client_, kube::Services(), owned);
    set.secrets = std::make_unique<kube::Informer>(client_, kube::Secrets(), owned);
    kube::InformerOptions optional = owned;
    optional.absent_relist = options.absent_kind_relist;
    set.volcano_pod_groups =
        std::make_unique<kube::Informer>(client_, kube::VolcanoPodGroups(), optional);
    set.scheduler_plugins_pod_groups =
        std::make_unique<kube::Informer>(client_, kube::SchedulerPluginsPodGroups(), optional);
    // Not running yet, so AddHandlers cannot fail.
    set.jobs->AddHandlers(JobHandlers()).IgnoreError();
    for (kube::Informer* informer :
         {set.pods.get(), set.services.get(), set.secrets.get(), set.volcano_pod_groups.get(),
          set.scheduler_plugins_pod_groups.get()}) {
      informer->AddHandlers(OwnedHandlers()).IgnoreError();
    }
  }
}

JobCaches::~JobCaches() { Stop(); }

kube::InformerHandlers JobCaches::JobHandlers() const {
  kube::InformerHandlers handlers;
  handlers.on_add = [this](const nlohmann::json& job) { on_change_(kube::KeyOf(job)); };
  handlers.on_update = [this](const nlohmann::json&, const nlohmann::json& job) {
    on_change_(kube::KeyOf(job));
  };
  handlers.on_delete = [this](const nlohmann::json& job) { on_change_(kube::KeyOf(job)); };
  return handlers;
}

kube::InformerHandlers JobCaches::OwnedHandlers() const {
  auto notify = [this](const nlohmann::json& object) {
    if (std::optional<std::string> key = OwnerJobKey(object)) on_change_(*key);
  };
  kube::InformerHandlers handlers;
  handlers.on_add = notify;
  handlers.on_update = [notify](const nlohmann::json& old_object, const nlohmann::json& object) {
    // An owner reference or label that changed points at two jobs; both must look again.
    std::optional<std::string> before = OwnerJobKey(old_object);
    std::optional<std::string> after = OwnerJobKey(object);
    if (before.has_value() && before != after) notify(old_object);
    notify(object);
  };
  handlers.on_delete = notify;
  return handlers;
}

absl::Status JobCaches::Start() {
  if (started_) return absl::FailedPreconditionError("the job caches are already started");
  started_ = true;
  for (auto& [ns, set] : informers_) {
    for (kube::Informer* informer : set.all()) {
      absl::Status status = informer->Start();
      if (!status.ok()) {
        Stop();
        return status;
      }
    }
  }
  return absl::OkStatus();
}

void JobCaches::Stop() {
  for (auto& [ns, set] : informers_) {
    for (kube::Informer* informer : set.all()) informer->Stop();
  }
  started_ = false;
}

bool JobCaches::HasSynced() const {
  for (const auto& [ns, set] : informers_) {
    for (const kube::Informer* informer : set.all()) {
      if (!informer->HasSynced()) return false;
    }
  }
  return true;
}

bool JobCaches::WaitForSync(absl::Duration timeout) const {
  absl::Time deadline = absl::Now() + timeout;
  for (const auto& [ns, set] : informers_) {
    for (const kube::Informer* informer : set.all()) {
      if (!informer->WaitForSync(std::max(absl::ZeroDuration(), deadline - absl::Now()))) {
        return false;
      }
    }
  }
  return true;
}

const JobCaches::NamespaceInformers* JobCaches::For(absl::string_view ns) const {
  auto all = informers_.find("");
  if (all != informers_.end()) return &all->second;
  auto it = informers_.find(ns);
  return it == informers_.end() ? nullptr : &it->second;
}

kube::ObjectPtr JobCaches::Job(absl::string_view key) const {
  std::string ns;
  std::string name;
  kube::SplitKey(key, &ns, &name);
  const NamespaceInformers* set = For(ns);
  return set == nullptr ? nullptr : set->jobs->store().Get(key);
}

std::vector<std::string> JobCaches::JobKeys() const {
  std::vector<std::string> keys;
  for (const auto& [ns, set] : informers_) {
    std::vector<std::string> more = set.jobs->store().Keys();
    keys.insert(keys.end(), more.begin(), more.end());
  }
  return keys;
}

reconcile::Observed JobCaches::Observe(const nlohmann::json& job) const {
  reconcile::Observed observed;
  observed.job = job;
  const std::string ns = kube::NamespaceOf(job);
  const NamespaceInformers* set = For(ns);
  if (set == nullptr) return observed;
  const std::map<std::string, std::string> selector = {
      {reconcile::kJobLabel, kube::NameOf(job)}};
  observed.pods = Copies(set->pods->store().ListByLabels(ns, selector));
  observed.services = Copies(set->services->store().ListByLabels(ns, selector));
  observed.secrets = Copies(set->secrets->store().ListByLabels(ns, selector));
  for (const kube::Informer* informer :
       {set->volcano_pod_groups.get(), set->scheduler_plugins_pod_groups.get()}) {
    std::vector<nlohmann::json> groups = Copies(informer->store().ListByLabels(ns, selector));
    observed.pod_groups.insert(observed.pod_groups.end(), groups.begin(), groups.end());
  }
  return observed;
}

std::vector<std::string> JobCaches::namespaces() const {
  std::vector<std::string> out;
  for (const auto& [ns, set] : informers_) out.push_back(ns);
  return out;
}

int64_t JobCaches::lists_started() const {
  int64_t total = 0;
  for (const auto& [ns, set] : informers_) {
    for (const kube::Informer* informer : set.all()) total += informer->lists_started();
  }
  return total;
}

}  // namespace hptrain::manager
