// metadata.managedFields and server-side apply, simplified.
//
// Field ownership is tracked per (manager, operation, subresource) entry as a set of field paths.
// Objects are walked key by key; arrays and scalars are leaves, so every list is atomic (the real
// server merges lists with x-kubernetes-list-type: map by key; the double replaces them). Server-
// owned metadata (name, uid, resourceVersion, ...) is not tracked; labels, annotations,
// ownerReferences and finalizers are.
//
//   Update (POST/PUT/PATCH): the manager takes every field whose value it changed; other entries
//     lose those fields; fields gone from the object leave every entry.
//   Apply (PATCH application/apply-patch+yaml): the config is merged into the object. A field in
//     the config owned by another manager with a different value is a conflict (409, fixture 24)
//     unless force=true, which moves ownership. Fields the manager applied before, omits now and
//     nobody else owns are removed from the object.
//
// Entries are written in the FieldsV1 format ({"f:spec": {"f:replicas": {}}}) and sorted like
// the real server's (Apply before Update, then by time, manager, apiVersion, subresource).
// Client-sent managedFields are ignored.
//
// Thread-safety: free functions without shared state.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_MANAGED_FIELDS_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_MANAGED_FIELDS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace hptrain::testing {

using FieldPath = std::vector<std::string>;
using FieldSet = std::set<FieldPath>;

// Who writes, and how.
struct FieldManagerInfo {
  std::string manager;      // fieldManager query parameter, or derived from the User-Agent
  std::string subresource;  // "" or "status" (or "scale")
  std::string api_version;  // the resource's apiVersion
  std::string time;         // RFC 3339, seconds
  bool custom = false;      // unstructured object: every created map gets a "." marker
};

// The leaf paths of `object` a manager can own. With `status_only` only status.*, otherwise
// everything but status, apiVersion, kind and server-owned metadata.
FieldSet FieldsOf(const nlohmann::json& object, bool status_only);

// ".spec.globalBatchSize" (the form used in conflict messages).
std::string PathString(const FieldPath& path);

// FieldsV1 encoding of `fields`; `dots` adds the "." markers an Update entry carries.
nlohmann::json ToFieldsV1(const FieldSet& fields, bool dots, bool custom);
// The paths of a FieldsV1 document ("." markers and "k:"/"v:" list keys are read as leaves).
FieldSet FromFieldsV1(const nlohmann::json& fields_v1);

// Records an Update by `who` that turned `old` (null when creating) into `*updated`; rewrites
// (*updated)["metadata"]["managedFields"] starting from old's entries. A no-op when nothing
// changed within the writer's scope.
void RecordUpdate(const nlohmann::json& old, nlohmann::json* updated, const FieldManagerInfo& who);

// Server-side apply of `config` by `who` onto `current` (null when the object does not exist).
// Returns the merged object with its managedFields rewritten. Errors: 409 Conflict API error with
// one FieldManagerConflict cause per conflicting field when !force; 400 BadRequest when the
// manager is empty ("fieldManager is required for apply requests").
absl::StatusOr<nlohmann::json> ApplyConfig(const nlohmann::json& current,
                                           const nlohmann::json& config,
                                           const FieldManagerInfo& who, bool force);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_MANAGED_FIELDS_H_
