#include "controller/manager/endpoints.h"

#include "runtime/base/status.h"

namespace hptrain::manager {

absl::Status Endpoints::Start(const std::optional<ListenAddress>& metrics,
                              const std::optional<ListenAddress>& health) {
  Stop();
  shared_ = metrics.has_value() && health.has_value() && metrics->port != 0 &&
            metrics->host == health->host && metrics->port == health->port;
  if (metrics.has_value()) {
    metrics_ = std::make_unique<metrics::MetricsServer>(registry_);
    absl::Status status = metrics_->Start(metrics->host, metrics->port);
    if (!status.ok()) {
      Stop();
      return Annotate(status, "--metrics-address");
    }
  }
  if (health.has_value() && !shared_) {
    health_ = std::make_unique<metrics::MetricsServer>(nullptr);
    absl::Status status = health_->Start(health->host, health->port);
    if (!status.ok()) {
      Stop();
      return Annotate(status, "--health-address");
    }
  }
  return absl::OkStatus();
}

void Endpoints::Stop() {
  if (metrics_ != nullptr) metrics_->Stop();
  if (health_ != nullptr) health_->Stop();
  metrics_.reset();
  health_.reset();
}

void Endpoints::SetReady(bool ready) {
  if (metrics_ != nullptr) metrics_->SetReady(ready);
  if (health_ != nullptr) health_->SetReady(ready);
}

int Endpoints::metrics_port() const { return metrics_ == nullptr ? 0 : metrics_->port(); }

int Endpoints::health_port() const {
  if (shared_) return metrics_port();
  return health_ == nullptr ? 0 : health_->port();
}

}  // namespace hptrain::manager
