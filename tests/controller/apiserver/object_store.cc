#include "tests/controller/apiserver/object_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/controller/apiserver/api_status.h"

namespace hptrain::testing {
namespace {

constexpr char kContinueExpired[] =
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter.";

std::set<std::string> OwnerUids(const ObjectPtr& object) {
  std::set<std::string> uids;
  if (object == nullptr) return uids;
  const nlohmann::json& meta = object->json()["metadata"];
  if (!meta.contains("ownerReferences") || !meta["ownerReferences"].is_array()) return uids;
  for (const nlohmann::json& ref : meta["ownerReferences"]) {
    if (ref.is_object() && ref.contains("uid") && ref["uid"].is_string()) uids.insert(ref["uid"]);
  }
  return uids;
}

std::string UidOf(const ObjectPtr& object) {
  const nlohmann::json& meta = object->json()["metadata"];
  return meta.value("uid", "");
}

bool Selected(const ListRequest& request, const ObjectPtr& object) {
  const nlohmann::json& meta = object->json()["metadata"];
  if (!request.labels.empty() &&
      !request.labels.Matches(meta.contains("labels") ? meta["labels"] : nlohmann::json())) {
    return false;
  }
  return request.fields.empty() || request.fields.Matches(object->json());
}

std::string EncodeContinue(uint64_t rv, const std::string& last_key) {
  nlohmann::json token = {{"v", "meta.k8s.io/v1"}, {"rv", rv}, {"start", last_key + '\0'}};
  return absl::WebSafeBase64Escape(token.dump());
}

}  // namespace

ObjectStore::ObjectStore(Options options)
    : options_(options), resource_version_(options.first_resource_version) {}

void ObjectStore::AddType(const ResourceType& type) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = types_.try_emplace(type.Qualified());
  it->second.type = type;
  if (inserted) it->second.history_floor = resource_version_;
}

std::optional<ResourceType> ObjectStore::FindType(const std::string& group,
                                                  const std::string& plural) const {
  return FindType(group.empty() ? plural : absl::StrCat(plural, ".", group));
}

std::optional<ResourceType> ObjectStore::FindType(const std::string& qualified) const {
  absl::ReaderMutexLock lock(&mu_);
  const TypeState* state = State(qualified);
  if (state == nullptr) return std::nullopt;
  return state->type;
}

std::vector<ResourceType> ObjectStore::Types() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<ResourceType> types;
  for (const auto& [key, state] : types_) types.push_back(state.type);
  return types;
}

ObjectStore::TypeState* ObjectStore::State(const std::string& resource) {
  auto it = types_.find(resource);
  return it == types_.end() ? nullptr : &it->second;
}

const ObjectStore::TypeState* ObjectStore::State(const std::string& resource) const {
  auto it = types_.find(resource);
  return it == types_.end() ? nullptr : &it->second;
}

ObjectPtr ObjectStore::Get(const std::string& resource, const std::string& ns,
                           const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  const TypeState* state = State(resource);
  if (state == nullptr) return nullptr;
  auto by_ns = state->objects.find(ns);
  if (by_ns == state->objects.end()) return nullptr;
  auto it = by_ns->second.find(name);
  return it == by_ns->second.end() ? nullptr : it->second;
}

std::optional<ObjectKey> ObjectStore::FindUid(const std::string& uid) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return std::nullopt;
  return it->second;
}

std::vector<ObjectKey> ObjectStore::DependentsOf(const std::string& owner_uid) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = dependents_.find(owner_uid);
  if (it == dependents_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

uint64_t ObjectStore::CurrentResourceVersion() const {
  absl::ReaderMutexLock lock(&mu_);
  return resource_version_;
}

std::shared_ptr<const ObjectStore::Snapshot> ObjectStore::TakeSnapshot(
    const TypeState& state, const std::string& ns) const {
  auto snapshot = std::make_shared<Snapshot>();
  bool all_namespaces = ns.empty() && state.type.namespaced;
  for (const auto& [object_ns, objects] : state.objects) {
    if (!ns.empty() && object_ns != ns) continue;
    for (const auto& [name, object] : objects) {
      snapshot->emplace_back(all_namespaces ? absl::StrCat(object_ns, "/", name) : name, object);
    }
  }
  std::sort(snapshot->begin(), snapshot->end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return snapshot;
}

absl::StatusOr<ListPage> ObjectStore::List(const ResourceType& type,
                                           const ListRequest& request) const {
  ListPage page;
  bool paged = request.limit > 0 && request.resource_version != "0";
  if (!paged && request.continue_token.empty()) {
    // One page with everything: straight from the maps, no snapshot.
    absl::ReaderMutexLock lock(&mu_);
    page.resource_version = resource_version_;
    const TypeState* state = State(type.Qualified());
    if (state == nullptr) return page;
    for (const auto& [ns, objects] : state->objects) {
      if (!request.ns.empty() && ns != request.ns) continue;
      for (const auto& [name, object] : objects) {
        if (Selected(request, object)) page.items.push_back(object);
      }
    }
    return page;
  }
  absl::MutexLock lock(&mu_);
  const TypeState* state = State(type.Qualified());
  if (state == nullptr) return page;
  std::string start;
  std::shared_ptr<const Snapshot> snapshot;
  const std::string scope = absl::StrCat(type.Qualified(), "|", request.ns, "|");
  if (!request.continue_token.empty()) {
    std::string decoded;
    nlohmann::json token;
    if (absl::WebSafeBase64Unescape(request.continue_token, &decoded)) {
      token = nlohmann::json::parse(decoded, nullptr, false);
    }
    if (!token.is_object() || !token.contains("rv") || !token["rv"].is_number_unsigned() ||
        !token.contains("start") || !token["start"].is_string()) {
      return BadRequestError("continue key is not valid: not a valid continue token");
    }
    page.resource_version = token["rv"].get<uint64_t>();
    start = token["start"].get<std::string>();
    auto it = snapshots_.find(absl::StrCat(scope, page.resource_version));
    if (it == snapshots_.end()) return ExpiredError(kContinueExpired);
    snapshot = it->second;
  } else {
    page.resource_version = resource_version_;
    snapshot = TakeSnapshot(*state, request.ns);
  }
  auto it =
      std::lower_bound(snapshot->begin(), snapshot->end(), start,
                       [](const auto& entry, const std::string& key) { return entry.first < key; });
  for (; it != snapshot->end(); ++it) {
    if (paged && static_cast<int64_t>(page.items.size()) >= request.limit) break;
    if (Selected(request, it->second)) page.items.push_back(it->second);
  }
  if (paged && it != snapshot->end()) {
    page.continue_token = EncodeContinue(page.resource_version, std::prev(it)->first);
    if (request.labels.empty() && request.fields.empty()) {
      page.remaining_items = static_cast<int64_t>(snapshot->end() - it);
    }
    std::string key = absl::StrCat(scope, page.resource_version);
    if (snapshots_.emplace(key, snapshot).second) {
      snapshot_order_.push_back(key);
      while (snapshot_order_.size() > options_.snapshot_limit) {
        snapshots_.erase(snapshot_order_.front());
        snapshot_order_.pop_front();
      }
    }
  }
  return page;
}

absl::StatusOr<ObjectPtr> ObjectStore::Transact(const ResourceType& type, const std::string& ns,
                                                const std::string& name, const TransactionFn& fn) {
  absl::MutexLock lock(&mu_);
  TypeState* state = State(type.Qualified());
  if (state == nullptr) return UnknownPathError();
  ObjectPtr current;
  auto by_ns = state->objects.find(ns);
  if (by_ns != state->objects.end()) {
    auto it = by_ns->second.find(name);
    if (it != by_ns->second.end()) current = it->second;
  }
  absl::StatusOr<Commit> commit = fn(current);
  if (!commit.ok()) return commit.status();
  if (commit->object.is_object()) {
    // The object stays under the key it was written to, whatever the function did.
    nlohmann::json& meta = commit->object["metadata"];
    meta["name"] = name;
    if (ns.empty()) {
      meta.erase("namespace");
    } else {
      meta["namespace"] = ns;
    }
  }
  switch (commit->kind) {
    case Commit::Kind::kNothing:
      return current;
    case Commit::Kind::kPut:
      return Store(state, std::move(commit->object), current);
    case Commit::Kind::kRemove:
      if (current == nullptr) return current;
      return Remove(state, commit->object.is_null() ? current->json() : std::move(commit->object),
                    current);
    case Commit::Kind::kStampThenRemove: {
      if (current == nullptr) return current;
      ObjectPtr stamped = Store(state, std::move(commit->object), current);
      return Remove(state, stamped->json(), stamped);
    }
  }
  return current;
}

ObjectPtr ObjectStore::Store(TypeState* state, nlohmann::json object, const ObjectPtr& previous) {
  uint64_t rv = ++resource_version_;
  object["metadata"]["resourceVersion"] = std::to_string(rv);
  auto stored = std::make_shared<const StoredObject>(std::move(object), rv);
  state->objects[stored->ns()][stored->name()] = stored;
  Reindex(state->type.Qualified(), previous, stored);
  Publish(state,
          {previous == nullptr ? EventType::kAdded : EventType::kModified, stored, previous});
  return stored;
}

ObjectPtr ObjectStore::Remove(TypeState* state, nlohmann::json final_state,
                              const ObjectPtr& previous) {
  uint64_t rv = ++resource_version_;
  final_state["metadata"]["resourceVersion"] = std::to_string(rv);
  auto removed = std::make_shared<const StoredObject>(std::move(final_state), rv);
  auto by_ns = state->objects.find(previous->ns());
  if (by_ns != state->objects.end()) {
    by_ns->second.erase(previous->name());
    if (by_ns->second.empty()) state->objects.erase(by_ns);
  }
  Reindex(state->type.Qualified(), previous, nullptr);
  Publish(state, {EventType::kDeleted, removed, nullptr});
  return removed;
}

void ObjectStore::Publish(TypeState* state, WatchEvent event) {
  ++writes_;
  state->written = true;
  for (const std::shared_ptr<Watcher>& watcher : state->watchers) watcher->Offer(event);
  state->history.push_back(std::move(event));
  while (state->history.size() > options_.history_limit) {
    state->history_floor = state->history.front().object->resource_version();
    state->history.pop_front();
  }
}

void ObjectStore::Reindex(const std::string& resource, const ObjectPtr& before,
                          const ObjectPtr& after) {
  if (before != nullptr) {
    ObjectKey key{resource, before->ns(), before->name()};
    for (const std::string& owner : OwnerUids(before)) {
      auto it = dependents_.find(owner);
      if (it == dependents_.end()) continue;
      it->second.erase(key);
      if (it->second.empty()) dependents_.erase(it);
    }
    if (after == nullptr) by_uid_.erase(UidOf(before));
  }
  if (after != nullptr) {
    ObjectKey key{resource, after->ns(), after->name()};
    std::string uid = UidOf(after);
    if (!uid.empty()) by_uid_[uid] = key;
    for (const std::string& owner : OwnerUids(after)) dependents_[owner].insert(key);
  }
}

absl::StatusOr<std::shared_ptr<Watcher>> ObjectStore::Watch(const ResourceType& type,
                                                            const WatchRequest& request) {
  uint64_t from = 0;
  bool initial_unset = request.resource_version.empty();
  bool initial = initial_unset || request.resource_version == "0";
  if (!initial && !absl::SimpleAtoi(request.resource_version, &from)) {
    return BadRequestError(absl::StrCat("resourceVersion: Invalid value: \"",
                                        request.resource_version, "\": must be a number"));
  }
  // kube-apiserver 1.28 serves a watch without a resourceVersion from etcd, which sends no
  // bookmarks (fixture 07); only watches served from the watch cache do (fixture 36).
  auto watcher = std::make_shared<Watcher>(request.filter, options_.watch_queue_limit,
                                           request.allow_bookmarks && !initial_unset);
  absl::MutexLock lock(&mu_);
  TypeState* state = State(type.Qualified());
  if (state == nullptr) return UnknownPathError();
  if (initial) {
    for (const auto& [ns, objects] : state->objects) {
      if (!request.filter.ns.empty() && ns != request.filter.ns) continue;
      for (const auto& [name, object] : objects) watcher->OfferInitial(object);
    }
  } else if (from < state->history_floor) {
    uint64_t oldest = state->history.empty() ? resource_version_
                                             : state->history.front().object->resource_version();
    nlohmann::json error = FailureBody(
        410, "Expired", absl::StrCat("too old resource version: ", from, " (", oldest, ")"));
    watcher->PushLine(nlohmann::json({{"type", "ERROR"}, {"object", error}}).dump() + "\n");
    watcher->Close(/*drain=*/true);
    return watcher;
  } else {
    for (const WatchEvent& event : state->history) {
      if (event.object->resource_version() > from) watcher->Offer(event);
    }
  }
  state->watchers.push_back(watcher);
  return watcher;
}

void ObjectStore::Unwatch(const std::string& resource, const std::shared_ptr<Watcher>& watcher) {
  absl::MutexLock lock(&mu_);
  TypeState* state = State(resource);
  if (state == nullptr) return;
  auto& list = state->watchers;
  list.erase(std::remove(list.begin(), list.end(), watcher), list.end());
}

void ObjectStore::BookmarkLocked(const TypeState& state, Watcher* watcher) {
  if (!watcher->allow_bookmarks() || !state.written) return;
  nlohmann::json object = BookmarkObject(state.type, std::to_string(resource_version_));
  watcher->PushLine(nlohmann::json({{"type", "BOOKMARK"}, {"object", object}}).dump() + "\n");
}

void ObjectStore::Bookmark(const std::string& resource, const std::shared_ptr<Watcher>& watcher) {
  absl::MutexLock lock(&mu_);
  const TypeState* state = State(resource);
  if (state != nullptr) BookmarkLocked(*state, watcher.get());
}

void ObjectStore::SendBookmarks() {
  absl::MutexLock lock(&mu_);
  for (const auto& [key, state] : types_) {
    for (const std::shared_ptr<Watcher>& watcher : state.watchers) {
      BookmarkLocked(state, watcher.get());
    }
  }
}

void ObjectStore::CompactHistory() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, state] : types_) {
    state.history.clear();
    state.history_floor = resource_version_;
  }
  snapshots_.clear();
  snapshot_order_.clear();
}

void ObjectStore::CloseAllWatches() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, state] : types_) {
    for (const std::shared_ptr<Watcher>& watcher : state.watchers) watcher->Close(false);
    state.watchers.clear();
  }
}

size_t ObjectStore::WatcherCount(const std::string& resource) const {
  absl::ReaderMutexLock lock(&mu_);
  size_t count = 0;
  for (const auto& [key, state] : types_) {
    if (!resource.empty() && key != resource) continue;
    for (const std::shared_ptr<Watcher>& watcher : state.watchers) {
      if (!watcher->closed()) ++count;
    }
  }
  return count;
}

uint64_t ObjectStore::WriteCount() const {
  absl::ReaderMutexLock lock(&mu_);
  return writes_;
}

void ObjectStore::AwaitWrite(uint64_t seen, absl::Duration timeout) const {
  absl::ReaderMutexLock lock(&mu_);
  auto passed = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return writes_ > seen; };
  mu_.AwaitWithTimeout(absl::Condition(&passed), timeout);
}

}  // namespace hptrain::testing
