#include "controller/webhook/webhook_server.h"

#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "controller/kube/log.h"
#include "controller/webhook/admission.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace hptrain::webhook {
namespace {

std::string MTime(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  return absl::StrCat(st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, "/", st.st_size);
}

void Handle(const httplib::Request& request, httplib::Response& response) {
  nlohmann::json review = nlohmann::json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  absl::StatusOr<nlohmann::json> answer = ReviewTrainingJob(review);
  if (!answer.ok()) {
    response.status = 400;
    response.set_content(std::string(answer.status().message()) + "\n", "text/plain");
    return;
  }
  response.set_content(answer->dump(), "application/json");
}

}  // namespace

WebhookServer::WebhookServer(WebhookServerOptions options) : options_(std::move(options)) {}

WebhookServer::~WebhookServer() { Stop(); }

std::string WebhookServer::Stamp() const {
  std::string cert = MTime(options_.cert_file);
  std::string key = MTime(options_.key_file);
  if (cert.empty() || key.empty()) return "";
  return cert + "|" + key;
}

absl::Status WebhookServer::Serve(int port) {
  auto server = std::make_unique<httplib::SSLServer>(options_.cert_file.c_str(),
                                                     options_.key_file.c_str());
  if (!server->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--webhook-cert-dir: ", options_.cert_file, " and ", options_.key_file,
        " must hold a PEM certificate and its private key"));
  }
  server->Post(kValidatePath, Handle);
  server->set_read_timeout(10, 0);
  server->set_write_timeout(10, 0);
  int bound = port;
  if (port == 0) {
    bound = server->bind_to_any_port(options_.host);
    if (bound <= 0) return absl::AlreadyExistsError("--webhook-address: cannot bind a port");
  } else if (!server->bind_to_port(options_.host, port)) {
    return absl::AlreadyExistsError(
        absl::StrCat("--webhook-address: cannot bind ", options_.host, ":", port,
                     " (in use, or not allowed)"));
  }
  httplib::SSLServer* raw = server.get();
  {
    absl::MutexLock lock(&mu_);
    server_ = std::move(server);
  }
  port_ = bound;
  ++loads_;
  serve_thread_ = std::thread([raw] { raw->listen_after_bind(); });
  // httplib's stop() does nothing until the listening loop has started, so a Stop() (or a
  // reload) right after this would leave the loop in accept() for good: wait for it (bounded,
  // in case the loop ends at once).
  for (int i = 0; i < 500 && !raw->is_running(); ++i) absl::SleepFor(absl::Milliseconds(10));
  return absl::OkStatus();
}

absl::Status WebhookServer::Start() {
  if (stop_ != nullptr) return absl::FailedPreconditionError("the webhook server is started");
  stamp_ = Stamp();
  if (stamp_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--webhook-cert-dir: cannot read ",
                                                   options_.cert_file, " and ",
                                                   options_.key_file));
  }
  absl::Status status = Serve(options_.port);
  if (!status.ok()) return status;
  stop_ = std::make_unique<absl::Notification>();
  watch_thread_ = std::thread([this] { WatchFiles(); });
  return absl::OkStatus();
}

void WebhookServer::WatchFiles() {
  while (!stop_->WaitForNotificationWithTimeout(options_.reload_interval)) {
    const std::string stamp = Stamp();
    if (stamp.empty() || stamp == stamp_) continue;
    // Checked before the running server is touched: files caught half-written are looked at
    // again next time, and the old pair serves meanwhile.
    if (!httplib::SSLServer(options_.cert_file.c_str(), options_.key_file.c_str()).is_valid()) {
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      server_->stop();
    }
    if (serve_thread_.joinable()) serve_thread_.join();
    absl::Status status = Serve(port_.load());
    if (!status.ok()) {
      kube::LogLine(absl::StrCat("webhook: reloading the certificate failed: ", status.message()));
      continue;  // retried at the next tick: the stamp is not taken
    }
    stamp_ = stamp;
    kube::LogLine("webhook: serving with the renewed certificate");
  }
}

void WebhookServer::Stop() {
  if (stop_ == nullptr) return;
  stop_->Notify();
  watch_thread_.join();
  {
    absl::MutexLock lock(&mu_);
    if (server_ != nullptr) server_->stop();
  }
  if (serve_thread_.joinable()) serve_thread_.join();
  absl::MutexLock lock(&mu_);
  server_.reset();
  stop_.reset();
  port_ = 0;
}

}  // namespace hptrain::webhook
