#include "controller/reconcile/pod_group.h"

#include <utility>

#include "controller/reconcile/labels.h"

namespace hptrain::reconcile {

std::optional<Json> BuildPodGroup(const ParsedJob& job, int ps_pods, int workers) {
  if (job.gang == GangScheduler::kNone) return std::nullopt;
  const job::GangSchedulingSpec& gang = job.spec.gang_scheduling;
  Json spec = {{"minMember", ps_pods + workers}};
  const char* api_version = kSchedulerPluginsPodGroupApiVersion;
  if (job.gang == GangScheduler::kVolcano) {
    api_version = kVolcanoPodGroupApiVersion;
    // Per role, so that Volcano does not admit a gang of workers without its ps.
    spec["minTaskMember"] = {{kRolePs, ps_pods}, {kRoleWorker, workers}};
    if (!gang.queue.empty()) spec["queue"] = gang.queue;
    if (!gang.priority_class_name.empty()) spec["priorityClassName"] = gang.priority_class_name;
  }
  return Json{{"apiVersion", api_version},
              {"kind", kPodGroupKind},
              {"metadata",
               {{"name", job.name},
                {"namespace", job.ns},
                {"labels", JobLabels(job.name)},
                {"ownerReferences", Json::array({OwnerReference(job.name, job.uid)})}}},
              {"spec", std::move(spec)}};
}

bool PodGroupMatches(const Json& observed, const Json& desired) {
  if (StringAt(observed, {"apiVersion"}) != StringAt(desired, {"apiVersion"})) return false;
  const Json* want = Find(desired, {"spec"});
  const Json* have = Find(observed, {"spec"});
  if (want == nullptr || have == nullptr || !have->is_object()) return want == nullptr;
  for (const auto& [key, value] : want->items()) {
    auto it = have->find(key);
    if (it == have->end() || *it != value) return false;
  }
  // A queue or priority the job no longer names is a difference too (the scheduler does not add
  // them: Volcano's admission fills in the default queue only when none is given, so a
  // "default" queue on a PodGroup created without one is expected).
  if (!want->contains("priorityClassName") && have->contains("priorityClassName")) return false;
  if (!want->contains("queue") && have->contains("queue") && (*have)["queue"] != "default") {
    return false;
  }
  return true;
}

std::string PodGroupPhase(const Json& pod_group) {
  return StringAt(pod_group, {"status", "phase"});
}

}  // namespace hptrain::reconcile
