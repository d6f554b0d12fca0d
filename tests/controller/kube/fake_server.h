// FakeServer: a minimal scripted HTTP/1.1 server on 127.0.0.1 for the kube client's tests.
//
// Every connection serves exactly one request: the server reads it (request line, headers, a
// Content-Length body), records it, and hands it to the test's handler together with the
// Connection, on which the handler writes whatever bytes it likes: a whole response, a chunked
// stream written piece by piece, the raw bytes of a recorded exchange. The connection is closed
// when the handler returns. Stop() shuts every open connection down, so a handler blocked in
// WaitClosed() or a write returns, and joins all threads.
//
// Thread-safety: handlers run on per-connection threads, concurrently; requests() and
// ClearRequests() are safe from any thread.
#ifndef HPTRAIN_TESTS_CONTROLLER_KUBE_FAKE_SERVER_H_
#define HPTRAIN_TESTS_CONTROLLER_KUBE_FAKE_SERVER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hptrain::kube::testing {

struct RecordedRequest {
  std::string method;
  std::string target;                          // path and query as sent
  std::string path;                            // before '?'
  std::string query;                           // after '?', still encoded
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;

  std::string Header(absl::string_view name) const;
  // Decoded query parameters in order.
  std::vector<std::pair<std::string, std::string>> Params() const;
  // The first value of `key`, or "".
  std::string Param(absl::string_view key) const;
};

// Percent-decodes a query component ('+' stays '+').
std::string PercentDecode(absl::string_view text);

class Connection {
 public:
  explicit Connection(int fd, const std::atomic<bool>* stopping) : fd_(fd), stopping_(stopping) {}

  bool Write(absl::string_view bytes);
  // A whole response with Content-Length and "Connection: close".
  bool Respond(int status, absl::string_view body,
               absl::string_view content_type = "application/json");
  // A chunked 200 response, written piece by piece.
  bool StartChunked(int status = 200, absl::string_view content_type = "application/json");
  bool Chunk(absl::string_view data);
  bool EndChunked();
  // Blocks until the client closes its side, the server stops, or `timeout`; true unless the
  // timeout passed.
  bool WaitClosed(absl::Duration timeout);
  bool stopping() const { return stopping_->load(); }

 private:
  int fd_;
  const std::atomic<bool>* stopping_;
};

class FakeServer {
 public:
  using Handler = std::function<void(const RecordedRequest& request, Connection& connection)>;

  explicit FakeServer(Handler handler);
  ~FakeServer();
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  // Listens on 127.0.0.1 with an ephemeral port.
  absl::Status Start();
  void Stop();

  int port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:<port>"

  std::vector<RecordedRequest> requests() const;
  void ClearRequests();

 private:
  void AcceptLoop();
  void Serve(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;

  mutable absl::Mutex mu_;
  std::vector<RecordedRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::set<int> open_fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

// A status line's reason phrase for common codes ("OK", "Not Found", ...).
const char* ReasonPhrase(int status);

}  // namespace hptrain::kube::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_KUBE_FAKE_SERVER_H_
