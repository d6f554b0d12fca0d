// The container of a pod template that the controller rewrites: in a worker template the
// container named "worker", else the first; in spec.ps.template the one named "ps", else the
// first (pod_template.h). Its command is always the controller's: `hptrain worker` or
// `hptrain ps`, which read the job from the job Secret and their places in it from the HPTRAIN_*
// environment, or, in the workers of a spec.trainer job, spec.trainer.command. A template that
// sets that container's command would see it replaced without a word, so it is refused.
//
// Its args are refused too where the container runs hptrain (the ps, and the workers of a job
// without spec.trainer): hptrain's processes take every setting from the job's spec, and args
// there were passed on as extra flags. In the workers of a spec.trainer job the template's args
// stay allowed: they follow spec.trainer.args, so that each worker group may add its own
// (documented in the CRD's description of the field).
#ifndef HPTRAIN_CONTROLLER_RECONCILE_REWRITTEN_CONTAINER_H_
#define HPTRAIN_CONTROLLER_RECONCILE_REWRITTEN_CONTAINER_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "controller/reconcile/object_meta.h"

namespace hptrain::reconcile {

// The index in `pod_template`'s spec.containers of the container the controller rewrites for
// `role` ("worker" | "ps"): the first one named `role`, else 0 (also when the template has no
// containers: the controller then adds one). Pure; thread-safe.
size_t RewrittenContainerIndex(const Json& pod_template, absl::string_view role);

// OK unless the rewritten container of `pod_template` (a PodTemplateSpec at field path `path`,
// e.g. "spec.workerGroups[0].template") sets command, or sets args while it runs hptrain
// (`runs_trainer` false); then InvalidArgument, e.g.
// "spec.workerGroups[0].template.spec.containers[0].command: is set by the controller (it runs
// `hptrain worker`, which reads the job's spec from the job Secret); remove it". A null value or
// an empty list counts as not set. Pure; thread-safe.
absl::Status CheckRewrittenContainer(const Json& pod_template, absl::string_view role,
                                     bool runs_trainer, absl::string_view path);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_REWRITTEN_CONTAINER_H_
