// Reading ObjectMeta fields out of a JSON object, and the cache key of an object.
//
// Every accessor tolerates a missing or mistyped field and returns "" (or an empty map) then, so
// callers can read objects straight from the wire. Pure functions, thread-safe.
#ifndef HPTRAIN_CONTROLLER_KUBE_OBJECT_META_H_
#define HPTRAIN_CONTROLLER_KUBE_OBJECT_META_H_

#include <map>
#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace hptrain::kube {

std::string NameOf(const nlohmann::json& object);
std::string NamespaceOf(const nlohmann::json& object);
std::string ResourceVersionOf(const nlohmann::json& object);
std::string UidOf(const nlohmann::json& object);

// metadata.labels as a map (string values only).
std::map<std::string, std::string> LabelsOf(const nlohmann::json& object);

// Whether metadata.deletionTimestamp is set (the object is being deleted).
bool IsBeingDeleted(const nlohmann::json& object);

// The cache and work-queue key: "namespace/name", or "name" for a cluster-scoped object.
std::string ObjectKey(absl::string_view ns, absl::string_view name);
std::string KeyOf(const nlohmann::json& object);

// Splits a key back into namespace ("" for cluster-scoped) and name.
void SplitKey(absl::string_view key, std::string* ns, std::string* name);

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_OBJECT_META_H_
