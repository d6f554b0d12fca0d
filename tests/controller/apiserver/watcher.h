// Stored object versions and open watch streams of the API server double.
//
// StoredObject is one immutable version of an object; its JSON text is produced once, on first
// use, and shared by every response and watch stream that sends that version (the double holds
// thousands of objects; most are never serialized).
//
// Watcher is one open watch: the object store offers it every change of the watched resource
// (with the store's lock held, so events arrive in resourceVersion order); the watcher filters
// them by namespace, label and field selector and queues them without blocking. An object that
// moves out of the selector arrives as DELETED (its previous state with the new
// resourceVersion), one that moves in as ADDED, as kube-apiserver's watch cache does. The queue
// is bounded: a watcher that falls `queue_limit` events behind is closed, so a slow client never
// blocks writers. The HTTP stream thread takes lines out with Pop().
//
// Thread-safety: StoredObject is immutable and safe to share. Watcher's methods are thread-safe.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_WATCHER_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_WATCHER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tests/controller/apiserver/selectors.h"

namespace hptrain::testing {

class StoredObject {
 public:
  StoredObject(nlohmann::json object, uint64_t resource_version)
      : json_(std::move(object)), resource_version_(resource_version) {}
  const nlohmann::json& json() const { return json_; }
  uint64_t resource_version() const { return resource_version_; }
  const std::string& name() const;
  const std::string& ns() const;
  // The compact JSON text, computed on first call.
  const std::string& Serialized() const;

 private:
  const nlohmann::json json_;
  const uint64_t resource_version_;
  mutable std::once_flag once_;
  mutable std::string text_;
};
using ObjectPtr = std::shared_ptr<const StoredObject>;

enum class EventType { kAdded, kModified, kDeleted };
const char* EventTypeName(EventType type);

// One committed change. `previous` is the version before a MODIFIED (null otherwise).
struct WatchEvent {
  EventType type;
  ObjectPtr object;
  ObjectPtr previous;
};

// What a watch selects.
struct WatchFilter {
  std::string ns;  // empty = all namespaces
  LabelSelector labels;
  FieldSelector fields;
};

class Watcher {
 public:
  Watcher(WatchFilter filter, size_t queue_limit, bool allow_bookmarks);

  // Filters `event` and queues what this watcher should see. Never blocks; closes the watcher
  // when the queue is full.
  void Offer(const WatchEvent& event);
  // Queues a synthetic ADDED (initial state) without counting against the queue limit.
  void OfferInitial(const ObjectPtr& object);
  // Queues a complete line (BOOKMARK or ERROR event), newline included.
  void PushLine(std::string line);
  // Ends the stream: with `drain` after the queued lines were taken, otherwise at once.
  void Close(bool drain);

  enum class PopResult { kLine, kIdle, kClosed };
  // Takes the next line ("{...}\n") into *line, waiting up to `wait`: kIdle when none came,
  // kClosed when the watcher was closed and (if draining) emptied.
  PopResult Pop(std::string* line, absl::Duration wait);

  bool allow_bookmarks() const { return allow_bookmarks_; }
  // True once closed because the client fell too far behind.
  bool overflowed() const;
  bool closed() const;

 private:
  struct Item {
    EventType type;
    ObjectPtr object;
    std::string line;  // set for raw lines
  };
  bool Selects(const nlohmann::json& object) const;
  void EnqueueLocked(Item item, bool bounded) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WatchFilter filter_;
  const size_t queue_limit_;
  const bool allow_bookmarks_;

  mutable absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  size_t initial_ ABSL_GUARDED_BY(mu_) = 0;  // initial ADDED items still queued (unbounded)
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool drain_ ABSL_GUARDED_BY(mu_) = false;
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_WATCHER_H_
