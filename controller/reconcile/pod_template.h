// Turning a user's pod template (spec.workers.template, spec.workerGroups[i].template,
// spec.ps.template) into the Pod the controller creates.
//
// What the user wrote is kept: images, resources (nvidia.com/gpu included), env, volumes and
// mounts, nodeSelector, tolerations, affinity, service account, security contexts, init and
// sidecar containers, extra labels and annotations. What hptrain needs is added, and wins where
// the two collide:
//   * the main container (the one named like the role, else the first:
//     rewritten_container.h) is renamed "ps" or "worker" and runs PodSettings::command:
//     `hptrain ps|worker`, or a spec.trainer program, whose args (PodSettings::args) come before
//     the template's own and whose workingDir (PodSettings::working_dir), when set, wins.
//     ParseTrainingJob refuses a template that sets the command there, or args where hptrain
//     runs; a template built here without that check keeps its args after PodSettings::args;
//   * hptrain's env (PodSettings::env) comes first, so the user's variables can refer to it with
//     $(VAR); a user variable of the same name is dropped;
//   * the job's Secret is mounted read-only (volume "hptrain-job");
//   * the container ports named by PodSettings::ports replace user ports of the same name or
//     number;
//   * restartPolicy Never (the controller restarts the whole gang, never one pod), hostname and
//     subdomain (stable DNS through the headless Service), schedulerName when one is given;
//   * labels, annotations, name, namespace and the owner reference.
// Defaults fill in only what the template leaves unset (the template wins):
//   * the image (PodSettings::default_image) when the main container names none, and then its
//     pull policy (main container) and pull secrets (pod), unless the template sets them;
//   * readiness and liveness probes on the main container, unless it has its own;
//   * the main container's resources, when the template names neither cpu nor memory in them
//     (requests or limits); other resources it names, such as nvidia.com/gpu, are kept beside;
//   * the main container's extended-resource limits (PodSettings::default_limits, e.g.
//     nvidia.com/gpu: "1"), each unless the template names that resource in its requests or
//     limits (a template's count wins, 0 included);
//   * securityContext keys, one by one: the pod's, every container's (init containers
//     included: the pod is judged by all of them) and the main container's. Two combinations
//     the API server or the kubelet refuse are avoided: allowPrivilegeEscalation: false is not
//     added to a privileged container or one given CAP_SYS_ADMIN, and runAsNonRoot: true is not
//     added to a pod whose template asks for uid 0;
//   * automountServiceAccountToken, unless the template sets it;
//   * the volumes of PodSettings::volumes, each mounted in the main container unless the
//     template mounts something at that path already (or, for a scratch volume, above it).
// The result is deterministic: the same inputs give byte-identical JSON. Pure; thread-safe.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_POD_TEMPLATE_H_
#define HPTRAIN_CONTROLLER_RECONCILE_POD_TEMPLATE_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/reconcile/object_meta.h"

namespace hptrain::reconcile {

inline constexpr char kJobVolumeName[] = "hptrain-job";

// The image of pods whose template names none, and how to pull it.
struct RuntimeImage {
  RuntimeImage() = default;
  // A bare image reference is the common case, and may stand wherever a RuntimeImage is
  // expected (options.default_image = "hptrain/runtime:0.1.0").
  // NOLINTNEXTLINE(google-explicit-constructor)
  RuntimeImage(std::string image) : image(std::move(image)) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  RuntimeImage(const char* image) : image(image) {}

  std::string image;        // "" = none: a template without an image is invalid
  std::string pull_policy;  // Always | IfNotPresent | Never; "" = Kubernetes' default
  std::vector<std::string> pull_secrets;  // Secret names, in the job's namespace
};

// A volume hptrain adds to the pod, mounted read-write in the main container.
struct PodVolume {
  std::string name;
  Json source;       // the volume source, e.g. {"emptyDir": {}}
  std::string path;  // mount path
  // A scratch volume only makes a directory writable: it is skipped when a mount of the
  // template is at or above `path` (it would hide what is there). Otherwise it is skipped only
  // when a mount of the template is at `path` exactly.
  bool scratch = false;
  bool read_only = false;  // mounted readOnly (a Secret's files)
};

struct ContainerPort {
  std::string name;
  int port = 0;
};

struct PodSettings {
  std::string name;
  std::string ns;
  std::string container_name;                            // "ps" | "worker"
  std::vector<std::string> command;                      // {"hptrain", "worker"}
  // Put before the template's own args; empty = the template's args as they are.
  std::vector<std::string> args;
  std::string working_dir;  // the main container's workingDir; "" = the template's
  std::vector<std::pair<std::string, std::string>> env;  // name, value; in this order
  // name, fieldPath: downward-API variables (valueFrom.fieldRef), after `env`.
  std::vector<std::pair<std::string, std::string>> field_env;
  std::vector<ContainerPort> ports;
  Json readiness_probe;               // the main container's readinessProbe; null = none added
  Json liveness_probe;                // the main container's livenessProbe; null = none added
  // The main container's resources when the template names neither cpu nor memory; null = none.
  Json resources;
  // {resource: quantity} added to the main container's resources.limits, each unless the
  // template names that resource in requests or limits; empty = none.
  Json default_limits = Json::object();
  Json pod_security_context = Json::object();        // defaults of the pod's securityContext
  Json container_security_context = Json::object();  // ... of every container's
  Json main_security_context = Json::object();       // ... of the main container's, in addition
  std::optional<bool> automount_service_account_token;  // nullopt = leave it to the template
  std::vector<PodVolume> volumes;
  Json labels = Json::object();       // merged over the template's labels
  Json annotations = Json::object();  // merged over the template's annotations
  Json owner_reference;
  std::string secret_name;  // mounted read-only at mount_path
  std::string mount_path;
  std::string hostname;
  std::string subdomain;
  std::string scheduler_name;  // "" = keep the template's (or the cluster default)
  std::string priority_class_name;  // used when the template names none; "" = none added
  RuntimeImage default_image;  // used when the main container has no image
};

// Builds the Pod (apiVersion v1, kind Pod). `pod_template` is a PodTemplateSpec
// ({metadata, spec}); an empty object is a valid template. Returns InvalidArgument
// "<path inside the template>: <reason>" (e.g. "spec.containers[0].image: required") when the
// template is not shaped like a PodTemplateSpec or no image can be found.
absl::StatusOr<Json> BuildPodFromTemplate(const Json& pod_template, const PodSettings& settings);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_POD_TEMPLATE_H_
