// MetricsServer: the small HTTP endpoint every hptrain process (ps, worker, controller) exposes.
//
//   GET /metrics  200, the registry in Prometheus text format 0.0.4 (exposition.h)
//   GET /healthz  200 "ok" while the server runs (liveness)
//   GET /readyz   200 "ready" once the owner called SetReady(true), else 503 "not ready"
//   GET <path>    whatever a handler registered with Handle() returns (debug endpoints)
//   anything else 404
//
// Built on cpp-httplib (Debian libcpp-httplib-dev 0.11). The listening socket is bound in Start()
// on the caller's thread, so a taken port is reported there; requests are then served by a
// listener thread and a small worker pool owned by the server.
//
//   MetricsServer server(&registry);
//   HPTRAIN_RETURN_IF_ERROR(server.Start("0.0.0.0", 9400), "metrics endpoint");
//   ...
//   server.SetReady(true);        // after rendezvous
//   ...
//   server.Stop();                // or let the destructor do it
//
// Thread-safety: Start, Stop and Handle may be called from any thread but are meant for the
// owner; SetReady, ready, running and port are safe from any thread at any time. Handlers run on
// the server's worker threads, concurrently with each other, and must not throw.
#ifndef HPTRAIN_RUNTIME_METRICS_HTTP_SERVER_H_
#define HPTRAIN_RUNTIME_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "runtime/metrics/registry.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace hptrain::metrics {

// What a handler sees of a request.
struct HttpRequest {
  std::string path;
  std::map<std::string, std::string> params;  // query parameters; first value of a repeated key
};

// What a handler returns.
struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class MetricsServer {
 public:
  // `registry` is not owned and must outlive the server; it may be null, and /metrics then serves
  // an empty exposition.
  explicit MetricsServer(const Registry* registry);
  // Stops the server if it runs (see Stop).
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Serves GET `path` (exact match, query string excluded) with `handler`. Errors:
  // InvalidArgument if `path` does not start with '/'; AlreadyExists if the path is built in or
  // was registered before; FailedPrecondition while the server runs (register before Start).
  absl::Status Handle(const std::string& path, HttpHandler handler);

  // Binds host:port (port 0 picks a free port; see port()) and starts serving on a background
  // thread; returns once the server accepts connections. Errors: FailedPrecondition if already
  // running; InvalidArgument for a port outside [0, 65535]; AlreadyExists "metrics port HOST:PORT
  // already in use" when the address is taken (the server does not set SO_REUSEPORT, so two
  // processes cannot silently share a port); the errno-derived status of the failed call (see
  // hptrain::ErrnoStatus; e.g. PermissionDenied for a privileged port), or Unavailable when none
  // is known (e.g. an unresolvable host), when binding fails otherwise; DeadlineExceeded if the
  // listener thread does not come up within 5 s. After Stop(), Start may be called again.
  absl::Status Start(const std::string& host, int port);

  // Stops accepting, waits for in-flight requests and joins the threads. Idempotent; a no-op when
  // not running. Blocks for at most about the 2 s read/keep-alive timeout if a client holds an
  // idle connection.
  void Stop();

  // The bound port while running (the chosen one when Start was given 0); 0 otherwise.
  int port() const { return port_.load(); }
  bool running() const { return running_.load(); }

  // The /readyz flag; false until the owner sets it. Kept across Stop/Start.
  void SetReady(bool ready) { ready_.store(ready); }
  bool ready() const { return ready_.load(); }

 private:
  // Answers one request; runs on a worker thread.
  HttpResponse Dispatch(const HttpRequest& request) const;
  // Stop() with lifecycle_mu_ held.
  void StopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mu_);

  const Registry* const registry_;
  std::map<std::string, HttpHandler> handlers_;  // written only while stopped

  absl::Mutex lifecycle_mu_;  // serializes Start/Stop/Handle
  std::unique_ptr<httplib::Server> server_ ABSL_GUARDED_BY(lifecycle_mu_);
  std::thread listener_ ABSL_GUARDED_BY(lifecycle_mu_);

  std::atomic<bool> listener_done_{false};  // set by the listener thread as it exits
  std::atomic<bool> running_{false};
  std::atomic<bool> ready_{false};
  std::atomic<int> port_{0};
};

}  // namespace hptrain::metrics

#endif  // HPTRAIN_RUNTIME_METRICS_HTTP_SERVER_H_
