#include "controller/manager/controller_metrics.h"

namespace hptrain::manager {

ControllerMetrics::ControllerMetrics(metrics::Registry* registry)
    : reconcile_duration(registry
                             ->Histogram("hptrain_controller_reconcile_duration_seconds",
                                         "Wall time of one TrainingJob reconcile pass, API "
                                         "writes included.")
                             ->Get()),
      reconcile_errors(registry
                           ->Counter("hptrain_controller_reconcile_errors_total",
                                     "Reconcile passes that failed and were requeued with "
                                     "backoff.")
                           ->Get()),
      queue_depth(registry
                      ->Gauge("hptrain_controller_queue_depth",
                              "TrainingJob keys waiting in the work queue, ready to reconcile.")
                      ->Get()),
      is_leader(registry
                    ->Gauge("hptrain_controller_is_leader",
                            "1 while this replica holds the leader lease and reconciles, else 0.")
                    ->Get()),
      rebalances(registry
                     ->Counter("hptrain_controller_rebalances_total",
                               "Batch allocations recorded by the rebalancer (Rebalanced "
                               "events).")
                     ->Get()) {}

}  // namespace hptrain::manager
