// TrainingJob status conditions with metav1.Condition semantics.
//
// status.conditions is a list of {type, status, reason, message, lastTransitionTime,
// observedGeneration}, at most one per type, where status is "True", "False" or "Unknown" and
// reason is CamelCase. lastTransitionTime changes only when a condition appears or its status
// flips; a new reason or message alone leaves it alone. Readers must look at a condition's
// status, never just at its presence or position (a Suspended condition stays in the list, with
// status False, after a resume).
//
// Condition types of a TrainingJob: Created, Running, Rebalanced, Succeeded, Failed, Suspended,
// BelowMinReplicas (elastic jobs).
// Pure; thread-safe on distinct arguments.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_CONDITIONS_H_
#define HPTRAIN_CONTROLLER_RECONCILE_CONDITIONS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "controller/reconcile/object_meta.h"

namespace hptrain::reconcile {

inline constexpr char kConditionCreated[] = "Created";
inline constexpr char kConditionRunning[] = "Running";
inline constexpr char kConditionRebalanced[] = "Rebalanced";
inline constexpr char kConditionSucceeded[] = "Succeeded";
inline constexpr char kConditionFailed[] = "Failed";
inline constexpr char kConditionSuspended[] = "Suspended";
// Elastic jobs only (reconciler.h, "Elastic jobs").
inline constexpr char kConditionBelowMinReplicas[] = "BelowMinReplicas";

inline constexpr char kTrue[] = "True";
inline constexpr char kFalse[] = "False";
inline constexpr char kUnknown[] = "Unknown";

struct Condition {
  std::string type;
  std::string status;  // kTrue | kFalse | kUnknown
  std::string reason;
  std::string message;
};

// What SetCondition did.
enum class ConditionChange {
  kNone,        // identical condition already present
  kUpdated,     // same status; reason, message or observedGeneration changed
  kTransition,  // added, or its status flipped: lastTransitionTime is now `now`
};

// Adds or updates `condition` in (*status)["conditions"], creating the list if needed and
// keeping the order of existing entries (a new type is appended). `observed_generation` is the
// job's metadata.generation the condition was computed from.
ConditionChange SetCondition(Json* status, const Condition& condition, int64_t observed_generation,
                             absl::Time now);

// The condition of `type` in status.conditions, or nullptr.
const Json* FindCondition(const Json& status, absl::string_view type);

// True when the condition of `type` is present with status "True".
bool IsConditionTrue(const Json& status, absl::string_view type);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_CONDITIONS_H_
