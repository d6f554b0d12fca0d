// TestServer: a cpp-httplib server on 127.0.0.1 (a free port) for the promql tests.
//
// Register handlers on server() before Start(). Handlers that must outlast a client's timeout
// block in WaitForRelease(), which returns once the test ends (the destructor releases them
// before stopping, so teardown never waits out a sleeping handler).
//
// Thread-safety: handlers run on the server's worker threads; the rest is for the test thread.
#ifndef HPTRAIN_TESTS_CONTROLLER_PROMQL_TEST_SERVER_H_
#define HPTRAIN_TESTS_CONTROLLER_PROMQL_TEST_SERVER_H_

#include <httplib.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace hptrain::promql::testing {

class TestServer {
 public:
  // Plain HTTP.
  TestServer();
  // HTTPS with the PEM files at `cert_path` and `key_path`.
  TestServer(const std::string& cert_path, const std::string& key_path);
  ~TestServer();
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  httplib::Server& server() { return *server_; }

  // Binds a free port and serves on a thread; returns once the server runs. Aborts when the
  // server cannot be set up (bad TLS material, no port): no test could run.
  void Start();

  int port() const { return port_; }
  // "http://127.0.0.1:<port>" (https for the TLS server).
  std::string url() const;

  // For handlers: blocks until the test ends or `limit` passes.
  void WaitForRelease(absl::Duration limit) { release_.WaitForNotificationWithTimeout(limit); }

 private:
  std::unique_ptr<httplib::Server> server_;
  bool https_ = false;
  int port_ = 0;
  std::thread thread_;
  absl::Notification release_;
};

// A TCP port on 127.0.0.1 that nothing listens on (bound, then released).
int UnusedPort();

}  // namespace hptrain::promql::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_PROMQL_TEST_SERVER_H_
