// ApiOperations: the scale subresource of custom resources (see api_operations.h).
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "tests/controller/apiserver/api_operations.h"

namespace hptrain::testing {
namespace {

using Commit = ObjectStore::Commit;

absl::Status MissingSpecReplicas(const std::string& path) {
  return InternalApiError(absl::StrCat("the spec replicas field \"", path, "\" does not exist"));
}

// The Scale of `object` per `scale`; errors like the real server when the spec replicas field
// cannot be read (fixture 22).
absl::StatusOr<nlohmann::json> ScaleOf(const ScaleSubresource& scale,
                                       const nlohmann::json& object) {
  absl::StatusOr<std::vector<std::string>> spec_path = ParseFieldPath(scale.spec_replicas_path);
  if (!spec_path.ok()) return MissingSpecReplicas(scale.spec_replicas_path);
  const nlohmann::json* spec = FindPath(object, *spec_path);
  if (spec == nullptr || !spec->is_number_integer()) {
    return MissingSpecReplicas(scale.spec_replicas_path);
  }
  int64_t status_replicas = 0;
  absl::StatusOr<std::vector<std::string>> status_path = ParseFieldPath(scale.status_replicas_path);
  if (status_path.ok()) {
    const nlohmann::json* value = FindPath(object, *status_path);
    if (value != nullptr && value->is_number_integer()) status_replicas = value->get<int64_t>();
  }
  nlohmann::json status = {{"replicas", status_replicas}};
  absl::StatusOr<std::vector<std::string>> selector_path =
      ParseFieldPath(scale.label_selector_path);
  if (selector_path.ok()) {
    const nlohmann::json* value = FindPath(object, *selector_path);
    if (value != nullptr && value->is_string() && !value->get<std::string>().empty()) {
      status["selector"] = *value;
    }
  }
  const nlohmann::json& meta = object["metadata"];
  nlohmann::json scale_meta = nlohmann::json::object();
  for (const char* key : {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"}) {
    if (meta.contains(key)) scale_meta[key] = meta[key];
  }
  return nlohmann::json{{"kind", "Scale"},
                        {"apiVersion", "autoscaling/v1"},
                        {"metadata", scale_meta},
                        {"spec", {{"replicas", spec->get<int64_t>()}}},
                        {"status", status}};
}

}  // namespace

absl::StatusOr<nlohmann::json> ApiOperations::GetScale(const ResourceType& type,
                                                       const std::string& ns,
                                                       const std::string& name) const {
  if (!type.scale.has_value()) return UnknownPathError();
  HPTRAIN_ASSIGN_OR_RETURN(ObjectPtr object, Get(type, ns, name));
  return ScaleOf(*type.scale, object->json());
}

absl::StatusOr<nlohmann::json> ApiOperations::UpdateScale(
    const ResourceType& type, const std::string& ns, const std::string& name,
    std::optional<PatchType> patch_type, const nlohmann::json& body, const WriteContext& context) {
  if (!type.scale.has_value()) return UnknownPathError();
  if (patch_type == PatchType::kApply)
    return UnsupportedMediaTypeError("application/apply-patch+yaml");
  const ScaleSubresource scale = *type.scale;
  HPTRAIN_ASSIGN_OR_RETURN(
      ObjectPtr result,
      Run(type, ns, name, context,
          [&](const ObjectPtr& current, Outcome* outcome) -> absl::StatusOr<Commit> {
            if (current == nullptr) return NotFoundError(type, name);
            HPTRAIN_ASSIGN_OR_RETURN(nlohmann::json old_scale, ScaleOf(scale, current->json()));
            nlohmann::json wanted = body;
            if (patch_type == PatchType::kJson) {
              HPTRAIN_ASSIGN_OR_RETURN(wanted, ApplyJsonPatch(old_scale, body));
            } else if (patch_type.has_value()) {
              wanted = ApplyMergePatch(old_scale, body);
            }
            const nlohmann::json* replicas = FindPath(wanted, {"spec", "replicas"});
            if (replicas == nullptr || !replicas->is_number_integer() ||
                replicas->get<int64_t>() < 0) {
              return InvalidError(
                  NewResourceType("autoscaling", "v1", "Scale", "scales"), name,
                  {{"FieldValueInvalid", "Invalid value: must be a non-negative integer",
                    "spec.replicas"}});
            }
            std::string rv = "";
            const nlohmann::json* wanted_rv = FindPath(wanted, {"metadata", "resourceVersion"});
            if (wanted_rv != nullptr && wanted_rv->is_string()) rv = *wanted_rv;
            nlohmann::json next = current->json();
            if (!rv.empty()) next["metadata"]["resourceVersion"] = rv;
            SetPath(&next, *ParseFieldPath(scale.spec_replicas_path), *replicas);
            return PrepareWrite(type, current, std::move(next), Scope::kScale, context, false,
                                outcome);
          }));
  return ScaleOf(scale, result->json());
}

}  // namespace hptrain::testing
