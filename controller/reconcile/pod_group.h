// The PodGroup a gang-scheduled TrainingJob owns (spec.gangScheduling.enabled), one per job,
// named like the job, in the job's namespace:
//
//   volcano             scheduling.volcano.sh/v1beta1 PodGroup
//                         spec {minMember, minTaskMember {ps, worker}, queue, priorityClassName}
//                         status.phase: Pending | Inqueue | Running | Unknown | Completed
//   scheduler-plugins   scheduling.x-k8s.io/v1alpha1 PodGroup (the coscheduling plugin)
//                         spec {minMember, scheduleTimeoutSeconds}; priorityClassName is not a
//                         field of this kind: the pods carry it
//                         status.phase: Pending | PreScheduling | Scheduling | Scheduled |
//                                       Running | Succeeded | Failed | Finished
//
// minMember is every pod of the job: the ps shards (or the coordinator's one ps pod) plus every
// worker, since a training gang runs only complete. The pods name the group through the
// provider's marker (desired_objects.h). The job is the PodGroup's controller owner, so it is
// deleted with the job. A PodGroup whose spec no longer matches (a scaled job, another queue) is
// deleted and created again by the next pass; the scheduler reads a PodGroup when it admits the
// gang, so the pods of the new gang are admitted under the new one.
//
// Pure; thread-safe.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_POD_GROUP_H_
#define HPTRAIN_CONTROLLER_RECONCILE_POD_GROUP_H_

#include <optional>
#include <string>
#include <vector>

#include "controller/reconcile/object_meta.h"
#include "controller/reconcile/parsed_job.h"

namespace hptrain::reconcile {

inline constexpr char kVolcanoPodGroupApiVersion[] = "scheduling.volcano.sh/v1beta1";
inline constexpr char kSchedulerPluginsPodGroupApiVersion[] = "scheduling.x-k8s.io/v1alpha1";
inline constexpr char kPodGroupKind[] = "PodGroup";

// The PodGroup `job` should own, or nullopt without gang scheduling. `ps_pods` and `workers`
// count the job's pods.
std::optional<Json> BuildPodGroup(const ParsedJob& job, int ps_pods, int workers);

// True when `observed` (a PodGroup read from the API) has the spec fields `desired` sets, with
// the same values: fields the scheduler or an admission webhook added are not compared.
bool PodGroupMatches(const Json& observed, const Json& desired);

// status.phase of `pod_group`; "" when it has none yet (the scheduler has not looked at it).
std::string PodGroupPhase(const Json& pod_group);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_POD_GROUP_H_
