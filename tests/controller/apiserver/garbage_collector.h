// GarbageCollector: the API server double's stand-in for kube-controller-manager's garbage
// collector, driven by metadata.ownerReferences (uid).
//
//  - An owner is gone (Background deletion, or its last finalizer removed): every dependent whose
//    owners are all gone is deleted (Background; pods show MODIFIED with deletionTimestamp, then
//    DELETED, fixture 36); a dependent that still has a live owner only loses the dangling
//    reference.
//  - An owner has the foregroundDeletion finalizer (Foreground, fixture 37): its dependents are
//    deleted, and once none is left the finalizer is removed, which removes the owner.
//  - An owner has the orphan finalizer (Orphan): the ownerReference is removed from each
//    dependent, then the finalizer, which removes the owner; dependents live on.
//
// Unlike the real collector it does not delete objects created with an ownerReference to an owner
// that never existed. It runs on its own thread, asynchronously to the API request that caused
// the work, as the real one does; WaitIdle() lets tests wait for it.
//
// Thread-safety: all methods are thread-safe.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_GARBAGE_COLLECTOR_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_GARBAGE_COLLECTOR_H_

#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tests/controller/apiserver/api_operations.h"
#include "tests/controller/apiserver/object_store.h"

namespace hptrain::testing {

class GarbageCollector {
 public:
  // `store` and `operations` are not owned and must outlive the collector.
  GarbageCollector(ObjectStore* store, ApiOperations* operations);
  // Stops the thread (see Stop).
  ~GarbageCollector();
  GarbageCollector(const GarbageCollector&) = delete;
  GarbageCollector& operator=(const GarbageCollector&) = delete;

  // Starts the worker thread; a no-op when running.
  void Start();
  // Stops and joins the worker; queued work is dropped. Idempotent.
  void Stop();

  // Queues work for `object` (its final state when removed); ApiOperations calls this.
  void OnOwnerChange(const ObjectKey& key, const ObjectPtr& object);

  // Blocks until no work is queued or running, or `timeout` ends; true when idle.
  bool WaitIdle(absl::Duration timeout);

 private:
  void Loop();
  void Process(const ObjectKey& key, const ObjectPtr& object);
  void CollectDependents(const std::string& owner_uid);
  void FinishForeground(const ResourceType& type, const ObjectPtr& owner);
  void FinishOrphan(const ResourceType& type, const ObjectPtr& owner);

  ObjectStore* const store_;
  ApiOperations* const operations_;
  absl::Mutex mu_;
  std::deque<std::pair<ObjectKey, ObjectPtr>> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_GARBAGE_COLLECTOR_H_
