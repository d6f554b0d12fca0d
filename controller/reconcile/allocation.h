// Recording a batch allocation in TrainingJob.status: the helper the rebalancer calls after
// the coordinator accepted a new allocation (SetAllocation), so that `kubectl get tj -o yaml`
// and the dashboards show what the workers now compute.
//
// It writes status.workers[r].batchSize for every rank r, increments allocationGeneration, sets
// lastRebalanceTime, and sets condition Rebalanced=True (reason Rebalanced; its
// lastTransitionTime moves only on the first rebalance, lastRebalanceTime on every one), and
// returns the Normal event Rebalanced to record. The reconciler keeps these fields as they are
// (worker_status.h), as long as the batch sizes still add up to the job's global batch.
//
// Pure; thread-safe.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_ALLOCATION_H_
#define HPTRAIN_CONTROLLER_RECONCILE_ALLOCATION_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "controller/reconcile/events.h"
#include "controller/reconcile/object_meta.h"

namespace hptrain::reconcile {

struct AllocationRecord {
  Json status;  // the job's complete new status, to write through the /status subresource
  Event event;  // Normal Rebalanced
};

// Records `batch_sizes` (one per rank, rank order) for the TrainingJob `job` (as last read, with
// the status the reconciler wrote). Errors:
//   InvalidArgument  the job's spec does not parse, the number of batch sizes is not the
//                    job's number of workers, a batch size is < 1, or they do not add up to
//                    spec.globalBatchSize;
//   FailedPrecondition  status.workers does not list every rank yet (the reconciler has not
//                    seen the job's pods).
absl::StatusOr<AllocationRecord> RecordAllocation(const Json& job,
                                                  const std::vector<int>& batch_sizes,
                                                  absl::Time now);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_ALLOCATION_H_
