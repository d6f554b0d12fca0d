// ApiOperations: the verbs of the API server double with kube-apiserver's object semantics, on top
// of the ObjectStore. The HTTP front end and the in-process test API both call these.
//
// Rules implemented (fixture numbers from tests/fixtures/kube):
//  - create: uid, creationTimestamp, generation 1 (types with generation), generateName; a status
//    sent to a type with a status subresource is dropped; 409 AlreadyExists (10); 422 Invalid
//    from name validation, the type's OpenAPI schema (09) and installed validators.
//  - update (PUT) and patch: 409 Conflict when metadata.resourceVersion is stale (18, 35); an
//    unconditional write when it is absent; generation bumps only on changes outside metadata and
//    status (17, 19); a write that changes nothing keeps its resourceVersion (21).
//  - status subresource: writes to the main resource keep the old status (21); writes to /status
//    change only status and never bump generation (20, 28).
//  - scale subresource (custom resources): an autoscaling/v1 Scale read from and written to the
//    type's replica paths; a path that is missing or indexes an array is a 500 (22).
//  - server-side apply (apply-patch+yaml) with field managers and conflicts (23, 24);
//    managedFields otherwise recorded per Update (managed_fields.h).
//  - delete: preconditions (uid, resourceVersion), propagationPolicy Background (default),
//    Foreground (deletionTimestamp + foregroundDeletion finalizer, generation bumped, 37) and
//    Orphan (orphan finalizer); objects with finalizers wait until an update removes the last
//    one; pods are stamped with deletionTimestamp before removal (36). Dependents are handled by
//    the GarbageCollector through the `on_owner_change` callback.
//
// Validators run under the store lock and must not call back into the double.
//
// Thread-safety: all methods are thread-safe.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_API_OPERATIONS_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_API_OPERATIONS_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "tests/controller/apiserver/api_status.h"
#include "tests/controller/apiserver/json_util.h"
#include "tests/controller/apiserver/object_meta.h"
#include "tests/controller/apiserver/object_store.h"
#include "tests/controller/apiserver/resource_type.h"

namespace hptrain::testing {

// Extra validation of a resource type: the causes of a 422, empty when valid. `old` is null on
// create.
using Validator =
    std::function<std::vector<Cause>(const nlohmann::json& object, const nlohmann::json& old)>;

// A validating admission webhook as the API server calls it (admission_webhook.h): OK admits,
// an API error (with its Status body) refuses the write. `old` is null on create. Runs after
// schema validation and the validators, for writes of the object itself (not of its status or
// scale subresource); like validators, under the store lock, so it must not call back into the
// double.
using Admission =
    std::function<absl::Status(const nlohmann::json& object, const nlohmann::json& old)>;

// Who writes and how.
struct WriteContext {
  std::string field_manager = "unknown";
  bool force = false;    // server-side apply: take over conflicting fields
  bool dry_run = false;  // validate and answer, commit nothing
  // The time this write stamps (managedFields); empty: now. The double's own controllers set it
  // to the time of the write they react to, as kube-apiserver's do within the same second.
  std::string time;
  std::string Time() const { return time.empty() ? NowTimestamp() : time; }
};

struct DeleteOptions {
  std::string propagation_policy;  // "Background" (default when empty), "Foreground", "Orphan"
  std::optional<std::string> precondition_uid;
  std::optional<std::string> precondition_resource_version;
  bool dry_run = false;
};

class ApiOperations {
 public:
  // `store` is not owned and must outlive this object.
  explicit ApiOperations(ObjectStore* store);

  // Adds a validator for the type with ResourceType::Qualified() `resource`.
  void AddValidator(const std::string& resource, Validator validator);
  // Adds an admission webhook for the type with ResourceType::Qualified() `resource`.
  void AddAdmission(const std::string& resource, Admission admission);
  // Called after a commit removed an object (with its final state) or put it into
  // foreground/orphan deletion; the garbage collector subscribes here. Set before serving.
  using OwnerChangeCallback = std::function<void(const ObjectKey&, const ObjectPtr&)>;
  void SetOwnerChangeCallback(OwnerChangeCallback callback);

  // GET of one object. Errors: 404 NotFound.
  absl::StatusOr<ObjectPtr> Get(const ResourceType& type, const std::string& ns,
                                const std::string& name) const;
  // POST. `ns` is the namespace of the URL ("" for cluster-scoped types).
  absl::StatusOr<ObjectPtr> Create(const ResourceType& type, const std::string& ns,
                                   nlohmann::json body, const WriteContext& context);
  // PUT on the object ("" subresource) or its "status" subresource. Errors: 404 NotFound, 400
  // BadRequest (name mismatch), 409 Conflict, 422 Invalid.
  absl::StatusOr<ObjectPtr> Update(const ResourceType& type, const std::string& ns,
                                   const std::string& name, const std::string& subresource,
                                   nlohmann::json body, const WriteContext& context);
  // PATCH on the object or its status. An apply patch creates a missing object. Errors as Update
  // plus 409 apply conflicts and 422 for a JSON patch that does not apply.
  absl::StatusOr<ObjectPtr> Patch(const ResourceType& type, const std::string& ns,
                                  const std::string& name, const std::string& subresource,
                                  PatchType patch_type, const nlohmann::json& patch,
                                  const WriteContext& context);
  // DELETE; returns the response body: the object while it waits for finalizers or for types
  // that return the deleted object, else a Success Status with details {name, group, kind, uid}.
  // Errors: 404, 409 (preconditions), 400 (unknown propagation policy).
  absl::StatusOr<nlohmann::json> Delete(const ResourceType& type, const std::string& ns,
                                        const std::string& name, const DeleteOptions& options);
  // DELETE on a collection: deletes every object `request` selects; returns the list of what
  // was deleted.
  absl::StatusOr<nlohmann::json> DeleteCollection(const ResourceType& type,
                                                  const ListRequest& request,
                                                  const DeleteOptions& options);

  // The autoscaling/v1 Scale of an object. Errors: 404 (no object, or no scale subresource), 500
  // when the spec replicas path cannot be resolved (fixture 22).
  absl::StatusOr<nlohmann::json> GetScale(const ResourceType& type, const std::string& ns,
                                          const std::string& name) const;
  // PUT of a Scale (the spec replicas field is written; generation bumps), or a PATCH of it.
  absl::StatusOr<nlohmann::json> UpdateScale(const ResourceType& type, const std::string& ns,
                                             const std::string& name,
                                             std::optional<PatchType> patch_type,
                                             const nlohmann::json& body,
                                             const WriteContext& context);

  // Test access that bypasses validation and the status rules (the kubelet's or a fixture's
  // view): creates `object` or replaces the stored one, status included.
  absl::StatusOr<ObjectPtr> Put(const ResourceType& type, nlohmann::json object);
  // Read-modify-write of a stored object under the store lock; `mutate` edits the JSON. Errors:
  // 404 NotFound, or what `mutate` returns.
  absl::StatusOr<ObjectPtr> Mutate(const ResourceType& type, const std::string& ns,
                                   const std::string& name,
                                   const std::function<absl::Status(nlohmann::json*)>& mutate);
  // Removes the finalizer `finalizer` from the object (used by the garbage collector); a no-op
  // when the object or finalizer is absent. Removing the last finalizer of an object being
  // deleted removes the object.
  absl::Status RemoveFinalizer(const ResourceType& type, const std::string& ns,
                               const std::string& name, const std::string& finalizer);
  // Drops the ownerReference with `owner_uid` from the object; a no-op when absent.
  absl::Status RemoveOwnerReference(const ResourceType& type, const std::string& ns,
                                    const std::string& name, const std::string& owner_uid);

 private:
  // What kube-apiserver's CRD controllers do after a CustomResourceDefinition is written.
  void CrdController(const ResourceType& type, const ObjectPtr& crd);
  enum class Scope { kMain, kStatus, kScale, kDirect };
  // What a write pipeline decided, beyond the store commit.
  struct Outcome {
    bool removed = false;     // the object is gone
    bool finalizing = false;  // the object waits for foregroundDeletion/orphan processing
  };
  // Turns `next` (the requested new state) into the commit for `current` (null on create):
  // metadata rules, status rules, defaults, schema, validation, generation, managedFields,
  // no-op detection and finalizer completion. `fields_done` means managedFields were already
  // computed (server-side apply).
  absl::StatusOr<ObjectStore::Commit> PrepareWrite(const ResourceType& type,
                                                   const ObjectPtr& current, nlohmann::json next,
                                                   Scope scope, const WriteContext& context,
                                                   bool fields_done, Outcome* outcome) const;
  absl::Status Validate(const ResourceType& type, const nlohmann::json& object,
                        const nlohmann::json& old) const;
  // The admission webhooks of `type` (AddAdmission), in order; the first refusal wins.
  absl::Status Admit(const ResourceType& type, const nlohmann::json& object,
                     const nlohmann::json& old) const;
  // Store transaction + owner-change notification + dry-run handling.
  absl::StatusOr<ObjectPtr> Run(
      const ResourceType& type, const std::string& ns, const std::string& name,
      const WriteContext& context,
      const std::function<absl::StatusOr<ObjectStore::Commit>(const ObjectPtr&, Outcome*)>& fn);
  void Notify(const ObjectPtr& object, const std::string& resource) const;

  ObjectStore* const store_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::vector<Validator>> validators_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<Admission>> admissions_ ABSL_GUARDED_BY(mu_);
  OwnerChangeCallback on_owner_change_;
};

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_API_OPERATIONS_H_
