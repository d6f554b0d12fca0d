// Which TrainingJob an owned object belongs to: the work-queue key ("namespace/name") the
// controller reconciles when a pod, Service or Secret of a job changes.
//
// The controller owner reference decides (apiVersion hptrain.io/*, kind TrainingJob,
// controller: true): it names the job that created the object, whatever its labels say. An
// object without one falls back to its hptrain.io/job label, so a job still reacts to an object
// of its name it does not own (the reconciler then leaves that object alone, but its name is
// taken, and the job must be looked at again when it goes away).
//
// Pure functions; thread-safe.
#ifndef HPTRAIN_CONTROLLER_MANAGER_OWNER_KEY_H_
#define HPTRAIN_CONTROLLER_MANAGER_OWNER_KEY_H_

#include <optional>
#include <string>

#include "nlohmann/json.hpp"

namespace hptrain::manager {

// The key of the TrainingJob `object` belongs to, in the object's namespace; nullopt when it
// names none (no controller reference to a TrainingJob and no hptrain.io/job label).
std::optional<std::string> OwnerJobKey(const nlohmann::json& object);

}  // namespace hptrain::manager

#endif  // HPTRAIN_CONTROLLER_MANAGER_OWNER_KEY_H_
