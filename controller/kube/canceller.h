// Canceller: lets one thread abort another thread's blocking API call (a watch, a list).
//
//   Canceller cancel;
//   WatchOptions options;
//   options.cancel = &cancel;
//   std::thread t([&] { client.Watch(resource, ns, options, handler); });  // blocks
//   cancel.Cancel();  // returns promptly
//   t.join();         // Watch returned Cancelled
//
// Cancel() marks the canceller and aborts the request in flight by shutting its socket down, so
// the blocked call returns within milliseconds instead of waiting for the server or a timeout.
// The mark is sticky: a request started afterwards with this canceller fails at once with
// Cancelled, until Reset(). A request whose socket is still being opened when Cancel() runs can
// miss the abort; it then stops at its next read (the response headers, the next watch event).
// Owners that need a hard bound call Cancel() again until the worker has returned (the informer
// does).
//
// Thread-safety: all methods are thread-safe. Attach/Detach are for transports (http_transport).
#ifndef HPTRAIN_CONTROLLER_KUBE_CANCELLER_H_
#define HPTRAIN_CONTROLLER_KUBE_CANCELLER_H_

#include <atomic>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace hptrain::kube {

class Canceller {
 public:
  Canceller() = default;
  Canceller(const Canceller&) = delete;
  Canceller& operator=(const Canceller&) = delete;

  // Marks cancelled and aborts the attached request, if any. Idempotent.
  void Cancel();

  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // Clears the mark so the canceller can serve a new run.
  void Reset();

  // Registers `abort` for the request about to start; Cancel() calls it (with an internal lock
  // held, so `abort` must not call back into this canceller). Returns false, registering
  // nothing, when already cancelled. One request at a time.
  bool Attach(std::function<void()> abort);

  // Unregisters; once it returns, `abort` is not running and will not be called.
  void Detach();

 private:
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  std::function<void()> abort_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_CANCELLER_H_
