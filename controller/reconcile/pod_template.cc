#include "controller/reconcile/pod_template.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
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

absl::Status MergeContainer(const PodSettings& s, Json* container, absl::string_view path) {
  (*container)["name"] = s.container_name;
  const Json* image = Find(*container, {"image"});
  if (image == nullptr || !image->is_string() || image->get<std::string>().empty()) {
    if (s.default_image.empty()) return Invalid(absl::StrCat(path, ".image"), "required");
    (*container)["image"] = s.default_image;
  }
  (*container)["command"] = s.command;

  HPTRAIN_ASSIGN_OR_RETURN(Json * user_env,
                           ObjectList(container, "env", absl::StrCat(path, ".env")));
  Json env = Json::array();
  for (const auto& [name, value] : s.env) env.push_back(Json{{"name", name}, {"value", value}});
  for (Json& var : *user_env) {
    std::string name = StringAt(var, {"name"});
    bool ours = std::any_of(s.env.begin(), s.env.end(),
                            [&](const auto& entry) { return entry.first == name; });
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
  if (const Json* probe = Find(*container, {"readinessProbe"});
      !s.readiness_probe.is_null() && (probe == nullptr || probe->is_null())) {
    (*container)["readinessProbe"] = s.readiness_probe;
  }
  return absl::OkStatus();
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

  HPTRAIN_ASSIGN_OR_RETURN(Json * containers, ObjectList(&spec, "containers", "spec.containers"));
  size_t main = 0;
  for (size_t i = 0; i < containers->size(); ++i) {
    if (StringAt((*containers)[i], {"name"}) == s.container_name) {
      main = i;
      break;
    }
  }
  if (containers->empty()) containers->push_back(Json::object());
  HPTRAIN_RETURN_IF_ERROR(
      MergeContainer(s, &(*containers)[main], absl::StrCat("spec.containers[", main, "]")));

  HPTRAIN_ASSIGN_OR_RETURN(Json * volumes, ObjectList(&spec, "volumes", "spec.volumes"));
  EraseIf(volumes, [](const Json& v) { return StringAt(v, {"name"}) == kJobVolumeName; });
  volumes->push_back(Json{{"name", kJobVolumeName}, {"secret", {{"secretName", s.secret_name}}}});

  spec["restartPolicy"] = "Never";
  spec["hostname"] = s.hostname;
  spec["subdomain"] = s.subdomain;
  if (!s.scheduler_name.empty()) spec["schedulerName"] = s.scheduler_name;

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
