#include "tests/controller/apiserver/api_operations.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "tests/controller/apiserver/managed_fields.h"
#include "tests/controller/apiserver/object_meta.h"
#include "tests/controller/apiserver/openapi_schema.h"

namespace hptrain::testing {
namespace {

using Commit = ObjectStore::Commit;

bool HasFinalizer(const nlohmann::json& meta, const std::string& finalizer) {
  if (!meta.contains("finalizers") || !meta["finalizers"].is_array()) return false;
  for (const nlohmann::json& f : meta["finalizers"]) {
    if (f == finalizer) return true;
  }
  return false;
}

bool NoFinalizers(const nlohmann::json& meta) {
  return !meta.contains("finalizers") || !meta["finalizers"].is_array() ||
         meta["finalizers"].empty();
}

// managedFields without their timestamps: an apply that only re-stamps times changes nothing.
nlohmann::json OwnershipOf(const nlohmann::json& object) {
  const nlohmann::json* list = FindPath(object, {"metadata", "managedFields"});
  if (list == nullptr || !list->is_array()) return nlohmann::json::array();
  nlohmann::json out = *list;
  for (nlohmann::json& entry : out) entry.erase("time");
  return out;
}

// Sets the URL's namespace and name on a request body; errors when the body names others.
absl::Status CheckBodyIdentity(const ResourceType& type, const std::string& ns,
                               const std::string& name, nlohmann::json* body) {
  if (!body->is_object()) return BadRequestError("the request body must be a JSON object");
  nlohmann::json& meta = (*body)["metadata"];
  if (!meta.is_object()) meta = nlohmann::json::object();
  std::string body_ns = meta.value("namespace", "");
  if (type.namespaced) {
    if (!body_ns.empty() && body_ns != ns) {
      return BadRequestError(
          "the namespace of the provided object does not match the namespace "
          "sent on the request");
    }
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  if (name.empty()) return absl::OkStatus();
  std::string body_name = meta.value("name", "");
  if (!body_name.empty() && body_name != name) {
    return BadRequestError(absl::StrCat("the name of the object (", body_name,
                                        ") does not match the name on the URL (", name, ")"));
  }
  meta["name"] = name;
  return absl::OkStatus();
}

}  // namespace

ApiOperations::ApiOperations(ObjectStore* store) : store_(store) {}

void ApiOperations::AddValidator(const std::string& resource, Validator validator) {
  absl::MutexLock lock(&mu_);
  validators_[resource].push_back(std::move(validator));
}

void ApiOperations::SetOwnerChangeCallback(OwnerChangeCallback callback) {
  on_owner_change_ = std::move(callback);
}

void ApiOperations::AddAdmission(const std::string& resource, Admission admission) {
  absl::MutexLock lock(&mu_);
  admissions_[resource].push_back(std::move(admission));
}

absl::Status ApiOperations::Validate(const ResourceType& type, const nlohmann::json& object,
                                     const nlohmann::json& old) const {
  std::vector<Cause> causes = ValidateName(type, object);
  if (!type.schema.is_null()) {
    std::vector<Cause> more = ValidateAgainstSchema(type.schema, object);
    causes.insert(causes.end(), more.begin(), more.end());
  }
  std::vector<Validator> validators;
  {
    absl::MutexLock lock(&mu_);
    auto it = validators_.find(type.Qualified());
    if (it != validators_.end()) validators = it->second;
  }
  for (const Validator& validator : validators) {
    std::vector<Cause> more = validator(object, old);
    causes.insert(causes.end(), more.begin(), more.end());
  }
  if (causes.empty()) return absl::OkStatus();
  return InvalidError(type, object["metadata"].value("name", ""), causes);
}

absl::Status ApiOperations::Admit(const ResourceType& type, const nlohmann::json& object,
                                  const nlohmann::json& old) const {
  std::vector<Admission> admissions;
  {
    absl::MutexLock lock(&mu_);
    auto it = admissions_.find(type.Qualified());
    if (it != admissions_.end()) admissions = it->second;
  }
  for (const Admission& admission : admissions) {
    HPTRAIN_RETURN_IF_ERROR(admission(object, old));
  }
  return absl::OkStatus();
}

absl::StatusOr<Commit> ApiOperations::PrepareWrite(const ResourceType& type,
                                                   const ObjectPtr& current, nlohmann::json next,
                                                   Scope scope, const WriteContext& context,
                                                   bool fields_done, Outcome* outcome) const {
  if (!next.is_object()) return BadRequestError("the request body must be a JSON object");
  if (!next["metadata"].is_object()) next["metadata"] = nlohmann::json::object();
  const bool create = current == nullptr;
  const bool direct = scope == Scope::kDirect;
  const std::string subresource =
      scope == Scope::kStatus ? "status" : (scope == Scope::kScale ? "scale" : "");
  const std::string now = context.Time();  // one stamp for everything this write dates
  FieldManagerInfo who{context.field_manager, subresource, type.ApiVersion(), now, type.custom};
  const nlohmann::json empty;
  const nlohmann::json& old = create ? empty : current->json();

  if (create) {
    nlohmann::json& meta = next["metadata"];
    for (const char* key : {"resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds",
                            "selfLink", "uid", "creationTimestamp", "generation"}) {
      meta.erase(key);
    }
    if (!fields_done) meta.erase("managedFields");
    meta["uid"] = NewUid();
    meta["creationTimestamp"] = now;
    if (type.has_generation) meta["generation"] = 1;
    if (type.status_subresource && !direct) next.erase("status");
    ApplyBuiltinDefaults(type, !direct || !next.contains("status"), &next);
  } else {
    const std::string name = old["metadata"].value("name", "");
    std::string wanted = next["metadata"].value("resourceVersion", "");
    if (!direct && !wanted.empty() && wanted != old["metadata"].value("resourceVersion", "")) {
      return StaleResourceVersionError(type, name);
    }
    std::string wanted_uid = next["metadata"].value("uid", "");
    std::string uid = old["metadata"].value("uid", "");
    if (!direct && !wanted_uid.empty() && wanted_uid != uid) {
      return ConflictError(type, name,
                           absl::StrCat("Precondition failed: UID in precondition: ", wanted_uid,
                                        ", UID in object meta: ", uid));
    }
    if (scope == Scope::kStatus) {
      nlohmann::json base = old;
      if (next.contains("status")) {
        base["status"] = next["status"];
      } else {
        base.erase("status");
      }
      if (fields_done) base["metadata"]["managedFields"] = next["metadata"]["managedFields"];
      next = std::move(base);
    } else {
      nlohmann::json& meta = next["metadata"];
      const nlohmann::json& old_meta = old["metadata"];
      for (const char* key : {"uid", "creationTimestamp", "name", "namespace", "generation",
                              "deletionTimestamp", "deletionGracePeriodSeconds"}) {
        if (old_meta.contains(key)) {
          meta[key] = old_meta[key];
        } else {
          meta.erase(key);
        }
      }
      if (!fields_done) meta.erase("managedFields");
      if (type.status_subresource && !direct) {
        if (old.contains("status")) {
          next["status"] = old["status"];
        } else {
          next.erase("status");
        }
      }
    }
    next["metadata"]["resourceVersion"] = old["metadata"].value("resourceVersion", "");
    ApplyBuiltinDefaults(type, false, &next);
  }
  next["apiVersion"] = type.ApiVersion();
  next["kind"] = type.kind;
  if (!direct) {
    if (!type.schema.is_null()) PruneAndDefault(type.schema, &next);
    HPTRAIN_RETURN_IF_ERROR(Validate(type, next, old));
    if (subresource.empty()) HPTRAIN_RETURN_IF_ERROR(Admit(type, next, old));
  }

  if (!create) {
    bool same = SameObject(old, next) && (!fields_done || OwnershipOf(old) == OwnershipOf(next));
    if (same) return Commit{};
    if (type.has_generation && SpecChanged(old, next)) {
      next["metadata"]["generation"] = old["metadata"].value("generation", 0) + 1;
    }
  }
  if (!fields_done) RecordUpdate(old, &next, who);

  const nlohmann::json& meta = next["metadata"];
  if (!create && meta.contains("deletionTimestamp") && NoFinalizers(meta)) {
    outcome->removed = true;
    return Commit{Commit::Kind::kRemove, std::move(next)};
  }
  outcome->finalizing = meta.contains("deletionTimestamp") &&
                        (HasFinalizer(meta, "foregroundDeletion") || HasFinalizer(meta, "orphan"));
  return Commit{Commit::Kind::kPut, std::move(next)};
}

absl::StatusOr<ObjectPtr> ApiOperations::Run(
    const ResourceType& type, const std::string& ns, const std::string& name,
    const WriteContext& context,
    const std::function<absl::StatusOr<Commit>(const ObjectPtr&, Outcome*)>& fn) {
  Outcome outcome;
  std::optional<nlohmann::json> dry_result;
  absl::StatusOr<ObjectPtr> result =
      store_->Transact(type, ns, name, [&](const ObjectPtr& current) -> absl::StatusOr<Commit> {
        HPTRAIN_ASSIGN_OR_RETURN(Commit commit, fn(current, &outcome));
        if (!context.dry_run || commit.kind == Commit::Kind::kNothing) return commit;
        dry_result =
            commit.object.is_null() && current != nullptr ? current->json() : commit.object;
        outcome = Outcome{};
        return Commit{};
      });
  if (!result.ok()) return result.status();
  if (dry_result.has_value()) {
    uint64_t rv = *result == nullptr ? 0 : (*result)->resource_version();
    return std::make_shared<const StoredObject>(std::move(*dry_result), rv);
  }
  if ((outcome.removed || outcome.finalizing) && *result != nullptr) {
    Notify(*result, type.Qualified());
  }
  return result;
}

void ApiOperations::Notify(const ObjectPtr& object, const std::string& resource) const {
  if (on_owner_change_) on_owner_change_({resource, object->ns(), object->name()}, object);
}

absl::StatusOr<ObjectPtr> ApiOperations::Get(const ResourceType& type, const std::string& ns,
                                             const std::string& name) const {
  ObjectPtr object = store_->Get(type.Qualified(), ns, name);
  if (object == nullptr) return NotFoundError(type, name);
  return object;
}

absl::StatusOr<ObjectPtr> ApiOperations::Create(const ResourceType& type, const std::string& ns,
                                                nlohmann::json body, const WriteContext& context) {
  HPTRAIN_RETURN_IF_ERROR(CheckBodyIdentity(type, ns, "", &body));
  nlohmann::json& meta = body["metadata"];
  std::string name = meta.value("name", "");
  std::string generate = meta.value("generateName", "");
  if (name.empty() && !generate.empty()) {
    name = absl::StrCat(generate, RandomSuffix(5));
    meta["name"] = name;
  }
  if (name.empty()) return InvalidError(type, "", ValidateName(type, body));
  HPTRAIN_ASSIGN_OR_RETURN(
      ObjectPtr created,
      Run(type, ns, name, context, [&](const ObjectPtr& current, Outcome* outcome) {
        if (current != nullptr) return absl::StatusOr<Commit>(AlreadyExistsError(type, name));
        return PrepareWrite(type, nullptr, body, Scope::kMain, context, false, outcome);
      }));
  if (type.group == "apiextensions.k8s.io" && !context.dry_run) CrdController(type, created);
  return created;
}

absl::StatusOr<ObjectPtr> ApiOperations::Update(const ResourceType& type, const std::string& ns,
                                                const std::string& name,
                                                const std::string& subresource, nlohmann::json body,
                                                const WriteContext& context) {
  if (!subresource.empty() && (subresource != "status" || !type.status_subresource)) {
    return UnknownPathError();
  }
  HPTRAIN_RETURN_IF_ERROR(CheckBodyIdentity(type, ns, name, &body));
  Scope scope = subresource == "status" ? Scope::kStatus : Scope::kMain;
  HPTRAIN_ASSIGN_OR_RETURN(
      ObjectPtr updated,
      Run(type, ns, name, context, [&](const ObjectPtr& current, Outcome* outcome) {
        if (current == nullptr) return absl::StatusOr<Commit>(NotFoundError(type, name));
        return PrepareWrite(type, current, body, scope, context, false, outcome);
      }));
  if (type.group == "apiextensions.k8s.io" && scope == Scope::kMain && !context.dry_run) {
    CrdController(type, updated);
  }
  return updated;
}

absl::StatusOr<ObjectPtr> ApiOperations::Patch(const ResourceType& type, const std::string& ns,
                                               const std::string& name,
                                               const std::string& subresource, PatchType patch_type,
                                               const nlohmann::json& patch,
                                               const WriteContext& context) {
  if (!subresource.empty() && (subresource != "status" || !type.status_subresource)) {
    return UnknownPathError();
  }
  Scope scope = subresource == "status" ? Scope::kStatus : Scope::kMain;
  nlohmann::json config = patch;
  if (patch_type == PatchType::kApply) {
    HPTRAIN_RETURN_IF_ERROR(CheckBodyIdentity(type, ns, name, &config));
  } else if (patch_type != PatchType::kJson && !patch.is_object()) {
    return BadRequestError("a merge patch must be a JSON object");
  }
  absl::StatusOr<ObjectPtr> patched_object = Run(
      type, ns, name, context,
      [&](const ObjectPtr& current, Outcome* outcome) -> absl::StatusOr<Commit> {
        if (patch_type == PatchType::kApply) {
          if (current == nullptr && scope == Scope::kStatus) {
            return NotFoundError(type, name);
          }
          FieldManagerInfo who{context.field_manager, subresource, type.ApiVersion(),
                               context.Time(), type.custom};
          HPTRAIN_ASSIGN_OR_RETURN(
              nlohmann::json merged,
              ApplyConfig(current == nullptr ? nlohmann::json() : current->json(), config, who,
                          context.force));
          return PrepareWrite(type, current, std::move(merged), scope, context, true, outcome);
        }
        if (current == nullptr) return NotFoundError(type, name);
        nlohmann::json patched;
        if (patch_type == PatchType::kJson) {
          HPTRAIN_ASSIGN_OR_RETURN(patched, ApplyJsonPatch(current->json(), patch));
        } else {
          patched = ApplyMergePatch(current->json(), patch);
        }
        return PrepareWrite(type, current, std::move(patched), scope, context, false, outcome);
      });
  if (patched_object.ok() && type.group == "apiextensions.k8s.io" && scope == Scope::kMain &&
      !context.dry_run) {
    CrdController(type, *patched_object);
  }
  return patched_object;
}

void ApiOperations::CrdController(const ResourceType& type, const ObjectPtr& crd) {
  // The CRD controller: serve the type as the CRD now defines it and, the first time, mark the
  // CRD Established (a second write, as in fixtures 03 and 04), stamped with the write's time:
  // the real controller answers within the second, and a clock tick between the two writes must
  // not reorder managedFields. A create, an update and an apply or patch all reach it.
  absl::StatusOr<ResourceType> served = ResourceTypeFromCrd(crd->json());
  if (!served.ok()) return;
  store_->AddType(*served);
  const nlohmann::json& object = crd->json();
  if (object.contains("status") && object["status"].contains("conditions")) {
    for (const nlohmann::json& c : object["status"]["conditions"]) {
      if (c.value("type", "") == "Established") return;
    }
  }
  const std::string now = object["metadata"].value("creationTimestamp", "");
  nlohmann::json status = {
      {"acceptedNames", object["spec"].value("names", nlohmann::json::object())},
      {"conditions",
       {{{"type", "NamesAccepted"},
         {"status", "True"},
         {"lastTransitionTime", now},
         {"reason", "NoConflicts"},
         {"message", "no conflicts found"}},
        {{"type", "Established"},
         {"status", "True"},
         {"lastTransitionTime", now},
         {"reason", "InitialNamesAccepted"},
         {"message", "the initial names have been accepted"}}}}};
  WriteContext controller;
  controller.field_manager = "kube-apiserver";
  controller.time = now;
  (void)Patch(type, "", crd->name(), "status", PatchType::kMerge, {{"status", status}}, controller);
}

absl::StatusOr<ObjectPtr> ApiOperations::Put(const ResourceType& type, nlohmann::json object) {
  if (!object.is_object()) return BadRequestError("the object must be a JSON object");
  nlohmann::json& meta = object["metadata"];
  if (!meta.is_object()) meta = nlohmann::json::object();
  std::string ns = type.namespaced ? meta.value("namespace", "default") : "";
  std::string name = meta.value("name", "");
  if (name.empty()) return InvalidError(type, "", ValidateName(type, object));
  if (type.namespaced) meta["namespace"] = ns;
  meta.erase("resourceVersion");
  WriteContext context;
  context.field_manager = "apiserver-double";
  return Run(type, ns, name, context, [&](const ObjectPtr& current, Outcome* outcome) {
    return PrepareWrite(type, current, object, Scope::kDirect, context, false, outcome);
  });
}

absl::StatusOr<ObjectPtr> ApiOperations::Mutate(
    const ResourceType& type, const std::string& ns, const std::string& name,
    const std::function<absl::Status(nlohmann::json*)>& mutate) {
  WriteContext context;
  context.field_manager = "apiserver-double";
  return Run(type, ns, name, context,
             [&](const ObjectPtr& current, Outcome* outcome) -> absl::StatusOr<Commit> {
               if (current == nullptr) return NotFoundError(type, name);
               nlohmann::json next = current->json();
               HPTRAIN_RETURN_IF_ERROR(mutate(&next));
               return PrepareWrite(type, current, std::move(next), Scope::kDirect, context, false,
                                   outcome);
             });
}

absl::Status ApiOperations::RemoveFinalizer(const ResourceType& type, const std::string& ns,
                                            const std::string& name, const std::string& finalizer) {
  absl::StatusOr<ObjectPtr> result = Mutate(type, ns, name, [&](nlohmann::json* object) {
    nlohmann::json& meta = (*object)["metadata"];
    if (!meta.contains("finalizers") || !meta["finalizers"].is_array()) return absl::OkStatus();
    nlohmann::json kept = nlohmann::json::array();
    for (const nlohmann::json& f : meta["finalizers"]) {
      if (f != finalizer) kept.push_back(f);
    }
    if (kept.empty()) {
      meta.erase("finalizers");
    } else {
      meta["finalizers"] = kept;
    }
    return absl::OkStatus();
  });
  if (!result.ok() && !absl::IsNotFound(result.status())) return result.status();
  return absl::OkStatus();
}

absl::Status ApiOperations::RemoveOwnerReference(const ResourceType& type, const std::string& ns,
                                                 const std::string& name,
                                                 const std::string& owner_uid) {
  absl::StatusOr<ObjectPtr> result = Mutate(type, ns, name, [&](nlohmann::json* object) {
    nlohmann::json& meta = (*object)["metadata"];
    if (!meta.contains("ownerReferences") || !meta["ownerReferences"].is_array()) {
      return absl::OkStatus();
    }
    nlohmann::json kept = nlohmann::json::array();
    for (const nlohmann::json& ref : meta["ownerReferences"]) {
      if (!ref.is_object() || ref.value("uid", "") != owner_uid) kept.push_back(ref);
    }
    if (kept.empty()) {
      meta.erase("ownerReferences");
    } else {
      meta["ownerReferences"] = kept;
    }
    return absl::OkStatus();
  });
  if (!result.ok() && !absl::IsNotFound(result.status())) return result.status();
  return absl::OkStatus();
}

}  // namespace hptrain::testing
