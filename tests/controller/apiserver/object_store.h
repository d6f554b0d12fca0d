// ObjectStore: the storage layer of the API server double, in the role etcd and the watch cache
// play for kube-apiserver.
//
//  - One global resourceVersion counter (decimal string on the wire), bumped by every committed
//    write; a write that changes nothing is not committed and keeps its version.
//  - Objects per resource type and namespace in ordered maps (lists come out sorted by namespace
//    and name, as from etcd); uid and ownerReference indexes for the garbage collector.
//  - Per resource type, a bounded history of events for watches that resume from a
//    resourceVersion, and the open watchers, which are offered each event under the store lock
//    (in order, without blocking: watcher.h).
//  - Paginated lists: a first page with `limit` takes a snapshot of the resource (shared
//    pointers, no copies) that continue tokens then page through, so every page is consistent
//    with the first page's resourceVersion. Tokens have the real server's format
//    (base64 of {"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}); an evicted snapshot gives
//    410 Expired like a compacted one.
//
// Writes go through Transact(): a function sees the current object (or null) under the store
// lock and decides what to commit. API semantics (validation, generation, managed fields, status
// rules) live in the caller (api_operations.h), not here.
//
// Thread-safety: all methods are thread-safe. Transaction functions run with the store lock held
// and must not call back into the store.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_OBJECT_STORE_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_OBJECT_STORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tests/controller/apiserver/resource_type.h"
#include "tests/controller/apiserver/selectors.h"
#include "tests/controller/apiserver/watcher.h"

namespace hptrain::testing {

// An object's address: resource type (ResourceType::Qualified()), namespace ("" when
// cluster-scoped) and name.
struct ObjectKey {
  std::string resource;
  std::string ns;
  std::string name;
  bool operator<(const ObjectKey& o) const {
    return std::tie(resource, ns, name) < std::tie(o.resource, o.ns, o.name);
  }
  bool operator==(const ObjectKey& o) const {
    return resource == o.resource && ns == o.ns && name == o.name;
  }
};

struct ListRequest {
  std::string ns;  // empty = all namespaces
  LabelSelector labels;
  FieldSelector fields;
  int64_t limit = 0;  // 0 = no limit
  std::string continue_token;
  std::string resource_version;  // "0" serves everything at once, ignoring limit, like 1.28
};

struct ListPage {
  std::vector<ObjectPtr> items;
  uint64_t resource_version = 0;
  std::string continue_token;              // empty on the last page
  std::optional<int64_t> remaining_items;  // set with a continue token and no selectors
};

struct WatchRequest {
  WatchFilter filter;
  std::string resource_version;  // empty or "0": initial ADDED events, then live
  // BOOKMARK events are sent only when asked for and the watch names a resourceVersion ("0"
  // included): v1.28 serves watches without one from etcd, which sends none (fixture 07).
  bool allow_bookmarks = false;
};

class ObjectStore {
 public:
  struct Options {
    uint64_t first_resource_version = 1000;
    size_t history_limit = 10000;      // events kept per resource type for resuming watches
    size_t watch_queue_limit = 10000;  // events a watcher may fall behind before it is closed
    size_t snapshot_limit = 64;        // list snapshots kept for continue tokens
  };
  explicit ObjectStore(Options options);

  // Serves `type`; replaces the definition of an already served type with the same group and
  // plural, keeping its objects.
  void AddType(const ResourceType& type);
  std::optional<ResourceType> FindType(const std::string& group, const std::string& plural) const;
  // By ResourceType::Qualified() ("pods", "trainingjobs.hptrain.io").
  std::optional<ResourceType> FindType(const std::string& qualified) const;
  std::vector<ResourceType> Types() const;

  // The current object, or null.
  ObjectPtr Get(const std::string& resource, const std::string& ns, const std::string& name) const;
  // The key of the object with `uid`, if it exists.
  std::optional<ObjectKey> FindUid(const std::string& uid) const;
  // Objects whose metadata.ownerReferences name `owner_uid`.
  std::vector<ObjectKey> DependentsOf(const std::string& owner_uid) const;
  uint64_t CurrentResourceVersion() const;

  // A page of objects of `type`. Errors: 410 Expired for an unknown or evicted continue token,
  // 400 BadRequest for a malformed one.
  absl::StatusOr<ListPage> List(const ResourceType& type, const ListRequest& request) const;

  // What a transaction commits.
  struct Commit {
    enum class Kind { kNothing, kPut, kRemove, kStampThenRemove };
    Kind kind = Kind::kNothing;
    // kPut: the new object. kStampThenRemove: the stamped object (MODIFIED) that is then removed
    // (DELETED). kRemove: the final state the DELETED event carries (null: the current object).
    nlohmann::json object;
  };
  using TransactionFn = std::function<absl::StatusOr<Commit>(const ObjectPtr& current)>;
  // Runs `fn` on the current object under the store lock and commits its decision: assigns the
  // next resourceVersion (metadata.resourceVersion), updates indexes and history and notifies
  // watchers. Returns the committed object (for removals: the final state at the deletion's
  // resourceVersion; for kNothing: the current object, possibly null). Errors: whatever `fn`
  // returns.
  absl::StatusOr<ObjectPtr> Transact(const ResourceType& type, const std::string& ns,
                                     const std::string& name, const TransactionFn& fn);

  // Opens a watch. A resourceVersion older than the history window yields a watcher holding one
  // ERROR event (Status 410 Expired, fixture 38) and already closed, as the real server answers
  // HTTP 200 and then the error. Errors: 400 BadRequest for a non-numeric resourceVersion.
  absl::StatusOr<std::shared_ptr<Watcher>> Watch(const ResourceType& type,
                                                 const WatchRequest& request);
  void Unwatch(const std::string& resource, const std::shared_ptr<Watcher>& watcher);
  // Queues a BOOKMARK at the current resourceVersion on `watcher` if it asked for bookmarks and
  // its resource type has seen a write since the store was created (as the real server does).
  void Bookmark(const std::string& resource, const std::shared_ptr<Watcher>& watcher);
  // Bookmark() on every open watcher.
  void SendBookmarks();
  // Forgets every type's history: watches from any older resourceVersion get 410 Expired.
  void CompactHistory();
  // Closes every open watch stream (clients see the stream end and must re-watch).
  void CloseAllWatches();
  // Open watchers of `resource`, or of every type when empty.
  size_t WatcherCount(const std::string& resource) const;

  // Counts committed writes; AwaitWrite blocks until the count passes `seen` or `timeout` ends.
  uint64_t WriteCount() const;
  void AwaitWrite(uint64_t seen, absl::Duration timeout) const;

 private:
  struct TypeState {
    ResourceType type;
    std::map<std::string, std::map<std::string, ObjectPtr>> objects;  // ns -> name -> object
    std::deque<WatchEvent> history;
    uint64_t history_floor = 0;  // every event after this resourceVersion is in `history`
    std::vector<std::shared_ptr<Watcher>> watchers;
    bool written = false;
  };
  using Snapshot = std::vector<std::pair<std::string, ObjectPtr>>;  // (key, object), sorted

  TypeState* State(const std::string& resource) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const TypeState* State(const std::string& resource) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  ObjectPtr Store(TypeState* state, nlohmann::json object, const ObjectPtr& previous)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ObjectPtr Remove(TypeState* state, nlohmann::json final_state, const ObjectPtr& previous)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Publish(TypeState* state, WatchEvent event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Reindex(const std::string& resource, const ObjectPtr& before, const ObjectPtr& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BookmarkLocked(const TypeState& state, Watcher* watcher) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  std::shared_ptr<const Snapshot> TakeSnapshot(const TypeState& state, const std::string& ns) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  uint64_t resource_version_ ABSL_GUARDED_BY(mu_);
  uint64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, TypeState> types_ ABSL_GUARDED_BY(mu_);  // by Qualified()
  std::unordered_map<std::string, ObjectKey> by_uid_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::set<ObjectKey>> dependents_ ABSL_GUARDED_BY(mu_);
  // Continue-token snapshots by "resource|namespace|resourceVersion", oldest first.
  mutable std::map<std::string, std::shared_ptr<const Snapshot>> snapshots_ ABSL_GUARDED_BY(mu_);
  mutable std::deque<std::string> snapshot_order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_OBJECT_STORE_H_
