// Informer: a watched, cached view of one resource (client-go's reflector + indexer), feeding
// event handlers.
//
// The loop, on one background thread:
//   1. List (paginated) and Replace the cache with the result. The first time, every object is
//      an add; on a relist, the differences become synthetic adds, updates (resourceVersion
//      changed) and deletes (objects that vanished while the watch was down). HasSynced() turns
//      true after the first list has been delivered.
//   2. Watch from the list's resourceVersion. Every event updates the cache, then the handlers;
//      every event's resourceVersion (BOOKMARKs included) becomes the resume point.
//   3. When the server ends the stream (timeoutSeconds), watch again from the resume point.
//      When the connection fails, wait (jittered exponential backoff) and watch again from the
//      resume point. When the server says the resume point is too old (410 Gone, in-stream or
//      HTTP) or sends another ERROR event, go back to 1.
//   4. Stop() aborts the request in flight and joins the thread.
//
//   Informer pods(client, Pods(), options);
//   InformerHandlers handlers;
//   handlers.on_update = [&](const json& old_pod, const json& pod) { queue.Add(JobKey(pod)); };
//   pods.AddHandlers(std::move(handlers));
//   HPTRAIN_RETURN_IF_ERROR(pods.Start());
//   if (!pods.WaitForSync(absl::Seconds(30))) ...;
//   ObjectPtr pod = pods.store().Get("team-a", "resnet-worker-0");
//
// Thread-safety: Start/Stop/AddHandlers are for the owner's thread. Handlers run on the
// informer's thread, one at a time, in event order, after the cache has been updated; they must
// not block for long, must not throw, and must not call Stop(). store(), HasSynced(),
// WaitForSync() and LastResourceVersion() are safe from any thread.
#ifndef HPTRAIN_CONTROLLER_KUBE_INFORMER_H_
#define HPTRAIN_CONTROLLER_KUBE_INFORMER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/kube/backoff.h"
#include "controller/kube/canceller.h"
#include "controller/kube/client.h"
#include "controller/kube/resource.h"
#include "controller/kube/store.h"
#include "nlohmann/json.hpp"

namespace hptrain::kube {

struct InformerHandlers {
  std::function<void(const nlohmann::json& object)> on_add;
  std::function<void(const nlohmann::json& old_object, const nlohmann::json& new_object)> on_update;
  // The last state of the object (from the DELETED event, or the cache for a synthetic delete).
  std::function<void(const nlohmann::json& object)> on_delete;
};

struct InformerOptions {
  std::string ns;  // "" = all namespaces
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;
  int watch_timeout_seconds = 300;
  std::vector<std::string> indexed_labels;  // label keys the store indexes (store.h)
  BackoffOptions backoff;  // between failed lists / watches
  // An optional kind (a CRD that may not be installed, e.g. a scheduler's PodGroup): when it is
  // positive and a list is answered 404 (the kind does not exist) or 403 (the role does not
  // cover it), the informer counts as synced with an empty cache, logs that once, and lists
  // again after this delay, so that a kind installed later is picked up. Zero: such a list is an
  // error like any other, retried with backoff, and the informer is not synced until it works.
  absl::Duration absent_relist = absl::ZeroDuration();
};

class Informer {
 public:
  // `client` is not owned and must outlive the informer.
  Informer(Client* client, Resource resource, InformerOptions options = {});
  // Stops the informer if it runs.
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Registers handlers (any of the three may be empty). Before Start() only: FailedPrecondition
  // while running.
  absl::Status AddHandlers(InformerHandlers handlers);

  // Starts the background thread and returns; FailedPrecondition if already running.
  absl::Status Start();

  // Aborts the list or watch in flight, wakes a backoff wait and joins the thread; returns within
  // about a hundred milliseconds. Idempotent. The cache keeps its content.
  void Stop();

  // True once the first list has been stored and handed to the handlers.
  bool HasSynced() const;

  // Blocks until HasSynced() or `timeout`; returns HasSynced().
  bool WaitForSync(absl::Duration timeout) const;

  const Store& store() const { return store_; }
  const Resource& resource() const { return resource_; }

  // The resume point: the resourceVersion of the last list or event.
  std::string LastResourceVersion() const;

  // Lists and watches started so far (for tests and metrics).
  int64_t lists_started() const { return lists_started_.load(); }
  int64_t watches_started() const { return watches_started_.load(); }

 private:
  void Run();
  absl::Status ListAndReplace();
  // The optional kind's list failed with `status`: empties the cache (deletes dispatched),
  // counts as synced. False when `status` is not such an answer.
  bool AbsentKind(const absl::Status& status);
  // One watch; sets *relist when the informer must list again.
  absl::Status WatchOnce(bool* relist, int64_t* events);
  // Waits `delay` or until Stop(); returns false when stopping.
  bool Sleep(absl::Duration delay);
  bool stopping() const;
  void SetResourceVersion(const std::string& rv);

  void DispatchAdd(const nlohmann::json& object);
  void DispatchUpdate(const nlohmann::json& old_object, const nlohmann::json& new_object);
  void DispatchDelete(const nlohmann::json& object);

  Client* const client_;
  const Resource resource_;
  const InformerOptions options_;
  Store store_;
  Canceller cancel_;
  std::vector<InformerHandlers> handlers_;  // fixed while running
  std::thread thread_;
  std::atomic<int64_t> lists_started_{0};
  std::atomic<int64_t> watches_started_{0};

  mutable absl::Mutex mu_;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  bool thread_done_ ABSL_GUARDED_BY(mu_) = false;
  bool absent_logged_ = false;  // informer thread only
  std::string resource_version_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_INFORMER_H_
