// WebhookServer: the validating admission webhook over HTTPS (admission.h), served by
// hptrain-controller beside its metrics.
//
//   POST /validate-trainingjob   an AdmissionReview in, its answer out (400 for a body that is
//                                not one); any other path 404
//
// The serving certificate and key are PEM files (`tls.crt`, `tls.key`: a kubernetes.io/tls
// Secret mounted as a directory, as cert-manager or the chart writes it). The server looks at
// their modification times every `reload_interval` and, when they changed (cert-manager renews
// a certificate before it expires; the kubelet updates the mounted Secret), serves with the new
// pair from then on, without a restart of the process. Every replica serves, leader or not: the
// webhook's Service selects them all.
//
// Thread-safety: Start/Stop for the owner's thread; port() from any.
#ifndef HPTRAIN_CONTROLLER_WEBHOOK_WEBHOOK_SERVER_H_
#define HPTRAIN_CONTROLLER_WEBHOOK_WEBHOOK_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace httplib {
class SSLServer;
}

namespace hptrain::webhook {

struct WebhookServerOptions {
  std::string host = "0.0.0.0";
  int port = 9443;         // 0 = an ephemeral port (see port())
  std::string cert_file;   // PEM certificate chain
  std::string key_file;    // PEM private key
  absl::Duration reload_interval = absl::Seconds(10);
};

class WebhookServer {
 public:
  explicit WebhookServer(WebhookServerOptions options);
  ~WebhookServer();
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  // Loads the pair and starts serving. InvalidArgument "--webhook-cert-dir: ..." when the files
  // are missing or do not hold a certificate and its key; AlreadyExists when the port is taken.
  absl::Status Start();
  // Stops serving. Idempotent.
  void Stop();
  int port() const { return port_.load(); }
  // Times the certificate was (re)loaded, the first load included.
  int loads() const { return loads_.load(); }

 private:
  // A server for the current files, bound to `port` (0: any); sets *bound.
  absl::Status Serve(int port);
  void WatchFiles();
  std::string Stamp() const;  // the files' modification times, "" when unreadable

  const WebhookServerOptions options_;
  absl::Mutex mu_;
  std::unique_ptr<httplib::SSLServer> server_ ABSL_GUARDED_BY(mu_);
  std::thread serve_thread_;
  std::thread watch_thread_;
  std::unique_ptr<absl::Notification> stop_;
  std::atomic<int> port_{0};
  std::atomic<int> loads_{0};
  std::string stamp_;  // watch thread only, after Start
};

}  // namespace hptrain::webhook

#endif  // HPTRAIN_CONTROLLER_WEBHOOK_WEBHOOK_SERVER_H_
