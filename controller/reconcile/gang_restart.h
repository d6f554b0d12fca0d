// Gang restart: when one pod of a job fails, every pod is deleted and the whole gang recreated
// (a data-parallel job cannot continue without one of its ranks, and survivors would only hit
// collective timeouts later, each at its own time). status.restarts counts these restarts and
// must stay right whatever point the controller is killed at, and however often an event is
// replayed. The protocol:
//
//   1. Every pod is created with the annotation hptrain.io/restart-generation: "<n>", n being
//      status.restarts at the time.
//   2. The counter in force is n = max(status.restarts, the highest generation on any owned pod).
//      Normally that is status.restarts; the pods' annotations only keep the budget from going
//      backwards if status was lost or rolled back.
//   3. A live pod is current when its name is a desired one, its generation is n and its spec hash
//      is the job's (parsed_job.h). Any other live pod is stale.
//   4. A current pod in phase Failed is a failure of generation n: the reconciler writes
//      status.restarts = n + 1 FIRST (the Plan's status is applied before its deletes), then
//      deletes all live pods. If the controller dies after the status write, the next pass sees
//      the failed pod at generation n < n + 1: stale, deleted, not counted again. If it dies
//      before, the next pass makes the same decision again. Several pods failing in one
//      generation count once.
//   5. Stale pods are deleted and recreated at generation n without counting anything: an
//      outdated spec, or a pod from before a restart whose deletion was interrupted.
//   6. Pods being deleted (deletionTimestamp set) are never counted and never deleted again; a
//      pod killed by its deletion may report Failed on its way out.
// Nothing resets the counter: not suspension, not a spec change, not cleanup.
//
// Pure; thread-safe. Returned views point into `pods`.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_GANG_RESTART_H_
#define HPTRAIN_CONTROLLER_RECONCILE_GANG_RESTART_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "controller/reconcile/observed_objects.h"

namespace hptrain::reconcile {

struct GangAssessment {
  int64_t restarts = 0;                 // the counter in force (step 2)
  std::vector<const PodView*> current;  // live, desired, generation `restarts`, current spec
  std::vector<const PodView*> stale;    // live, and not current: delete without counting
  const PodView* failed = nullptr;      // a current pod in phase Failed (the first by name)
};

// Sorts the owned pods of `pods` per steps 2, 3 and 4. `desired_names` are the names of the
// pods the job should have now; `spec_hash` is ParsedJob::spec_hash.
GangAssessment AssessGang(int64_t recorded_restarts, const ObservedPods& pods,
                          const std::vector<std::string>& desired_names,
                          absl::string_view spec_hash);

// The counter in force when the spec cannot be read (step 2 without steps 3 and 4).
int64_t RestartsInForce(int64_t recorded_restarts, const ObservedPods& pods);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_GANG_RESTART_H_
