// Store: the informer's cache of one resource, keyed "namespace/name".
//
// Objects are stored as shared immutable JSON (ObjectPtr): readers get a pointer, never a copy,
// and a pointer stays valid after the store moves on. Mutations return what they replaced so the
// informer can hand old and new objects to its handlers.
//
// Label keys named at construction are indexed (as client-go's Indexer): a ListByLabels whose
// selector holds an indexed key visits only the objects with that label value, so a controller
// looking up one job's pods does not scan every pod of the cluster.
//
// Thread-safety: every method is thread-safe; readers run concurrently with each other.
#ifndef HPTRAIN_CONTROLLER_KUBE_STORE_H_
#define HPTRAIN_CONTROLLER_KUBE_STORE_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace hptrain::kube {

using ObjectPtr = std::shared_ptr<const nlohmann::json>;

// Whether `labels` holds every pair of `selector` (equality-based selection, as the
// "k1=v1,k2=v2" label selector).
bool MatchesLabels(const nlohmann::json& object,
                   const std::map<std::string, std::string>& selector);

class Store {
 public:
  // `indexed_labels`: label keys kept in an index (value -> object keys).
  explicit Store(std::vector<std::string> indexed_labels = {});

  // One change found by Replace().
  struct Delta {
    enum class Kind { kAdded, kUpdated, kDeleted };
    Kind kind;
    ObjectPtr old_object;  // kUpdated, kDeleted
    ObjectPtr object;      // kAdded, kUpdated (the new state); kDeleted (the last known state)
  };

  // The object stored under `key` ("ns/name", or "name" for cluster-scoped), or null.
  ObjectPtr Get(absl::string_view key) const;
  ObjectPtr Get(absl::string_view ns, absl::string_view name) const;

  // All objects, ordered by key; `ns` non-empty keeps that namespace only.
  std::vector<ObjectPtr> List(absl::string_view ns = "") const;

  // Objects of `ns` (all namespaces when empty) whose labels hold every pair of `selector`.
  std::vector<ObjectPtr> ListByLabels(absl::string_view ns,
                                      const std::map<std::string, std::string>& selector) const;

  std::vector<std::string> Keys() const;
  size_t size() const;

  // Inserts or replaces `object` under its key; returns the replaced object or null.
  ObjectPtr Upsert(ObjectPtr object);

  // Removes `key`; returns the removed object or null.
  ObjectPtr Remove(absl::string_view key);

  // Makes the store hold exactly `objects` and returns the changes: added keys, updated keys
  // (resourceVersion differs), deleted keys. Unchanged objects produce no delta.
  std::vector<Delta> Replace(std::vector<ObjectPtr> objects);

 private:
  using Index = std::map<std::string, std::map<std::string, std::set<std::string>>>;

  void IndexLocked(const std::string& key, const nlohmann::json& object, bool add)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every indexed label key, its value -> the keys of the objects carrying it.
  const std::vector<std::string> indexed_labels_;
  mutable absl::Mutex mu_;
  std::map<std::string, ObjectPtr, std::less<>> objects_ ABSL_GUARDED_BY(mu_);
  Index index_ ABSL_GUARDED_BY(mu_);  // label key -> value -> object keys
};

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_STORE_H_
