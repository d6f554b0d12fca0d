#include "tests/controller/apiserver/resource_type.h"

#include "tests/controller/apiserver/table_convert.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace hptrain::testing {

std::string ResourceType::ApiVersion() const {
  return group.empty() ? version : absl::StrCat(group, "/", version);
}

std::string ResourceType::Qualified() const {
  return group.empty() ? plural : absl::StrCat(plural, ".", group);
}

std::string ResourceType::GroupKind() const {
  return group.empty() ? kind : absl::StrCat(kind, ".", group);
}

std::string ResourceType::Singular() const {
  return singular.empty() ? absl::AsciiStrToLower(kind) : singular;
}

std::string ResourceType::ListKind() const {
  return list_kind.empty() ? absl::StrCat(kind, "List") : list_kind;
}

ResourceType NewResourceType(const std::string& group, const std::string& version,
                             const std::string& kind, const std::string& plural) {
  ResourceType type;
  type.group = group;
  type.version = version;
  type.kind = kind;
  type.plural = plural;
  return type;
}

std::vector<ResourceType> BuiltinResources() {
  std::vector<ResourceType> types;
  ResourceType pods = NewResourceType("", "v1", "Pod", "pods");
  pods.status_subresource = true;
  pods.graceful_deletion = true;
  pods.return_deleted_object = true;
  pods.short_names = {"po"};
  pods.categories = {"all"};
  pods.selectable_fields = {"status.phase", "spec.nodeName", "spec.restartPolicy"};
  types.push_back(pods);

  ResourceType services = NewResourceType("", "v1", "Service", "services");
  services.status_subresource = true;
  services.return_deleted_object = true;
  services.short_names = {"svc"};
  services.categories = {"all"};
  types.push_back(services);

  ResourceType secrets = NewResourceType("", "v1", "Secret", "secrets");
  secrets.selectable_fields = {"type"};
  types.push_back(secrets);

  ResourceType configmaps = NewResourceType("", "v1", "ConfigMap", "configmaps");
  configmaps.short_names = {"cm"};
  types.push_back(configmaps);

  ResourceType core_events = NewResourceType("", "v1", "Event", "events");
  core_events.short_names = {"ev"};
  core_events.selectable_fields = {"involvedObject.kind",
                                   "involvedObject.name",
                                   "involvedObject.namespace",
                                   "involvedObject.uid",
                                   "reason",
                                   "type"};
  types.push_back(core_events);

  ResourceType namespaces = NewResourceType("", "v1", "Namespace", "namespaces");
  namespaces.namespaced = false;
  namespaces.status_subresource = true;
  namespaces.short_names = {"ns"};
  namespaces.selectable_fields = {"status.phase"};
  types.push_back(namespaces);

  ResourceType events = NewResourceType("events.k8s.io", "v1", "Event", "events");
  events.short_names = {"ev"};
  events.selectable_fields = {"regarding.kind", "regarding.name", "regarding.namespace",
                              "regarding.uid",  "reason",         "type"};
  types.push_back(events);

  ResourceType leases = NewResourceType("coordination.k8s.io", "v1", "Lease", "leases");
  types.push_back(leases);

  ResourceType crds = NewResourceType("apiextensions.k8s.io", "v1", "CustomResourceDefinition",
                                      "customresourcedefinitions");
  crds.namespaced = false;
  crds.status_subresource = true;
  crds.has_generation = true;
  crds.short_names = {"crd", "crds"};
  crds.categories = {"api-extensions"};
  types.push_back(crds);
  return types;
}

ResourceType TrainingJobResource() {
  ResourceType type = NewResourceType("hptrain.io", "v1alpha1", "TrainingJob", "trainingjobs");
  type.singular = "trainingjob";
  type.status_subresource = true;
  type.scale = ScaleSubresource{".spec.workers.replicas", ".status.replicas", ".status.selector"};
  type.custom = true;
  type.has_generation = true;
  type.short_names = {"tj"};
  type.categories = {"all"};
  return type;
}

namespace {
ResourceType PodGroupResource(const std::string& group, const std::string& version) {
  ResourceType type = NewResourceType(group, version, "PodGroup", "podgroups");
  type.singular = "podgroup";
  type.status_subresource = true;
  type.custom = true;
  type.has_generation = true;
  type.short_names = {"pg"};
  return type;
}
}  // namespace

ResourceType VolcanoPodGroupResource() {
  return PodGroupResource("scheduling.volcano.sh", "v1beta1");
}
ResourceType SchedulerPluginsPodGroupResource() {
  return PodGroupResource("scheduling.x-k8s.io", "v1alpha1");
}

absl::StatusOr<ResourceType> ResourceTypeFromCrd(const nlohmann::json& crd) {
  const nlohmann::json& spec = crd.contains("spec") ? crd["spec"] : nlohmann::json::object();
  const nlohmann::json names = spec.value("names", nlohmann::json::object());
  ResourceType type;
  type.group = spec.value("group", "");
  type.kind = names.value("kind", "");
  type.plural = names.value("plural", "");
  type.singular = names.value("singular", "");
  type.list_kind = names.value("listKind", "");
  if (type.group.empty() || type.kind.empty() || type.plural.empty()) {
    return absl::InvalidArgumentError("CRD needs spec.group, spec.names.kind and names.plural");
  }
  type.namespaced = spec.value("scope", "Namespaced") != "Cluster";
  type.custom = true;
  type.has_generation = true;
  if (names.contains("shortNames")) type.short_names = names["shortNames"];
  if (names.contains("categories")) type.categories = names["categories"];

  const nlohmann::json versions = spec.value("versions", nlohmann::json::array());
  const nlohmann::json* chosen = nullptr;
  for (const nlohmann::json& version : versions) {
    if (!version.value("served", false)) continue;
    if (chosen == nullptr || version.value("storage", false)) chosen = &version;
  }
  if (chosen == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("CRD ", type.plural, ".", type.group, " serves no version"));
  }
  type.version = chosen->value("name", "");
  const nlohmann::json sub = chosen->value("subresources", nlohmann::json::object());
  type.status_subresource = sub.contains("status");
  if (sub.contains("scale")) {
    const nlohmann::json& scale = sub["scale"];
    type.scale =
        ScaleSubresource{scale.value("specReplicasPath", ""), scale.value("statusReplicasPath", ""),
                         scale.value("labelSelectorPath", "")};
  }
  if (chosen->contains("schema") && (*chosen)["schema"].contains("openAPIV3Schema")) {
    type.schema = (*chosen)["schema"]["openAPIV3Schema"];
  }
  type.printer_columns = PrinterColumnsOf(*chosen);
  return type;
}

nlohmann::json BookmarkObject(const ResourceType& type, const std::string& resource_version) {
  nlohmann::json object = {{"kind", type.kind}, {"apiVersion", type.ApiVersion()}};
  nlohmann::json metadata = {{"resourceVersion", resource_version}};
  if (type.custom) {
    object["metadata"] = metadata;
    return object;
  }
  // Built-in kinds are Go structs: zero-valued fields serialize as below (fixture 36).
  metadata["creationTimestamp"] = nullptr;
  object["metadata"] = metadata;
  if (type.kind == "Pod") {
    object["spec"] = {{"containers", nullptr}};
    object["status"] = nlohmann::json::object();
  } else if (type.status_subresource) {
    object["spec"] = nlohmann::json::object();
    object["status"] = nlohmann::json::object();
  }
  return object;
}

}  // namespace hptrain::testing
