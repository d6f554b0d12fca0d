// WorkQueue: the controller's queue of object keys ("namespace/name"), with client-go's
// semantics.
//
//   * De-duplicating: a key added while it waits in the queue is queued once.
//   * Never processed twice at once: a key added while a worker holds it (between Get and Done)
//     is queued again when Done is called, not before.
//   * Delayed adds: AddAfter(key, d) queues the key once d has passed (the earliest pending time
//     wins when a key is delayed twice).
//   * Rate-limited retries: AddRateLimited(key) delays by the rate limiter (default: per key
//     5 ms doubling to 1000 s, overall 10 qps with bursts of 100); Forget(key) after a success
//     resets the key's backoff; NumRequeues(key) counts the failures.
//   * ShutDown: new adds are ignored, pending delays dropped, blocked Get calls wake up; keys
//     already queued are still handed out, then Get returns nullopt.
//
//   while (std::optional<std::string> key = queue.Get()) {
//     absl::Status s = Reconcile(*key);
//     if (s.ok()) queue.Forget(*key); else queue.AddRateLimited(*key);
//     queue.Done(*key);
//   }
//
// Thread-safety: every method is thread-safe; any number of workers may call Get concurrently.
// No background thread: delayed keys become ready inside Get, whose wait ends at the earliest
// delay.
#ifndef HPTRAIN_CONTROLLER_KUBE_WORK_QUEUE_H_
#define HPTRAIN_CONTROLLER_KUBE_WORK_QUEUE_H_

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/kube/rate_limiter.h"

namespace hptrain::kube {

class WorkQueue {
 public:
  // `limiter` null: DefaultControllerRateLimiter().
  explicit WorkQueue(std::unique_ptr<RateLimiter> limiter = nullptr);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Add(absl::string_view key);
  void AddAfter(absl::string_view key, absl::Duration delay);
  void AddRateLimited(absl::string_view key);
  void Forget(absl::string_view key);
  int NumRequeues(absl::string_view key);

  // The next key, marked as being processed (call Done when finished). Blocks until a key is
  // ready, the queue is shut down and drained (nullopt), or `timeout` passes (nullopt).
  std::optional<std::string> Get(absl::Duration timeout = absl::InfiniteDuration());

  // Ends the processing of `key`; re-queues it if it was added meanwhile.
  void Done(absl::string_view key);

  // Keys ready to be handed out (not counting delayed or in-process keys): the queue depth.
  size_t Len() const;
  // Keys waiting for a delay to pass.
  size_t NumWaiting() const;

  void ShutDown();
  bool ShuttingDown() const;

 private:
  void AddLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PromoteReadyLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<RateLimiter> limiter_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  std::set<std::string, std::less<>> dirty_ ABSL_GUARDED_BY(mu_);       // queued or re-queue
  std::set<std::string, std::less<>> processing_ ABSL_GUARDED_BY(mu_);  // between Get and Done
  std::multimap<absl::Time, std::string> waiting_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Time, std::less<>> waiting_until_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_WORK_QUEUE_H_
