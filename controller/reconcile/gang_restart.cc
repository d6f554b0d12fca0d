#include "controller/reconcile/gang_restart.h"

#include <algorithm>

namespace hptrain::reconcile {

int64_t RestartsInForce(int64_t recorded_restarts, const ObservedPods& pods) {
  int64_t n = std::max<int64_t>(recorded_restarts, 0);
  for (const PodView& pod : pods.owned) n = std::max(n, pod.restart_generation);
  return n;
}

GangAssessment AssessGang(int64_t recorded_restarts, const ObservedPods& pods,
                          const std::vector<std::string>& desired_names,
                          absl::string_view spec_hash) {
  GangAssessment out;
  out.restarts = RestartsInForce(recorded_restarts, pods);
  for (const PodView& pod : pods.owned) {
    if (pod.terminating) continue;
    bool desired =
        std::find(desired_names.begin(), desired_names.end(), pod.name) != desired_names.end();
    if (!desired || pod.restart_generation != out.restarts || pod.spec_hash != spec_hash) {
      out.stale.push_back(&pod);
      continue;
    }
    out.current.push_back(&pod);
    if (pod.phase == "Failed" && out.failed == nullptr) out.failed = &pod;
  }
  return out;
}

}  // namespace hptrain::reconcile
