// EventRecorder: Kubernetes Events about the objects the controller manages (what
// `kubectl describe trainingjob x` lists at the bottom).
//
// Record() returns at once: the event goes into a bounded in-memory queue and a background thread
// writes it as a core/v1 Event
//   {"involvedObject": {apiVersion, kind, name, namespace, uid}, "type": "Normal"|"Warning",
//    "reason": "Rebalanced", "message": "...", "source": {"component": "hptrain-controller"},
//    "firstTimestamp", "lastTimestamp", "count": 1, "metadata": {"name": "<object>.<hex time>"}}
// in the object's namespace ("default" for cluster-scoped objects). The same (object, type,
// reason, message) again within `aggregation_window` does not create a new Event: the existing
// one gets count + 1 and a new lastTimestamp (a merge patch), as kubectl's recorders do. A full
// queue drops the event; a failed write is logged (log.h) and dropped. Nothing is returned to
// the caller: events are best effort.
//
// Thread-safety: Record, Flush and the counters are safe from any thread. The destructor drops
// what is still queued and waits for the write in flight (bounded by the client's timeout); call
// Flush() first to deliver everything.
#ifndef HPTRAIN_CONTROLLER_KUBE_EVENT_RECORDER_H_
#define HPTRAIN_CONTROLLER_KUBE_EVENT_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/kube/client.h"
#include "controller/kube/rate_limiter.h"
#include "nlohmann/json.hpp"

namespace hptrain::kube {

enum class EventType { kNormal, kWarning };

// Identifies the object an event is about.
struct ObjectReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string ns;
  std::string uid;

  // Reads apiVersion, kind and metadata {name, namespace, uid} of `object`.
  static ObjectReference FromObject(const nlohmann::json& object);
};

struct EventRecorderOptions {
  std::string component = "hptrain-controller";  // source.component, reportingComponent
  std::string instance;  // source.host / reportingInstance (e.g. the pod name); optional
  size_t queue_capacity = 1000;
  absl::Duration aggregation_window = absl::Minutes(10);
  size_t max_aggregated = 4096;  // series remembered for aggregation
  NowFunction now;               // timestamps and names; empty: absl::Now
};

class EventRecorder {
 public:
  // `client` is not owned and must outlive the recorder. Starts the writer thread.
  explicit EventRecorder(Client* client, EventRecorderOptions options = {});
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Queues an event about `object` (a full object, or anything with apiVersion/kind/metadata).
  void Record(const nlohmann::json& object, EventType type, absl::string_view reason,
              absl::string_view message);
  void Record(const ObjectReference& object, EventType type, absl::string_view reason,
              absl::string_view message);

  // Waits until every event queued before the call has been written or given up; false on
  // timeout.
  bool Flush(absl::Duration timeout);

  int64_t written() const { return written_.load(); }  // Events created or patched
  int64_t dropped() const { return dropped_.load(); }  // queue full or write failed

 private:
  struct Pending {
    ObjectReference object;
    EventType type;
    std::string reason;
    std::string message;
    absl::Time time;
  };
  struct Series {
    std::string ns;
    std::string name;
    int64_t count = 0;
    absl::Time first;
    absl::Time last;
  };

  void Run();
  void Write(const Pending& event);
  std::string UniqueName(absl::string_view object_name, absl::Time time);

  Client* const client_;
  const EventRecorderOptions options_;
  std::atomic<int64_t> written_{0};
  std::atomic<int64_t> dropped_{0};

  absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Writer-thread state.
  std::map<std::string, Series> series_;
  std::deque<std::string> series_order_;
  int64_t last_name_nanos_ = 0;

  std::thread thread_;
};

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_EVENT_RECORDER_H_
