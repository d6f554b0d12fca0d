// The structural-schema behaviour kube-apiserver gives a custom resource with an
// openAPIV3Schema: pruning of undeclared fields, defaulting, and validation with one 422 cause per
// violation, worded like the real server (fixture 09).
//
// Supported keywords: type (object, array, string, integer, number, boolean), properties,
// required, items, additionalProperties (schema or bool), enum, minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, minItems, maxItems, minLength, maxLength, pattern,
// nullable, default, x-kubernetes-preserve-unknown-fields, x-kubernetes-int-or-string. Not
// supported (ignored): oneOf/anyOf/allOf/not, format, x-kubernetes-validations (CEL),
// x-kubernetes-list-type uniqueness.
//
// apiVersion, kind and metadata at the top level are left alone (the server validates metadata on
// its own).
//
// Thread-safety: free functions without shared state.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_OPENAPI_SCHEMA_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_OPENAPI_SCHEMA_H_

#include <vector>

#include "nlohmann/json.hpp"
#include "tests/controller/apiserver/api_status.h"

namespace hptrain::testing {

// Removes fields `schema` does not declare (unless x-kubernetes-preserve-unknown-fields), drops
// nulls where the schema is not nullable, and fills `default`s of missing properties, in place.
void PruneAndDefault(const nlohmann::json& schema, nlohmann::json* object);

// The violations of `object` against `schema`, in field order; empty when valid. Fields are named
// like "spec.workerGroups[0].replicas".
std::vector<Cause> ValidateAgainstSchema(const nlohmann::json& schema,
                                         const nlohmann::json& object);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_OPENAPI_SCHEMA_H_
