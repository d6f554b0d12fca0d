#include "controller/kube/store.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "controller/kube/object_meta.h"

namespace hptrain::kube {

namespace {

// The object's metadata.labels when it is an object, else null.
const nlohmann::json* LabelsObject(const nlohmann::json& object) {
  if (!object.is_object()) return nullptr;
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return nullptr;
  auto labels = metadata->find("labels");
  if (labels == metadata->end() || !labels->is_object()) return nullptr;
  return &*labels;
}

// The string value of label `key`, or null.
const std::string* LabelValue(const nlohmann::json& object, const std::string& key) {
  const nlohmann::json* labels = LabelsObject(object);
  if (labels == nullptr) return nullptr;
  auto it = labels->find(key);
  if (it == labels->end() || !it->is_string()) return nullptr;
  return it->get_ptr<const std::string*>();
}

}  // namespace

bool MatchesLabels(const nlohmann::json& object,
                   const std::map<std::string, std::string>& selector) {
  for (const auto& [key, value] : selector) {
    const std::string* actual = LabelValue(object, key);
    if (actual == nullptr || *actual != value) return false;
  }
  return true;
}

Store::Store(std::vector<std::string> indexed_labels)
    : indexed_labels_(std::move(indexed_labels)) {}

void Store::IndexLocked(const std::string& key, const nlohmann::json& object, bool add) {
  for (const std::string& label : indexed_labels_) {
    const std::string* value = LabelValue(object, label);
    if (value == nullptr) continue;
    std::map<std::string, std::set<std::string>>& by_value = index_[label];
    if (add) {
      by_value[*value].insert(key);
      continue;
    }
    auto it = by_value.find(*value);
    if (it == by_value.end()) continue;
    it->second.erase(key);
    if (it->second.empty()) by_value.erase(it);
  }
}

ObjectPtr Store::Get(absl::string_view key) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

ObjectPtr Store::Get(absl::string_view ns, absl::string_view name) const {
  return Get(ObjectKey(ns, name));
}

std::vector<ObjectPtr> Store::List(absl::string_view ns) const { return ListByLabels(ns, {}); }

std::vector<ObjectPtr> Store::ListByLabels(
    absl::string_view ns, const std::map<std::string, std::string>& selector) const {
  std::vector<ObjectPtr> out;
  absl::ReaderMutexLock lock(&mu_);
  for (const std::string& label : indexed_labels_) {
    auto wanted = selector.find(label);
    if (wanted == selector.end()) continue;
    auto by_value = index_.find(label);
    if (by_value == index_.end()) return out;
    auto keys = by_value->second.find(wanted->second);
    if (keys == by_value->second.end()) return out;
    std::string prefix = ns.empty() ? "" : absl::StrCat(ns, "/");
    for (const std::string& key : keys->second) {  // ordered, as the objects themselves
      if (!absl::StartsWith(key, prefix)) continue;
      const ObjectPtr& object = objects_.find(key)->second;
      if (MatchesLabels(*object, selector)) out.push_back(object);
    }
    return out;
  }
  if (ns.empty()) {
    for (const auto& [key, object] : objects_) {
      if (MatchesLabels(*object, selector)) out.push_back(object);
    }
    return out;
  }
  std::string prefix = absl::StrCat(ns, "/");
  for (auto it = objects_.lower_bound(prefix);
       it != objects_.end() && absl::StartsWith(it->first, prefix); ++it) {
    if (MatchesLabels(*it->second, selector)) out.push_back(it->second);
  }
  return out;
}

std::vector<std::string> Store::Keys() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::string> keys;
  keys.reserve(objects_.size());
  for (const auto& entry : objects_) keys.push_back(entry.first);
  return keys;
}

size_t Store::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return objects_.size();
}

ObjectPtr Store::Upsert(ObjectPtr object) {
  std::string key = KeyOf(*object);
  absl::MutexLock lock(&mu_);
  ObjectPtr& slot = objects_[key];
  if (slot != nullptr) IndexLocked(key, *slot, /*add=*/false);
  IndexLocked(key, *object, /*add=*/true);
  std::swap(slot, object);
  return object;
}

ObjectPtr Store::Remove(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  IndexLocked(it->first, *it->second, /*add=*/false);
  ObjectPtr removed = std::move(it->second);
  objects_.erase(it);
  return removed;
}

std::vector<Store::Delta> Store::Replace(std::vector<ObjectPtr> objects) {
  std::map<std::string, ObjectPtr, std::less<>> next;
  for (ObjectPtr& object : objects) {
    std::string key = KeyOf(*object);
    next[key] = std::move(object);
  }
  std::vector<Delta> deltas;
  absl::MutexLock lock(&mu_);
  for (const auto& [key, object] : next) {
    auto old = objects_.find(key);
    if (old == objects_.end()) {
      deltas.push_back({Delta::Kind::kAdded, nullptr, object});
    } else if (ResourceVersionOf(*old->second) != ResourceVersionOf(*object) ||
               ResourceVersionOf(*object).empty()) {
      deltas.push_back({Delta::Kind::kUpdated, old->second, object});
    }
  }
  for (const auto& [key, object] : objects_) {
    if (next.find(key) == next.end()) deltas.push_back({Delta::Kind::kDeleted, object, object});
  }
  objects_ = std::move(next);
  index_.clear();
  for (const auto& [key, object] : objects_) IndexLocked(key, *object, /*add=*/true);
  return deltas;
}

}  // namespace hptrain::kube
