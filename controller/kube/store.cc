#include "controller/kube/store.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "controller/kube/object_meta.h"

namespace hptrain::kube {

bool MatchesLabels(const nlohmann::json& object,
                   const std::map<std::string, std::string>& selector) {
  if (selector.empty()) return true;
  std::map<std::string, std::string> labels = LabelsOf(object);
  for (const auto& [key, value] : selector) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  return true;
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
  std::swap(slot, object);
  return object;
}

ObjectPtr Store::Remove(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
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
  return deltas;
}

}  // namespace hptrain::kube
