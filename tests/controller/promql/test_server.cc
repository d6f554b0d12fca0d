#include "tests/controller/promql/test_server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace hptrain::promql::testing {

TestServer::TestServer() : server_(std::make_unique<httplib::Server>()) {}

TestServer::TestServer(const std::string& cert_path, const std::string& key_path)
    : server_(std::make_unique<httplib::SSLServer>(cert_path.c_str(), key_path.c_str())),
      https_(true) {}

TestServer::~TestServer() {
  release_.Notify();
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

void TestServer::Start() {
  if (!server_->is_valid()) {
    std::fprintf(stderr, "TestServer: invalid server (TLS material?)\n");
    std::abort();
  }
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) {
    std::fprintf(stderr, "TestServer: cannot bind 127.0.0.1\n");
    std::abort();
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // stop() before the listener loop starts would be lost; the socket accepts connections
  // already, so this wait is only for teardown's sake.
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

std::string TestServer::url() const {
  return absl::StrCat(https_ ? "https" : "http", "://127.0.0.1:", port_);
}

int UnusedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) std::abort();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::abort();
  }
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace hptrain::promql::testing
