#include "controller/reconcile/conditions.h"

#include "controller/reconcile/kube_time.h"

namespace hptrain::reconcile {

const Json* FindCondition(const Json& status, absl::string_view type) {
  const Json* list = Find(status, {"conditions"});
  if (list == nullptr || !list->is_array()) return nullptr;
  for (const Json& c : *list) {
    if (StringAt(c, {"type"}) == type) return &c;
  }
  return nullptr;
}

bool IsConditionTrue(const Json& status, absl::string_view type) {
  const Json* c = FindCondition(status, type);
  return c != nullptr && StringAt(*c, {"status"}) == kTrue;
}

ConditionChange SetCondition(Json* status, const Condition& condition, int64_t observed_generation,
                             absl::Time now) {
  if (!status->is_object()) *status = Json::object();
  Json& list = (*status)["conditions"];
  if (!list.is_array()) list = Json::array();

  Json wanted = {{"type", condition.type},
                 {"status", condition.status},
                 {"reason", condition.reason},
                 {"message", condition.message},
                 {"observedGeneration", observed_generation}};
  for (Json& existing : list) {
    if (StringAt(existing, {"type"}) != condition.type) continue;
    std::string since = StringAt(existing, {"lastTransitionTime"});
    bool flipped = StringAt(existing, {"status"}) != condition.status || since.empty();
    wanted["lastTransitionTime"] = flipped ? FormatKubeTime(now) : since;
    if (existing == wanted) return ConditionChange::kNone;
    existing = std::move(wanted);
    return flipped ? ConditionChange::kTransition : ConditionChange::kUpdated;
  }
  wanted["lastTransitionTime"] = FormatKubeTime(now);
  list.push_back(std::move(wanted));
  return ConditionChange::kTransition;
}

}  // namespace hptrain::reconcile
