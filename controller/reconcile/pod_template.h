// Turning a user's pod template (spec.workers.template, spec.workerGroups[i].template,
// spec.ps.template) into the Pod the controller creates.
//
// What the user wrote is kept: images, resources (nvidia.com/gpu included), env, volumes and
// mounts, nodeSelector, tolerations, affinity, service account, security contexts, init and
// sidecar containers, extra labels and annotations. What hptrain needs is added, and wins where
// the two collide:
//   * the main container (the one named like the role, else the first) is renamed "ps" or
//     "worker" and runs `hptrain ps|worker` (the user's args stay, as extra flags);
//   * hptrain's env (PodSettings::env) comes first, so the user's variables can refer to it with
//     $(VAR); a user variable of the same name is dropped;
//   * the job's Secret is mounted read-only (volume "hptrain-job");
//   * the container ports named by PodSettings::ports replace user ports of the same name or
//     number;
//   * PodSettings::readiness_probe, when set, unless the main container has its own;
//   * restartPolicy Never (the controller restarts the whole gang, never one pod), hostname and
//     subdomain (stable DNS through the headless Service), schedulerName when one is given;
//   * labels, annotations, name, namespace and the owner reference.
// The result is deterministic: the same inputs give byte-identical JSON. Pure; thread-safe.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_POD_TEMPLATE_H_
#define HPTRAIN_CONTROLLER_RECONCILE_POD_TEMPLATE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/reconcile/object_meta.h"

namespace hptrain::reconcile {

inline constexpr char kJobVolumeName[] = "hptrain-job";

struct ContainerPort {
  std::string name;
  int port = 0;
};

struct PodSettings {
  std::string name;
  std::string ns;
  std::string container_name;                            // "ps" | "worker"
  std::vector<std::string> command;                      // {"hptrain", "worker"}
  std::vector<std::pair<std::string, std::string>> env;  // name, value; in this order
  std::vector<ContainerPort> ports;
  Json readiness_probe;               // the main container's readinessProbe; null = none added
  Json labels = Json::object();       // merged over the template's labels
  Json annotations = Json::object();  // merged over the template's annotations
  Json owner_reference;
  std::string secret_name;  // mounted read-only at mount_path
  std::string mount_path;
  std::string hostname;
  std::string subdomain;
  std::string scheduler_name;  // "" = keep the template's (or the cluster default)
  std::string default_image;   // used when the main container has no image
};

// Builds the Pod (apiVersion v1, kind Pod). `pod_template` is a PodTemplateSpec
// ({metadata, spec}); an empty object is a valid template. Returns InvalidArgument
// "<path inside the template>: <reason>" (e.g. "spec.containers[0].image: required") when the
// template is not shaped like a PodTemplateSpec or no image can be found.
absl::StatusOr<Json> BuildPodFromTemplate(const Json& pod_template, const PodSettings& settings);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_POD_TEMPLATE_H_
