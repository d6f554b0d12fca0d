#include "tests/controller/apiserver/garbage_collector.h"

#include <set>
#include <string>

namespace hptrain::testing {
namespace {

const nlohmann::json& Meta(const ObjectPtr& object) { return object->json()["metadata"]; }

std::string UidOf(const ObjectPtr& object) { return Meta(object).value("uid", ""); }

bool HasFinalizer(const ObjectPtr& object, const std::string& finalizer) {
  const nlohmann::json& meta = Meta(object);
  if (!meta.contains("finalizers") || !meta["finalizers"].is_array()) return false;
  for (const nlohmann::json& f : meta["finalizers"]) {
    if (f == finalizer) return true;
  }
  return false;
}

std::set<std::string> OwnerUids(const ObjectPtr& object) {
  std::set<std::string> uids;
  const nlohmann::json& meta = Meta(object);
  if (!meta.contains("ownerReferences") || !meta["ownerReferences"].is_array()) return uids;
  for (const nlohmann::json& ref : meta["ownerReferences"]) {
    if (ref.is_object() && ref.contains("uid") && ref["uid"].is_string()) uids.insert(ref["uid"]);
  }
  return uids;
}

}  // namespace

GarbageCollector::GarbageCollector(ObjectStore* store, ApiOperations* operations)
    : store_(store), operations_(operations) {}

GarbageCollector::~GarbageCollector() { Stop(); }

void GarbageCollector::Start() {
  absl::MutexLock lock(&mu_);
  if (running_) return;
  running_ = true;
  stopping_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void GarbageCollector::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!running_) return;
    stopping_ = true;
    queue_.clear();
  }
  thread_.join();
  absl::MutexLock lock(&mu_);
  running_ = false;
}

void GarbageCollector::OnOwnerChange(const ObjectKey& key, const ObjectPtr& object) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  queue_.emplace_back(key, object);
}

bool GarbageCollector::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && !busy_; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

void GarbageCollector::Loop() {
  while (true) {
    std::pair<ObjectKey, ObjectPtr> work;
    {
      absl::MutexLock lock(&mu_);
      busy_ = false;
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      work = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    Process(work.first, work.second);
  }
}

void GarbageCollector::Process(const ObjectKey& key, const ObjectPtr& object) {
  std::optional<ResourceType> type = store_->FindType(key.resource);
  if (!type.has_value()) return;
  std::string uid = UidOf(object);
  ObjectPtr current = store_->Get(key.resource, key.ns, key.name);
  if (current == nullptr || UidOf(current) != uid) {
    CollectDependents(uid);
    // A removed dependent may have been the last one a foreground deletion waited for.
    for (const std::string& owner_uid : OwnerUids(object)) {
      std::optional<ObjectKey> owner_key = store_->FindUid(owner_uid);
      if (!owner_key.has_value()) continue;
      ObjectPtr owner = store_->Get(owner_key->resource, owner_key->ns, owner_key->name);
      std::optional<ResourceType> owner_type = store_->FindType(owner_key->resource);
      if (owner != nullptr && owner_type.has_value() && HasFinalizer(owner, "foregroundDeletion")) {
        FinishForeground(*owner_type, owner);
      }
    }
    return;
  }
  if (!Meta(current).contains("deletionTimestamp")) return;
  if (HasFinalizer(current, "orphan")) FinishOrphan(*type, current);
  if (HasFinalizer(current, "foregroundDeletion")) FinishForeground(*type, current);
}

void GarbageCollector::CollectDependents(const std::string& owner_uid) {
  for (const ObjectKey& key : store_->DependentsOf(owner_uid)) {
    ObjectPtr dependent = store_->Get(key.resource, key.ns, key.name);
    std::optional<ResourceType> type = store_->FindType(key.resource);
    if (dependent == nullptr || !type.has_value()) continue;
    bool live_owner = false;
    for (const std::string& other : OwnerUids(dependent)) {
      if (other != owner_uid && store_->FindUid(other).has_value()) live_owner = true;
    }
    if (live_owner) {
      (void)operations_->RemoveOwnerReference(*type, key.ns, key.name, owner_uid);
    } else if (!Meta(dependent).contains("deletionTimestamp")) {
      (void)operations_->Delete(*type, key.ns, key.name, DeleteOptions{});
    }
  }
}

void GarbageCollector::FinishForeground(const ResourceType& type, const ObjectPtr& owner) {
  std::string uid = UidOf(owner);
  bool waiting = false;
  for (const ObjectKey& key : store_->DependentsOf(uid)) {
    ObjectPtr dependent = store_->Get(key.resource, key.ns, key.name);
    std::optional<ResourceType> dependent_type = store_->FindType(key.resource);
    if (dependent == nullptr || !dependent_type.has_value()) continue;
    if (!Meta(dependent).contains("deletionTimestamp")) {
      (void)operations_->Delete(*dependent_type, key.ns, key.name, DeleteOptions{});
    }
    if (store_->Get(key.resource, key.ns, key.name) != nullptr) waiting = true;
  }
  if (!waiting) {
    (void)operations_->RemoveFinalizer(type, owner->ns(), owner->name(), "foregroundDeletion");
  }
}

void GarbageCollector::FinishOrphan(const ResourceType& type, const ObjectPtr& owner) {
  std::string uid = UidOf(owner);
  for (const ObjectKey& key : store_->DependentsOf(uid)) {
    std::optional<ResourceType> dependent_type = store_->FindType(key.resource);
    if (!dependent_type.has_value()) continue;
    (void)operations_->RemoveOwnerReference(*dependent_type, key.ns, key.name, uid);
  }
  (void)operations_->RemoveFinalizer(type, owner->ns(), owner->name(), "orphan");
}

}  // namespace hptrain::testing
