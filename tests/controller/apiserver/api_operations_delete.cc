// ApiOperations: DELETE and DELETE on a collection (see api_operations.h for the rules).
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "tests/controller/apiserver/api_operations.h"
#include "tests/controller/apiserver/object_meta.h"

namespace hptrain::testing {
namespace {

using Commit = ObjectStore::Commit;

void AddFinalizer(nlohmann::json* meta, const std::string& finalizer) {
  nlohmann::json& list = (*meta)["finalizers"];
  if (!list.is_array()) list = nlohmann::json::array();
  for (const nlohmann::json& f : list) {
    if (f == finalizer) return;
  }
  list.push_back(finalizer);
}

}  // namespace

absl::StatusOr<nlohmann::json> ApiOperations::Delete(const ResourceType& type,
                                                     const std::string& ns, const std::string& name,
                                                     const DeleteOptions& options) {
  std::string policy =
      options.propagation_policy.empty() ? "Background" : options.propagation_policy;
  if (policy != "Background" && policy != "Foreground" && policy != "Orphan") {
    return BadRequestError(absl::StrCat("propagationPolicy: Unsupported value: \"", policy,
                                        "\": supported values: \"Foreground\", \"Background\", "
                                        "\"Orphan\""));
  }
  WriteContext context;
  context.dry_run = options.dry_run;
  bool pending = false;
  HPTRAIN_ASSIGN_OR_RETURN(
      ObjectPtr result,
      Run(type, ns, name, context,
          [&](const ObjectPtr& current, Outcome* outcome) -> absl::StatusOr<Commit> {
            if (current == nullptr) return NotFoundError(type, name);
            const nlohmann::json& old_meta = current->json()["metadata"];
            std::string uid = old_meta.value("uid", "");
            std::string rv = old_meta.value("resourceVersion", "");
            if (options.precondition_uid.has_value() && *options.precondition_uid != uid) {
              return ConflictError(
                  type, name,
                  absl::StrCat("Precondition failed: UID in precondition: ",
                               *options.precondition_uid, ", UID in object meta: ", uid));
            }
            if (options.precondition_resource_version.has_value() &&
                *options.precondition_resource_version != rv) {
              return ConflictError(
                  type, name,
                  absl::StrCat("Precondition failed: ResourceVersion in precondition: ",
                               *options.precondition_resource_version,
                               ", ResourceVersion in object meta: ", rv));
            }
            if (old_meta.contains("deletionTimestamp")) {
              pending = true;  // already being deleted: nothing more to do
              return Commit{};
            }
            nlohmann::json next = current->json();
            nlohmann::json& meta = next["metadata"];
            if (policy == "Foreground") AddFinalizer(&meta, "foregroundDeletion");
            if (policy == "Orphan") AddFinalizer(&meta, "orphan");
            bool has_finalizers = meta.contains("finalizers") && meta["finalizers"].is_array() &&
                                  !meta["finalizers"].empty();
            if (has_finalizers) {
              meta["deletionTimestamp"] = NowTimestamp();
              meta["deletionGracePeriodSeconds"] = 0;
              if (type.has_generation) meta["generation"] = meta.value("generation", 0) + 1;
              outcome->finalizing = policy != "Background";
              pending = true;
              return Commit{Commit::Kind::kPut, std::move(next)};
            }
            outcome->removed = true;
            if (type.graceful_deletion) {
              meta["deletionTimestamp"] = NowTimestamp();
              meta["deletionGracePeriodSeconds"] = 0;
              return Commit{Commit::Kind::kStampThenRemove, std::move(next)};
            }
            return Commit{Commit::Kind::kRemove, nullptr};
          }));
  if (pending || type.return_deleted_object) return result->json();
  nlohmann::json details = {{"name", name}};
  if (!type.group.empty()) details["group"] = type.group;
  details["kind"] = type.plural;
  details["uid"] = result->json()["metadata"].value("uid", "");
  return nlohmann::json{{"kind", "Status"},
                        {"apiVersion", "v1"},
                        {"metadata", nlohmann::json::object()},
                        {"status", "Success"},
                        {"details", details}};
}

absl::StatusOr<nlohmann::json> ApiOperations::DeleteCollection(const ResourceType& type,
                                                               const ListRequest& request,
                                                               const DeleteOptions& options) {
  ListRequest all = request;
  all.limit = 0;
  all.continue_token.clear();
  HPTRAIN_ASSIGN_OR_RETURN(ListPage page, store_->List(type, all));
  nlohmann::json items = nlohmann::json::array();
  for (const ObjectPtr& object : page.items) {
    absl::StatusOr<nlohmann::json> deleted = Delete(type, object->ns(), object->name(), options);
    if (deleted.ok()) {
      items.push_back(deleted->value("kind", "") == "Status" ? object->json() : *deleted);
    } else if (!absl::IsNotFound(deleted.status())) {
      return deleted.status();
    }
  }
  return nlohmann::json{
      {"kind", type.ListKind()},
      {"apiVersion", type.ApiVersion()},
      {"metadata", {{"resourceVersion", std::to_string(store_->CurrentResourceVersion())}}},
      {"items", items}};
}

}  // namespace hptrain::testing
