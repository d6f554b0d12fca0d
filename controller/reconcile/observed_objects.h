// What the reconciler sees of the objects that exist: the owned pods reduced to the facts its
// decisions use, and the state of a name (free, ours, ours but being deleted, someone else's).
//
// "Owned" means controlled by this TrainingJob (labels.h, IsControlledBy). An object carrying
// the job's labels without its controller reference (left over from an earlier job of the same
// name, or made by hand) is foreign: never adopted, never deleted, never counted, but its name is
// taken, so nothing is created over it.
//
// Pure; thread-safe. Views point into the input vector, which must outlive them.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_OBSERVED_OBJECTS_H_
#define HPTRAIN_CONTROLLER_RECONCILE_OBSERVED_OBJECTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "controller/reconcile/object_meta.h"

namespace hptrain::reconcile {

struct PodView {
  const Json* object = nullptr;
  std::string name;
  std::string uid;
  std::string role;                 // labels.h: kRolePs | kRoleWorker | "" (unknown)
  int rank = -1;                    // -1 when the rank label is missing or malformed
  std::string phase;                // status.phase; "" when the kubelet has not reported yet
  bool terminating = false;         // metadata.deletionTimestamp set
  bool ready = false;               // status condition Ready is True
  std::string node;                 // spec.nodeName
  int64_t restart_generation = -1;  // -1 when the annotation is missing or malformed
  std::string spec_hash;            // "" when the annotation is missing
};

struct ObservedPods {
  // The job's pods, live and terminating, sorted by name (the informer's order does not matter).
  std::vector<PodView> owned;
  // Names taken by a pod of any owner (owned or foreign, live or terminating), sorted.
  std::vector<std::string> taken;

  bool IsTaken(absl::string_view name) const;
  // The owned pod named `name`, or nullptr.
  const PodView* Owned(absl::string_view name) const;
};

// Reduces `pods` (the pods the informer lists under the job's label) for `job`.
ObservedPods ObservePods(const std::vector<Json>& pods, const Json& job);

enum class NameState { kFree, kOwned, kOwnedTerminating, kForeign };

// The state of the object named `name` among `objects` for `job`; `*found` (optional) is set to
// the object when there is one. Used for the Service and the Secret.
NameState LookupName(const std::vector<Json>& objects, absl::string_view name, const Json& job,
                     const Json** found = nullptr);

// Why a failed pod failed, for events and messages: the first terminated container's reason and
// exit code, else the pod's status.reason and message, e.g.
// "container worker: OOMKilled, exit code 137" or
// "Evicted: The node was low on resource: memory.". "" when the pod says nothing.
std::string FailureSummary(const Json& pod);

// The exit code of the pod's first container (init containers first) that terminated with a
// non-zero code; -1 when none did (an evicted or lost pod).
int64_t FailedExitCode(const Json& pod);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_OBSERVED_OBJECTS_H_
