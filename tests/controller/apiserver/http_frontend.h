// HttpFrontend: the HTTP side of the API server double (cpp-httplib on 127.0.0.1).
//
// Every request: parse (request_info.h) -> authenticate -> injected fault -> authorize -> serve
// -> log (request_policy.h). Errors are Status bodies with the matching HTTP code
// (api_status.h). Watches (watch=1|true) answer 200 at once and stream newline-delimited JSON
// events in chunked encoding, one event per chunk like the recordings (07, 36, 38); a stream ends
// at timeoutSeconds (after a BOOKMARK when allowWatchBookmarks=true), when the watcher is closed
// (CloseAllWatches, a too-slow client) or when the server stops. Watch streams are never
// compressed, so each event reaches the client as it happens.
//
// Each open connection (keep-alive or watch) holds one worker thread; size `worker_threads` for
// the number of concurrent watches plus clients.
//
// Thread-safety: Start/Stop from the owner's thread; requests are served on worker threads.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_HTTP_FRONTEND_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_HTTP_FRONTEND_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "tests/controller/apiserver/api_operations.h"
#include "tests/controller/apiserver/object_store.h"
#include "tests/controller/apiserver/request_info.h"
#include "tests/controller/apiserver/request_policy.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace hptrain::testing {

struct FrontendOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 = an ephemeral port
  size_t worker_threads = 96;
  std::string git_version = "v1.28.7";
};

class HttpFrontend {
 public:
  // None of the pointers is owned; all must outlive the frontend.
  HttpFrontend(ObjectStore* store, ApiOperations* operations, RequestPolicy* policy);
  ~HttpFrontend();
  HttpFrontend(const HttpFrontend&) = delete;
  HttpFrontend& operator=(const HttpFrontend&) = delete;

  // Binds and serves on a background thread; returns the bound port. Errors: FailedPrecondition
  // when running, Unavailable when binding fails, DeadlineExceeded when the listener does not
  // come up within 5 s.
  absl::StatusOr<int> Start(const FrontendOptions& options);
  // Stops serving, ends open watch streams and joins the threads. Idempotent.
  void Stop();
  int port() const { return port_.load(); }

 private:
  void Handle(const httplib::Request& request, httplib::Response& response);
  absl::Status Serve(const httplib::Request& request, const RequestInfo& info,
                     const std::string& user, httplib::Response& response);
  absl::Status ServeNonResource(const httplib::Request& request, const RequestInfo& info,
                                httplib::Response& response);
  absl::Status ServeList(const httplib::Request& request, const ResourceType& type,
                         const RequestInfo& info, httplib::Response& response);
  absl::Status ServeWatch(const httplib::Request& request, const ResourceType& type,
                          const RequestInfo& info, httplib::Response& response);
  absl::Status ServePatch(const httplib::Request& request, const ResourceType& type,
                          const RequestInfo& info, httplib::Response& response);

  ObjectStore* const store_;
  ApiOperations* const operations_;
  RequestPolicy* const policy_;
  FrontendOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  std::atomic<bool> listener_done_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int> port_{0};
};

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_HTTP_FRONTEND_H_
