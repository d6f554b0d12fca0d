// Endpoints: the controller's HTTP side, on runtime/metrics' MetricsServer.
//
//   --metrics-address   GET /metrics   the registry (Prometheus text format)
//   --health-address    GET /healthz   200 while the process serves (liveness)
//                       GET /readyz    200 once SetReady(true) (the caches synced), else 503
// When both addresses are the same host:port one server answers all three paths. Either may be
// disabled (nullopt). (Each MetricsServer answers all three paths; the health server's /metrics
// is empty, so Prometheus should scrape the metrics port.)
//
// Thread-safety: Start/Stop for the owner's thread; SetReady and the port accessors from any.
#ifndef HPTRAIN_CONTROLLER_MANAGER_ENDPOINTS_H_
#define HPTRAIN_CONTROLLER_MANAGER_ENDPOINTS_H_

#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "controller/manager/flags.h"
#include "runtime/metrics/http_server.h"
#include "runtime/metrics/registry.h"

namespace hptrain::manager {

class Endpoints {
 public:
  // `registry` is not owned and must outlive the endpoints.
  explicit Endpoints(const metrics::Registry* registry) : registry_(registry) {}
  ~Endpoints() { Stop(); }
  Endpoints(const Endpoints&) = delete;
  Endpoints& operator=(const Endpoints&) = delete;

  // Binds and starts the servers (port 0: an ephemeral port, see the accessors). Errors are
  // MetricsServer::Start's (AlreadyExists for a port in use), prefixed with the flag's name;
  // nothing keeps running after an error.
  absl::Status Start(const std::optional<ListenAddress>& metrics,
                     const std::optional<ListenAddress>& health);
  // Stops the servers. Idempotent.
  void Stop();

  void SetReady(bool ready);

  // Bound ports; 0 when that endpoint is disabled or stopped.
  int metrics_port() const;
  int health_port() const;

 private:
  const metrics::Registry* const registry_;
  std::unique_ptr<metrics::MetricsServer> metrics_;
  std::unique_ptr<metrics::MetricsServer> health_;  // null when metrics_ serves health too
  bool shared_ = false;
};

}  // namespace hptrain::manager

#endif  // HPTRAIN_CONTROLLER_MANAGER_ENDPOINTS_H_
