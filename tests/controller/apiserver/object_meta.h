// Object metadata rules of the API server double: uids, timestamps, generateName, name
// validation, generation and no-op detection, and the defaults kube-apiserver fills into the
// built-in kinds the fixtures show (pod status Pending, service ports, secret stringData, CRD
// status). Custom resources get no defaults beyond their schema's (openapi_schema.h).
//
// Thread-safety: free functions; the random source behind NewUid/RandomSuffix is thread-safe.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_OBJECT_META_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_OBJECT_META_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/controller/apiserver/api_status.h"
#include "tests/controller/apiserver/resource_type.h"

namespace hptrain::testing {

// Current UTC time as "2026-11-22T02:13:49Z".
std::string NowTimestamp();
// A random RFC 4122 version-4 uid.
std::string NewUid();
// `length` characters from the alphabet kube-apiserver uses for generateName suffixes.
std::string RandomSuffix(int length);

// Violations of the default metadata rules: metadata.name required (FieldValueRequired, "name or
// generateName is required"), and a lowercase RFC 1123 subdomain (RFC 1123 label for namespaces,
// RFC 1035 label for services), FieldValueInvalid otherwise.
std::vector<Cause> ValidateName(const ResourceType& type, const nlohmann::json& object);

// True when `a` and `b` differ outside metadata and status: the change that bumps
// metadata.generation.
bool SpecChanged(const nlohmann::json& a, const nlohmann::json& b);

// True when the objects are equal once metadata.resourceVersion and metadata.managedFields are
// ignored: such a write is a no-op and keeps the resourceVersion (fixture 21).
bool SameObject(const nlohmann::json& a, const nlohmann::json& b);

// Fills the built-in kinds' server-side defaults in place (pods, services, secrets,
// events.k8s.io events, namespaces, CRDs). `create` distinguishes creation (status reset to its
// initial value) from update. Other kinds are left alone.
void ApplyBuiltinDefaults(const ResourceType& type, bool create, nlohmann::json* object);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_OBJECT_META_H_
