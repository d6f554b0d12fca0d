// HTTP helpers for the API server double's tests: a JSON request helper and a background watch
// reader, both over cpp-httplib's client on 127.0.0.1.
//
// Thread-safety: TestClient is used from one thread; WatchStream's accessors are thread-safe.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_TEST_HTTP_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_TEST_HTTP_H_

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace httplib {
class Client;
}  // namespace httplib

namespace hptrain::testing {

struct HttpResult {
  int status = 0;       // 0 when the request failed on the wire
  std::string text;     // the raw body
  nlohmann::json body;  // parsed body, or discarded when not JSON
  std::string content_type;
};

class TestClient {
 public:
  // `token` is sent as "Authorization: Bearer <token>" when not empty.
  explicit TestClient(int port, std::string token = "");

  HttpResult Get(const std::string& path) const;
  HttpResult Post(const std::string& path, const nlohmann::json& body) const;
  HttpResult Put(const std::string& path, const nlohmann::json& body) const;
  // PATCH with `content_type` (application/merge-patch+json, ...); `body` is sent as JSON text.
  HttpResult Patch(const std::string& path, const nlohmann::json& body,
                   const std::string& content_type) const;
  HttpResult Delete(const std::string& path, const nlohmann::json& body = nullptr) const;
  // Any request with a raw body; `headers` are added, replacing a default of the same name
  // (Accept) (a header given with an empty value is sent empty, which keeps httplib from adding
  // its own User-Agent).
  HttpResult Send(const std::string& method, const std::string& path, const std::string& body,
                  const std::string& content_type,
                  const std::vector<std::pair<std::string, std::string>>& headers = {}) const;

 private:
  const int port_;
  const std::string token_;
};

// Reads a watch stream (GET `path`, which should carry watch=1) on a background thread, one
// parsed JSON event per line. The destructor disconnects and joins.
class WatchStream {
 public:
  WatchStream(int port, std::string path, std::string token = "");
  ~WatchStream();
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  // Waits until at least `count` events arrived or `timeout` ends; returns all events so far.
  std::vector<nlohmann::json> WaitForEvents(size_t count, absl::Duration timeout);
  // Waits until the server ended the stream; true when it did within `timeout`.
  bool WaitForEnd(absl::Duration timeout);
  std::vector<nlohmann::json> events() const;
  // The HTTP status of the watch response (0 before it arrived or on a wire error).
  int status() const;
  // Every "type" in order.
  std::vector<std::string> types() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<nlohmann::json> events_ ABSL_GUARDED_BY(mu_);
  std::string partial_ ABSL_GUARDED_BY(mu_);
  int status_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<httplib::Client> client_;
  std::thread thread_;
};

// Waits until `resource` has `count` open watches on `server`-like objects exposing
// WatchCount(); see api_server_double.h. Returns false on timeout.
template <typename Server>
bool WaitForWatches(const Server& server, const std::string& resource, size_t count,
                    absl::Duration timeout = absl::Seconds(5)) {
  return server.WaitFor([&] { return server.WatchCount(resource) >= count; }, timeout);
}

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_TEST_HTTP_H_
