#include "runtime/metrics/http_server.h"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "runtime/base/status.h"
#include "runtime/metrics/exposition.h"

namespace hptrain::metrics {
namespace {

// A scrape every few seconds and the kubelet's probes: a couple of workers are plenty, and
// httplib's default pool (one thread per core, at least 8) would be wasted per process.
constexpr size_t kWorkerThreads = 2;
// Short timeouts bound how long Stop() waits for an idle keep-alive connection.
constexpr time_t kIoTimeoutSeconds = 2;
constexpr std::chrono::seconds kStartTimeout(5);

bool IsBuiltIn(const std::string& path) {
  return path == "/metrics" || path == "/healthz" || path == "/readyz";
}

}  // namespace

MetricsServer::MetricsServer(const Registry* registry) : registry_(registry) {}

MetricsServer::~MetricsServer() { Stop(); }

absl::Status MetricsServer::Handle(const std::string& path, HttpHandler handler) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("handler path \"", path, "\" must start with /"));
  }
  absl::MutexLock lock(&lifecycle_mu_);
  if (server_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot add handler ", path, ": metrics server already started"));
  }
  if (IsBuiltIn(path) || handlers_.count(path) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("handler for ", path, " already registered"));
  }
  handlers_.emplace(path, std::move(handler));
  return absl::OkStatus();
}

HttpResponse MetricsServer::Dispatch(const HttpRequest& request) const {
  if (request.path == "/metrics") {
    return {200, registry_ ? TextExposition(*registry_) : std::string(), kTextContentType};
  }
  if (request.path == "/healthz") return {200, "ok"};
  if (request.path == "/readyz") {
    return ready() ? HttpResponse{200, "ready"} : HttpResponse{503, "not ready"};
  }
  auto it = handlers_.find(request.path);
  if (it == handlers_.end()) return {404, "not found"};
  return it->second(request);
}

absl::Status MetricsServer::Start(const std::string& host, int port) {
  absl::MutexLock lock(&lifecycle_mu_);
  if (server_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics server already running on port ", port_.load()));
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port ", port, " out of range"));
  }

  auto server = std::make_unique<httplib::Server>();
  // httplib's default options set SO_REUSEPORT, which would let a second process bind the same
  // port and steal half the scrapes. SO_REUSEADDR alone still allows a quick restart.
  server->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server->new_task_queue = [] { return new httplib::ThreadPool(kWorkerThreads); };
  server->set_keep_alive_timeout(kIoTimeoutSeconds);
  server->set_read_timeout(kIoTimeoutSeconds);
  server->set_write_timeout(kIoTimeoutSeconds);
  server->Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
    HttpRequest request{req.path, {}};
    for (const auto& [key, value] : req.params) request.params.emplace(key, value);
    HttpResponse response = Dispatch(request);
    res.status = response.status;
    res.set_content(response.body, response.content_type.c_str());
  });

  // httplib reports only success or failure; errno still holds the failed bind()'s code.
  errno = 0;
  int bound =
      port == 0 ? server->bind_to_any_port(host) : (server->bind_to_port(host, port) ? port : -1);
  int err = errno;
  if (bound < 0) {
    if (err == EADDRINUSE) {
      return absl::AlreadyExistsError(
          absl::StrCat("metrics port ", host, ":", port, " already in use"));
    }
    std::string what = absl::StrCat("bind metrics server to ", host, ":", port);
    if (err != 0) return ErrnoStatus(err, what, __FILE__, __LINE__);
    return absl::UnavailableError(absl::StrCat(what, " failed"));
  }

  server_ = std::move(server);
  listener_done_ = false;
  httplib::Server* raw = server_.get();
  listener_ = std::thread([this, raw] {
    raw->listen_after_bind();
    listener_done_ = true;
  });
  // httplib's stop() is a no-op until the listener has set is_running, so wait for that here;
  // then Stop() cannot miss a server that is still starting.
  auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  while (!raw->is_running() && !listener_done_) {
    if (std::chrono::steady_clock::now() > deadline) {
      StopLocked();
      return absl::DeadlineExceededError(
          absl::StrCat("metrics server on ", host, ":", bound, " did not start within 5 s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (listener_done_) {
    StopLocked();
    return absl::InternalError(absl::StrCat("metrics server on ", host, ":", bound, " exited"));
  }
  port_ = bound;
  running_ = true;
  return absl::OkStatus();
}

void MetricsServer::Stop() {
  absl::MutexLock lock(&lifecycle_mu_);
  StopLocked();
}

void MetricsServer::StopLocked() {
  if (server_ == nullptr) return;
  running_ = false;
  // Repeat until the listener exits: covers a listener that has not set is_running yet (only
  // possible on Start's timeout path). Once the socket is closed, further stop() calls are no-ops
  // on an invalid descriptor.
  while (!listener_done_) {
    server_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  listener_.join();
  server_.reset();
  port_ = 0;
}

}  // namespace hptrain::metrics
