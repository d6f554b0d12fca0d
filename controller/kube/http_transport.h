// HttpTransport: one HTTP(S) exchange with the API server, authenticated as the Config says.
//
// Owns the TLS setup, the bearer token (re-read from Config::token_file at most once a minute)
// and a small pool of keep-alive connections. TLS trusts the configured CA bundle only (the
// system store only when no CA is configured), checks the server's host name or IP against its
// certificate, presents the client certificate when one is configured, and verifies nothing
// with insecure-skip-tls-verify. Every request carries Authorization (when a token is
// configured), User-Agent, Accept: application/json and a timeout. Paths are sent as given: the
// caller encodes them (query.h); a base path from Config::server ("https://host/prefix") is
// prepended.
//
// Errors: a response, whatever its status, is a success at this level (the client decodes API
// errors from it, api_error.h). Transport failures (connect, TLS, read/write, timeout) are
// Unavailable "GET https://host:port/path: <what>"; an aborted request is Cancelled.
//
// Creating a transport sets SIGPIPE to be ignored, process-wide (see Create).
//
// Thread-safety: Do and Stream may be called concurrently from any number of threads; each call
// uses its own connection. Blocking: both block for the exchange, bounded by the timeout (per
// connect/read/write wait), or until cancelled.
#ifndef HPTRAIN_CONTROLLER_KUBE_HTTP_TRANSPORT_H_
#define HPTRAIN_CONTROLLER_KUBE_HTTP_TRANSPORT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/kube/canceller.h"
#include "controller/kube/config.h"

namespace httplib {
class ClientImpl;
}  // namespace httplib

namespace hptrain::kube {

struct HttpRequest {
  std::string method = "GET";
  std::string target;  // "/api/v1/namespaces/x/pods?labelSelector=..." (encoded)
  std::string body;
  std::string content_type;                       // sent when not empty
  absl::Duration timeout = absl::ZeroDuration();  // zero: Config::timeout
  Canceller* cancel = nullptr;                    // optional, not owned
};

struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string body;  // for Stream: only the body of a non-2xx response
};

// Receives the pieces of a streamed body as they arrive; returning false stops the stream (the
// call then returns Cancelled).
using BodyReceiver = std::function<bool(absl::string_view piece)>;

class HttpTransport {
 public:
  // Validates the config (server URL; PEM material for https). InvalidArgument on a bad config.
  // The first call ignores SIGPIPE for the whole process, so that writing to a connection the
  // server has closed fails with an error instead of killing the process.
  static absl::StatusOr<std::unique_ptr<HttpTransport>> Create(Config config);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // One request; the whole body is returned.
  absl::StatusOr<HttpResponse> Do(const HttpRequest& request);

  // One request whose 2xx body is handed to `receiver` piece by piece as it arrives (a watch).
  // A non-2xx body is collected into the returned response instead. The connection is not
  // reused.
  absl::StatusOr<HttpResponse> Stream(const HttpRequest& request, const BodyReceiver& receiver);

  const Config& config() const { return config_; }

 private:
  HttpTransport(Config config, ServerAddress server);

  absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> NewClient();
  absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> AcquireClient();
  void ReleaseClient(std::unique_ptr<httplib::ClientImpl> client);
  std::string BearerToken();
  absl::StatusOr<HttpResponse> Send(httplib::ClientImpl& client, const HttpRequest& request,
                                    const BodyReceiver* receiver);

  const Config config_;
  const ServerAddress server_;

  absl::Mutex pool_mu_;
  std::vector<std::unique_ptr<httplib::ClientImpl>> idle_ ABSL_GUARDED_BY(pool_mu_);

  absl::Mutex token_mu_;
  std::string token_ ABSL_GUARDED_BY(token_mu_);
  absl::Time token_read_at_ ABSL_GUARDED_BY(token_mu_) = absl::InfinitePast();
};

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_HTTP_TRANSPORT_H_
