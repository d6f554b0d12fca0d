// RBAC for the API server double: an Authorizer (request_policy.h) that grants one user exactly
// the rules of a Role/ClusterRole, so tests can check that the controller needs no more than its
// deploy/rbac manifests grant (and gets 403s like the real server when it does).
//
// Rule matching follows Kubernetes RBAC: apiGroups ("" = core), resources ("pods",
// "pods/status", "*", "*/scale"), verbs ("*" allowed) and optional resourceNames. Non-resource
// requests (discovery, /version) are allowed. Requests of other users are allowed, so a test
// can keep an unrestricted admin token beside the restricted one.
//
// Thread-safety: the returned authorizer is immutable and safe to call from any thread.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_RBAC_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_RBAC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tests/controller/apiserver/request_policy.h"

namespace hptrain::testing {

struct PolicyRule {
  std::vector<std::string> api_groups;
  std::vector<std::string> resources;
  std::vector<std::string> verbs;
  std::vector<std::string> resource_names;  // empty = any name
};

// The rules of a Role or ClusterRole object (JSON; YAML converts with YamlToJson). Errors:
// InvalidArgument when `role` has no rules array.
absl::StatusOr<std::vector<PolicyRule>> PolicyRulesFromRole(const nlohmann::json& role);

// True when one of `rules` allows the request.
bool RulesAllow(const std::vector<PolicyRule>& rules, const RequestAttributes& attributes);

// An authorizer restricting `user` to `rules` (see the header comment).
Authorizer RbacAuthorizer(std::string user, std::vector<PolicyRule> rules);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_RBAC_H_
