// The HPTRAIN_* environment variables belong to hptrain: the controller sets them on every ps
// and worker pod (desired_objects.h lists them), and `hptrain ps|worker` and a spec.trainer
// program (python/hptrain's hp.init()) read them. A pod template may not set one, in the way
// Kubeflow reserves PET_* for its torch plugin: a template's HPTRAIN_RANK would otherwise either
// be dropped without a word or, worse, be read as meant.
//
// Checked where it can be: every container and init container of the template, its env[].name,
// and its envFrom[].prefix (a ConfigMap or Secret whose keys get an HPTRAIN_* prefix). The keys
// of a ConfigMap or Secret imported by envFrom without such a prefix are not known here; they
// cannot override the variables the controller sets, since Kubernetes gives env precedence over
// envFrom.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_RESERVED_ENV_H_
#define HPTRAIN_CONTROLLER_RECONCILE_RESERVED_ENV_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "controller/reconcile/object_meta.h"

namespace hptrain::reconcile {

inline constexpr char kReservedEnvPrefix[] = "HPTRAIN_";

// OK unless `pod_template` (a PodTemplateSpec at field path `path`, e.g.
// "spec.workerGroups[0].template") sets a reserved variable; then InvalidArgument
// "<path>.spec.containers[0].env[1].name: HPTRAIN_RANK is reserved: hptrain sets the HPTRAIN_*
// variables" (an envFrom prefix: "...envFrom[0].prefix: HPTRAIN_X makes names that are reserved:
// ...") for the first one (containers before initContainers, in order). A template shaped
// otherwise than a PodTemplateSpec passes: building its pod reports that. Pure; thread-safe.
absl::Status CheckReservedEnv(const Json& pod_template, absl::string_view path);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_RESERVED_ENV_H_
