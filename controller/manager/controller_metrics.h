// ControllerMetrics: the controller's own Prometheus metrics (names are an interface: the
// controller dashboard, the PodMonitor and tests/deploy/contract.py depend on them).
//
//   hptrain_controller_reconcile_duration_seconds  histogram  one observation per reconcile pass
//   hptrain_controller_reconcile_errors_total      counter    passes that ended in an error
//                                                             (and were requeued with backoff)
//   hptrain_controller_queue_depth                 gauge      keys ready in the work queue
//   hptrain_controller_is_leader                   gauge      1 while this replica reconciles
//   hptrain_controller_rebalances_total            counter    Rebalanced events recorded
//
// They live in a runtime/metrics Registry (the one the process serves on /metrics), created
// there at construction so each is exposed, at 0, from the start.
//
// Thread-safety: the pointers are set at construction and the metrics are lock-free; use from
// any thread.
#ifndef HPTRAIN_CONTROLLER_MANAGER_CONTROLLER_METRICS_H_
#define HPTRAIN_CONTROLLER_MANAGER_CONTROLLER_METRICS_H_

#include "runtime/metrics/registry.h"

namespace hptrain::manager {

struct ControllerMetrics {
  // Registers the families in `registry` (not owned; must outlive this). Registering twice in
  // one registry returns the same metrics.
  explicit ControllerMetrics(metrics::Registry* registry);

  metrics::Histogram* reconcile_duration;
  metrics::Counter* reconcile_errors;
  metrics::Gauge* queue_depth;
  metrics::Gauge* is_leader;
  metrics::Counter* rebalances;
};

}  // namespace hptrain::manager

#endif  // HPTRAIN_CONTROLLER_MANAGER_CONTROLLER_METRICS_H_
