// RBAC for the API server double: authorizers (request_policy.h) that hold some users to exactly
// the rules of Roles and ClusterRoles, so tests can check that the controller needs no more than
// its deploy/rbac manifests grant, and gets 403s like the real server when it does.
//
// Rule matching follows Kubernetes RBAC: apiGroups ("" = core), resources ("pods",
// "pods/status", "*", "*/scale"), verbs ("*" allowed) and optional resourceNames. Non-resource
// requests (discovery, /version) are allowed.
//
// Bindings are reduced to where a role applies: a ClusterRole (bound by a ClusterRoleBinding) to
// every namespace and to cluster-scoped requests, a Role (bound by a RoleBinding in its own
// namespace) only to requests in that namespace. Which users are bound is the authorizer's
// `restricted` choice; every other user is allowed everything, so a test keeps an unrestricted
// admin token beside the restricted ones.
//
//   absl::StatusOr<std::vector<RoleGrant>> grants = GrantsFromManifestFiles(
//       {"deploy/rbac/cluster_role.yaml", "deploy/rbac/leader_election_role.yaml"},
//       "hptrain-system");
//   server.SetAuthorizer(GrantsAuthorizer(
//       [](const std::string& user) { return user == "system:serviceaccount:..."; }, *grants));
//
// Thread-safety: the returned authorizers are immutable and safe to call from any thread.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_RBAC_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_RBAC_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "tests/controller/apiserver/request_policy.h"

namespace hptrain::testing {

struct PolicyRule {
  std::vector<std::string> api_groups;
  std::vector<std::string> resources;
  std::vector<std::string> verbs;
  std::vector<std::string> resource_names;  // empty = any name
};

// The rules of one role and where they apply.
struct RoleGrant {
  std::string role;  // "ClusterRole/<name>" or "Role/<name>", for messages
  std::string ns;    // "" = every namespace and the cluster scope (a ClusterRole)
  std::vector<PolicyRule> rules;
};

// The rules of a Role or ClusterRole object (JSON; YAML converts with YamlToJson). Errors:
// InvalidArgument when `role` has no rules array.
absl::StatusOr<std::vector<PolicyRule>> PolicyRulesFromRole(const nlohmann::json& role);

// True when one of `rules` allows the request.
bool RulesAllow(const std::vector<PolicyRule>& rules, const RequestAttributes& attributes);

// True when one of `grants` allows the request: its rules do, and a Role's request is in the
// Role's namespace.
bool GrantsAllow(const std::vector<RoleGrant>& grants, const RequestAttributes& attributes);

// The Roles and ClusterRoles among the YAML documents of `manifest`; other kinds (bindings,
// service accounts) are skipped. A Role without metadata.namespace goes to `role_namespace`, as
// `kubectl apply -n` and kustomize's `namespace:` place it. Errors: InvalidArgument for YAML
// that does not parse or a role without a rules array.
absl::StatusOr<std::vector<RoleGrant>> GrantsFromManifest(absl::string_view manifest,
                                                          const std::string& role_namespace);
// GrantsFromManifest over the files at `paths`, in order. Errors: NotFound for a file that
// cannot be read; those of GrantsFromManifest, naming the file.
absl::StatusOr<std::vector<RoleGrant>> GrantsFromManifestFiles(
    const std::vector<std::string>& paths, const std::string& role_namespace);

// The user a service account's token authenticates as: "system:serviceaccount:<ns>:<name>".
std::string ServiceAccountUser(absl::string_view ns, absl::string_view name);

// An authorizer restricting `user` to `rules`, granted cluster-wide.
Authorizer RbacAuthorizer(std::string user, std::vector<PolicyRule> rules);

// An authorizer restricting each user for which `restricted` is true to `grants`; other users
// are allowed everything.
Authorizer GrantsAuthorizer(std::function<bool(const std::string& user)> restricted,
                            std::vector<RoleGrant> grants);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_RBAC_H_
