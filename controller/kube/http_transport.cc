#include "controller/kube/http_transport.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <mutex>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "controller/kube/tls.h"
#include "runtime/base/status.h"

namespace hptrain::kube {
namespace {

constexpr size_t kMaxIdleConnections = 8;
constexpr absl::Duration kTokenRefreshInterval = absl::Minutes(1);
constexpr absl::Duration kMaxConnectTimeout = absl::Seconds(10);

void SetTimeouts(httplib::ClientImpl& client, absl::Duration timeout) {
  auto split = [](absl::Duration d, time_t* sec, time_t* usec) {
    int64_t micros = std::max<int64_t>(absl::ToInt64Microseconds(d), 1000);
    *sec = static_cast<time_t>(micros / 1000000);
    *usec = static_cast<time_t>(micros % 1000000);
  };
  time_t sec = 0;
  time_t usec = 0;
  split(std::min(timeout, kMaxConnectTimeout), &sec, &usec);
  client.set_connection_timeout(sec, usec);
  split(timeout, &sec, &usec);
  client.set_read_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
}

bool IsSuccess(int status) { return status >= 200 && status < 300; }

// The handshake runs on the calling thread: the verify callback leaves the reason of a rejected
// certificate here for the error message.
thread_local int last_verify_error = X509_V_OK;

int RecordVerifyError(int preverify_ok, X509_STORE_CTX* store) {
  if (preverify_ok != 1) last_verify_error = X509_STORE_CTX_get_error(store);
  return preverify_ok;
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Server verification is done by OpenSSL during the handshake, configured here on the client's
// SSL_CTX, rather than by httplib: httplib 0.11 adds the system trust store to any CA store it
// is given (SSL_CTX_set_default_verify_paths), and a cluster CA must be the only one trusted.
// httplib's own check is switched off, so it leaves the context's verify mode alone.
absl::Status ConfigureVerification(const Config& config, SSL_CTX* ctx, const std::string& host) {
  if (config.insecure_skip_tls_verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
    return absl::OkStatus();
  }
  if (!config.ca_pem.empty()) {
    absl::StatusOr<X509StorePtr> store = ParseCaBundlePem(config.ca_pem);
    if (!store.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("certificate authority: ", store.status().message()));
    }
    SSL_CTX_set_cert_store(ctx, store->release());  // the context takes ownership
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return absl::InternalError("cannot load the system trust store");
  }
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
  int ok = IsIpLiteral(host) ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                             : X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  if (ok != 1) return absl::InvalidArgumentError(absl::StrCat("bad server host \"", host, "\""));
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, RecordVerifyError);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpTransport>> HttpTransport::Create(Config config) {
  // httplib writes with send(..., 0): a write to a connection the server has just closed (a
  // pooled keep-alive connection, a watch being torn down) must fail with EPIPE, not kill the
  // process. gRPC makes the same choice.
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { std::signal(SIGPIPE, SIG_IGN); });
  absl::StatusOr<ServerAddress> server = ParseServerUrl(config.server);
  if (!server.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("server: ", server.status().message()));
  }
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return absl::InvalidArgumentError("a client certificate needs both a certificate and a key");
  }
  if (config.user_agent.empty()) config.user_agent = DefaultUserAgent();
  auto transport =
      std::unique_ptr<HttpTransport>(new HttpTransport(std::move(config), *std::move(server)));
  // Builds one client now so that bad PEM material fails here, not at the first request. An
  // http:// server ignores the TLS fields.
  absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> client = transport->NewClient();
  if (!client.ok()) return client.status();
  transport->ReleaseClient(*std::move(client));
  return transport;
}

HttpTransport::HttpTransport(Config config, ServerAddress server)
    : config_(std::move(config)), server_(std::move(server)) {}

HttpTransport::~HttpTransport() = default;

absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> HttpTransport::NewClient() {
  const ServerAddress& server = server_;
  std::unique_ptr<httplib::ClientImpl> client;
  if (server.https) {
    std::unique_ptr<httplib::SSLClient> ssl;
    if (!config_.client_cert_pem.empty()) {
      absl::StatusOr<X509Ptr> cert = ParseCertificatePem(config_.client_cert_pem);
      if (!cert.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("client certificate: ", cert.status().message()));
      }
      absl::StatusOr<EvpPkeyPtr> key = ParsePrivateKeyPem(config_.client_key_pem);
      if (!key.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("client key: ", key.status().message()));
      }
      // SSL_CTX_use_certificate / _PrivateKey take their own references; ours are freed here.
      ssl = std::make_unique<httplib::SSLClient>(server.host, server.port, cert->get(), key->get());
    } else {
      ssl = std::make_unique<httplib::SSLClient>(server.host, server.port);
    }
    ssl->enable_server_certificate_verification(false);  // see ConfigureVerification
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(
          "cannot set up TLS with the client certificate and key (do they match?)");
    }
    HPTRAIN_RETURN_IF_ERROR(ConfigureVerification(config_, ssl->ssl_context(), server.host));
    client = std::move(ssl);
  } else {
    client = std::make_unique<httplib::ClientImpl>(server.host, server.port);
  }
  client->set_keep_alive(true);
  client->set_url_encode(false);
  client->set_follow_location(false);
  return client;
}

absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> HttpTransport::AcquireClient() {
  {
    absl::MutexLock lock(&pool_mu_);
    if (!idle_.empty()) {
      std::unique_ptr<httplib::ClientImpl> client = std::move(idle_.back());
      idle_.pop_back();
      return client;
    }
  }
  return NewClient();
}

void HttpTransport::ReleaseClient(std::unique_ptr<httplib::ClientImpl> client) {
  absl::MutexLock lock(&pool_mu_);
  if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(client));
}

std::string HttpTransport::BearerToken() {
  if (config_.token_file.empty()) return config_.token;
  absl::MutexLock lock(&token_mu_);
  absl::Time now = absl::Now();
  if (token_.empty()) token_ = config_.token;
  if (now - token_read_at_ >= kTokenRefreshInterval) {
    token_read_at_ = now;
    std::ifstream in(config_.token_file, std::ios::binary);
    std::ostringstream contents;
    if (in) contents << in.rdbuf();
    std::string token(absl::StripAsciiWhitespace(contents.str()));
    if (!token.empty()) token_ = std::move(token);  // keep the last good token otherwise
  }
  return token_;
}

absl::StatusOr<HttpResponse> HttpTransport::Send(httplib::ClientImpl& client,
                                                 const HttpRequest& request,
                                                 const BodyReceiver* receiver) {
  std::string what = absl::StrCat(request.method, " ", config_.server, request.target);
  SetTimeouts(client, request.timeout > absl::ZeroDuration() ? request.timeout : config_.timeout);

  httplib::Request req;
  req.method = request.method;
  req.path = absl::StrCat(server_.base_path, request.target);
  req.headers.emplace("User-Agent", config_.user_agent);
  req.headers.emplace("Accept", "application/json");
  if (std::string token = BearerToken(); !token.empty()) {
    req.headers.emplace("Authorization", absl::StrCat("Bearer ", token));
  }
  if (!request.content_type.empty()) req.headers.emplace("Content-Type", request.content_type);
  req.body = request.body;

  Canceller* cancel = request.cancel;
  HttpResponse response;
  bool receiver_stopped = false;
  req.response_handler = [&](const httplib::Response& res) {
    response.status = res.status;
    response.content_type = res.get_header_value("Content-Type");
    return cancel == nullptr || !cancel->cancelled();
  };
  if (receiver != nullptr) {
    req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
      if (cancel != nullptr && cancel->cancelled()) return false;
      if (!IsSuccess(response.status)) {
        response.body.append(data, size);
        return true;
      }
      if (!(*receiver)(absl::string_view(data, size))) {
        receiver_stopped = true;
        return false;
      }
      return true;
    };
  }

  if (cancel != nullptr && !cancel->Attach([&client] { client.stop(); })) {
    return absl::CancelledError(absl::StrCat(what, ": cancelled"));
  }
  last_verify_error = X509_V_OK;
  httplib::Result result = client.send(req);
  if (cancel != nullptr) cancel->Detach();

  if (receiver_stopped) return absl::CancelledError(absl::StrCat(what, ": stopped by the reader"));
  if (cancel != nullptr && cancel->cancelled()) {
    return absl::CancelledError(absl::StrCat(what, ": cancelled"));
  }
  if (!result) {
    std::string why = httplib::to_string(result.error());
    if (last_verify_error != X509_V_OK) {
      why = absl::StrCat("server certificate verification failed: ",
                         X509_verify_cert_error_string(last_verify_error));
    }
    return absl::UnavailableError(absl::StrCat(what, ": ", why));
  }
  response.status = result->status;
  response.content_type = result->get_header_value("Content-Type");
  if (receiver == nullptr) response.body = std::move(result->body);
  return response;
}

absl::StatusOr<HttpResponse> HttpTransport::Do(const HttpRequest& request) {
  absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> client = AcquireClient();
  if (!client.ok()) return client.status();
  absl::StatusOr<HttpResponse> response = Send(**client, request, nullptr);
  if (response.ok()) ReleaseClient(*std::move(client));  // a failed connection is not reused
  return response;
}

absl::StatusOr<HttpResponse> HttpTransport::Stream(const HttpRequest& request,
                                                   const BodyReceiver& receiver) {
  absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> client = NewClient();
  if (!client.ok()) return client.status();
  (*client)->set_keep_alive(false);
  return Send(**client, request, &receiver);
}

}  // namespace hptrain::kube
