#include "controller/reconcile/pod_template.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "controller/reconcile/rewritten_container.h"
#include "runtime/base/status.h"

namespace hptrain::reconcile {
namespace {

absl::Status Invalid(absl::string_view path, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", reason));
}

// `(*object)[key]` as an array of objects, created empty when absent.
absl::StatusOr<Json*> ObjectList(Json* object, const char* key, absl::string_view path) {
  Json& list = (*object)[key];
  if (list.is_null()) list = Json::array();
  if (!list.is_array()) return Invalid(path, "must be a list");
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_object()) return Invalid(absl::StrCat(path, "[", i, "]"), "must be a map");
  }
  return &list;
}

// Removes the entries of `list` for which `drop` is true.
template <typename Pred>
void EraseIf(Json* list, Pred drop) {
  Json kept = Json::array();
  for (Json& item : *list) {
    if (!drop(item)) kept.push_back(std::move(item));
  }
  *list = std::move(kept);
}

absl::Status MergeMap(const Json* from_template, const Json& ours, absl::string_view path,
                      Json* out) {
  *out = Json::object();
  if (from_template != nullptr && !from_template->is_null()) {
    if (!from_template->is_object()) return Invalid(path, "must be a map");
    *out = *from_template;
  }
  for (const auto& [key, value] : ours.items()) (*out)[key] = value;
  return absl::OkStatus();
}

// True when `value` is absent: missing, null, or an empty string, list or map.
bool Unset(const Json* value) {
  if (value == nullptr || value->is_null()) return true;
  if (value->is_string()) return value->get_ref<const std::string&>().empty();
  return (value->is_array() || value->is_object()) && value->empty();
}

// True when `path` is `mount` or lies below it.
bool IsAtOrBelow(absl::string_view path, absl::string_view mount) {
  if (mount.empty()) return false;
  absl::ConsumeSuffix(&mount, "/");
  return path == mount || absl::StartsWith(path, absl::StrCat(mount, "/"));
}

// A container securityContext that allowPrivilegeEscalation: false contradicts: the API server
// refuses that setting beside privileged: true or an added CAP_SYS_ADMIN.
bool NeedsPrivilegeEscalation(const Json& security_context) {
  const Json* privileged = Find(security_context, {"privileged"});
  if (privileged != nullptr && privileged->is_boolean() && privileged->get<bool>()) return true;
  const Json* add = Find(security_context, {"capabilities", "add"});
  if (add == nullptr || !add->is_array()) return false;
  return std::any_of(add->begin(), add->end(), [](const Json& capability) {
    return capability == "SYS_ADMIN" || capability == "CAP_SYS_ADMIN";
  });
}

// True when the template runs a container as uid 0 (pod-level or its own runAsUser): the kubelet
// would refuse to start it under runAsNonRoot: true.
bool AsksForRoot(const Json& spec) {
  auto root = [](const Json& holder) {
    return IntAt(holder, {"securityContext", "runAsUser"}, -1) == 0;
  };
  if (root(spec)) return true;
  for (const char* list : {"containers", "initContainers"}) {
    const Json* containers = Find(spec, {list});
    if (containers == nullptr || !containers->is_array()) continue;
    if (std::any_of(containers->begin(), containers->end(), root)) return true;
  }
  return false;
}

// Adds each key of `defaults` that `(*holder)["securityContext"]` does not set, except `skip`.
absl::Status DefaultSecurityContext(const Json& defaults, absl::string_view skip, Json* holder,
                                    absl::string_view path) {
  if (defaults.empty()) return absl::OkStatus();
  Json& context = (*holder)["securityContext"];
  if (context.is_null()) context = Json::object();
  if (!context.is_object()) return Invalid(absl::StrCat(path, ".securityContext"), "must be a map");
  for (const auto& [key, value] : defaults.items()) {
    if (key == skip) continue;
    if (const Json* own = Find(context, {key}); own == nullptr || own->is_null()) {
      context[key] = value;
    }
  }
  return absl::OkStatus();
}

// The container securityContext defaults for one container.
absl::Status SecureContainer(const Json& defaults, Json* container, absl::string_view path) {
  const Json* own = Find(*container, {"securityContext"});
  const bool escalates = own != nullptr && NeedsPrivilegeEscalation(*own);
  return DefaultSecurityContext(defaults, escalates ? "allowPrivilegeEscalation" : "", container,
                                path);
}

// `defaults` as the container's resources when the template names neither cpu nor memory there;
// a template that names either has made its choice, and mixing ours in could even contradict it
// (a request above our limit).
// The container's resources map (created empty when absent), after checking that it and its
// requests and limits, where present, are maps.
absl::StatusOr<Json*> ContainerResources(Json* container, absl::string_view path) {
  const std::string resources_path = absl::StrCat(path, ".resources");
  Json& resources = (*container)["resources"];
  if (resources.is_null()) resources = Json::object();
  if (!resources.is_object()) return Invalid(resources_path, "must be a map");
  for (const char* section : {"requests", "limits"}) {
    const Json* quantities = Find(resources, {section});
    if (quantities != nullptr && !quantities->is_null() && !quantities->is_object()) {
      return Invalid(absl::StrCat(resources_path, ".", section), "must be a map");
    }
  }
  return &resources;
}

// Whether the container's resources name `resource` in their requests or limits.
bool NamesResource(const Json& resources, const std::string& resource) {
  for (const char* section : {"requests", "limits"}) {
    const Json* quantities = Find(resources, {section});
    if (quantities != nullptr && quantities->is_object() && quantities->contains(resource)) {
      return true;
    }
  }
  return false;
}

absl::Status DefaultResources(const Json& defaults, Json* container, absl::string_view path) {
  if (defaults.is_null()) return absl::OkStatus();
  HPTRAIN_ASSIGN_OR_RETURN(Json * found, ContainerResources(container, path));
  Json& resources = *found;
  if (NamesResource(resources, "cpu") || NamesResource(resources, "memory")) {
    return absl::OkStatus();
  }
  for (const auto& [section, quantities] : defaults.items()) {
    Json& ours = resources[section];
    if (ours.is_null()) ours = Json::object();
    for (const auto& [name, quantity] : quantities.items()) ours[name] = quantity;
  }
  return absl::OkStatus();
}

// Each resource of `defaults` in the container's limits, unless the template names it in its
// requests or limits. Limits alone: Kubernetes takes an extended resource's request from its
// limit, and refuses a request that differs from it.
absl::Status DefaultLimits(const Json& defaults, Json* container, absl::string_view path) {
  if (defaults.empty()) return absl::OkStatus();
  HPTRAIN_ASSIGN_OR_RETURN(Json * found, ContainerResources(container, path));
  Json& resources = *found;
  for (const auto& [name, quantity] : defaults.items()) {
    if (NamesResource(resources, name)) continue;
    Json& limits = resources["limits"];
    if (limits.is_null()) limits = Json::object();
    limits[name] = quantity;
  }
  return absl::OkStatus();
}

// What merging the main container decided for the pod around it.
struct MainContainerResult {
  bool default_image = false;             // the image came from PodSettings::default_image
  std::vector<const PodVolume*> mounted;  // PodSettings::volumes that were mounted
};

absl::Status MergeContainer(const PodSettings& s, Json* container, absl::string_view path,
                            MainContainerResult* result) {
  (*container)["name"] = s.container_name;
  const Json* image = Find(*container, {"image"});
  if (image == nullptr || !image->is_string() || image->get<std::string>().empty()) {
    if (s.default_image.image.empty()) return Invalid(absl::StrCat(path, ".image"), "required");
    (*container)["image"] = s.default_image.image;
    result->default_image = true;
    // The pull policy belongs to the default image: a template's own image keeps Kubernetes'
    // default for it.
    if (!s.default_image.pull_policy.empty() && Unset(Find(*container, {"imagePullPolicy"}))) {
      (*container)["imagePullPolicy"] = s.default_image.pull_policy;
    }
  }
  (*container)["command"] = s.command;
  if (!s.args.empty()) {
    Json args(s.args);
    if (const Json* own = Find(*container, {"args"}); own != nullptr && !own->is_null()) {
      if (!own->is_array()) return Invalid(absl::StrCat(path, ".args"), "must be a list");
      for (const Json& arg : *own) args.push_back(arg);
    }
    (*container)["args"] = std::move(args);
  }
  if (!s.working_dir.empty()) (*container)["workingDir"] = s.working_dir;

  HPTRAIN_ASSIGN_OR_RETURN(Json * user_env,
                           ObjectList(container, "env", absl::StrCat(path, ".env")));
  Json env = Json::array();
  for (const auto& [name, value] : s.env) env.push_back(Json{{"name", name}, {"value", value}});
  for (const auto& [name, field] : s.field_env) {
    env.push_back(Json{{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", field}}}}}});
  }
  for (Json& var : *user_env) {
    std::string name = StringAt(var, {"name"});
    auto named = [&](const auto& entry) { return entry.first == name; };
    bool ours = std::any_of(s.env.begin(), s.env.end(), named) ||
                std::any_of(s.field_env.begin(), s.field_env.end(), named);
    if (!ours) env.push_back(std::move(var));
  }
  (*container)["env"] = std::move(env);

  HPTRAIN_ASSIGN_OR_RETURN(
      Json * mounts, ObjectList(container, "volumeMounts", absl::StrCat(path, ".volumeMounts")));
  EraseIf(mounts, [&](const Json& m) {
    return StringAt(m, {"name"}) == kJobVolumeName || StringAt(m, {"mountPath"}) == s.mount_path;
  });
  mounts->push_back(
      Json{{"name", kJobVolumeName}, {"mountPath", s.mount_path}, {"readOnly", true}});
  for (const PodVolume& volume : s.volumes) {
    const bool taken = std::any_of(mounts->begin(), mounts->end(), [&](const Json& m) {
      const std::string at = StringAt(m, {"mountPath"});
      return volume.scratch ? IsAtOrBelow(volume.path, at) : volume.path == at;
    });
    if (taken) continue;
    Json mount = {{"name", volume.name}, {"mountPath", volume.path}};
    if (volume.read_only) mount["readOnly"] = true;
    mounts->push_back(std::move(mount));
    result->mounted.push_back(&volume);
  }

  HPTRAIN_ASSIGN_OR_RETURN(Json * ports,
                           ObjectList(container, "ports", absl::StrCat(path, ".ports")));
  EraseIf(ports, [&](const Json& p) {
    return std::any_of(s.ports.begin(), s.ports.end(), [&](const ContainerPort& ours) {
      return StringAt(p, {"name"}) == ours.name || IntAt(p, {"containerPort"}, -1) == ours.port;
    });
  });
  for (const ContainerPort& port : s.ports) {
    ports->push_back(Json{{"name", port.name}, {"containerPort", port.port}, {"protocol", "TCP"}});
  }
  if (!s.readiness_probe.is_null() && Unset(Find(*container, {"readinessProbe"}))) {
    (*container)["readinessProbe"] = s.readiness_probe;
  }
  if (!s.liveness_probe.is_null() && Unset(Find(*container, {"livenessProbe"}))) {
    (*container)["livenessProbe"] = s.liveness_probe;
  }
  HPTRAIN_RETURN_IF_ERROR(DefaultResources(s.resources, container, path));
  HPTRAIN_RETURN_IF_ERROR(DefaultLimits(s.default_limits, container, path));

  Json security = s.container_security_context;
  for (const auto& [key, value] : s.main_security_context.items()) security[key] = value;
  return SecureContainer(security, container, path);
}

}  // namespace

absl::StatusOr<Json> BuildPodFromTemplate(const Json& pod_template, const PodSettings& s) {
  if (!pod_template.is_object()) return Invalid("template", "must be a map");
  Json spec = Json::object();
  if (const Json* user_spec = Find(pod_template, {"spec"});
      user_spec != nullptr && !user_spec->is_null()) {
    if (!user_spec->is_object()) return Invalid("spec", "must be a map");
    spec = *user_spec;
  }
  // Read before any default is added: it is the template's own request.
  const bool asks_for_root = AsksForRoot(spec);

  HPTRAIN_ASSIGN_OR_RETURN(Json * containers, ObjectList(&spec, "containers", "spec.containers"));
  const size_t main = RewrittenContainerIndex(pod_template, s.container_name);
  if (containers->empty()) containers->push_back(Json::object());
  MainContainerResult result;
  HPTRAIN_RETURN_IF_ERROR(MergeContainer(s, &(*containers)[main],
                                         absl::StrCat("spec.containers[", main, "]"), &result));
  for (size_t i = 0; i < containers->size(); ++i) {
    if (i == main) continue;
    HPTRAIN_RETURN_IF_ERROR(SecureContainer(s.container_security_context, &(*containers)[i],
                                            absl::StrCat("spec.containers[", i, "]")));
  }
  if (const Json* init = Find(spec, {"initContainers"}); init != nullptr && !init->is_null()) {
    HPTRAIN_ASSIGN_OR_RETURN(Json * inits,
                             ObjectList(&spec, "initContainers", "spec.initContainers"));
    for (size_t i = 0; i < inits->size(); ++i) {
      HPTRAIN_RETURN_IF_ERROR(SecureContainer(s.container_security_context, &(*inits)[i],
                                              absl::StrCat("spec.initContainers[", i, "]")));
    }
  }

  HPTRAIN_ASSIGN_OR_RETURN(Json * volumes, ObjectList(&spec, "volumes", "spec.volumes"));
  EraseIf(volumes, [&](const Json& v) {
    const std::string name = StringAt(v, {"name"});
    return name == kJobVolumeName ||
           std::any_of(result.mounted.begin(), result.mounted.end(),
                       [&](const PodVolume* ours) { return ours->name == name; });
  });
  volumes->push_back(Json{{"name", kJobVolumeName}, {"secret", {{"secretName", s.secret_name}}}});
  for (const PodVolume* volume : result.mounted) {
    Json entry = volume->source;
    entry["name"] = volume->name;
    volumes->push_back(std::move(entry));
  }

  if (result.default_image && !s.default_image.pull_secrets.empty() &&
      Unset(Find(spec, {"imagePullSecrets"}))) {
    Json secrets = Json::array();
    for (const std::string& name : s.default_image.pull_secrets) {
      secrets.push_back(Json{{"name", name}});
    }
    spec["imagePullSecrets"] = std::move(secrets);
  }
  HPTRAIN_RETURN_IF_ERROR(DefaultSecurityContext(
      s.pod_security_context, asks_for_root ? "runAsNonRoot" : "", &spec, "spec"));
  if (s.automount_service_account_token.has_value() &&
      Unset(Find(spec, {"automountServiceAccountToken"}))) {
    spec["automountServiceAccountToken"] = *s.automount_service_account_token;
  }

  spec["restartPolicy"] = "Never";
  spec["hostname"] = s.hostname;
  spec["subdomain"] = s.subdomain;
  if (!s.scheduler_name.empty()) spec["schedulerName"] = s.scheduler_name;
  if (!s.priority_class_name.empty() && Unset(Find(spec, {"priorityClassName"}))) {
    spec["priorityClassName"] = s.priority_class_name;
  }

  Json labels;
  HPTRAIN_RETURN_IF_ERROR(
      MergeMap(Find(pod_template, {"metadata", "labels"}), s.labels, "metadata.labels", &labels));
  Json annotations;
  HPTRAIN_RETURN_IF_ERROR(MergeMap(Find(pod_template, {"metadata", "annotations"}), s.annotations,
                                   "metadata.annotations", &annotations));
  Json metadata = {{"name", s.name},
                   {"namespace", s.ns},
                   {"labels", std::move(labels)},
                   {"ownerReferences", Json::array({s.owner_reference})}};
  if (!annotations.empty()) metadata["annotations"] = std::move(annotations);
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", std::move(metadata)},
              {"spec", std::move(spec)}};
}

}  // namespace hptrain::reconcile
