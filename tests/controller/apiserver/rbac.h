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
// RbacPolicy models the rest of RBAC for tests about users rather than the controller: Roles,
// ClusterRoles, RoleBindings and ClusterRoleBindings, whose subjects and roleRefs are read, and
// ClusterRole aggregation as kube-controller-manager's clusterrole-aggregation controller does it
// (a ClusterRole with an aggregationRule gets the union of the rules of every other ClusterRole
// whose labels match one of its clusterRoleSelectors, recomputed on every change, so aggregated
// roles nest: `view` is labelled aggregate-to-edit). kUserFacingClusterRoles holds Kubernetes'
// `admin`, `edit` and `view` with their real labels and aggregationRules:
//
//   auto policy = std::make_shared<RbacPolicy>();
//   ASSERT_OK(policy->Apply(kUserFacingClusterRoles, ""));
//   ASSERT_OK(policy->ApplyFile("deploy/rbac/aggregate_roles.yaml", ""));
//   ASSERT_OK(policy->Apply(R"(kind: RoleBinding ... roleRef: {kind: ClusterRole, name: edit})",
//                           "team-a"));
//   server.SetAuthorizer(
//       PolicyAuthorizer(policy, [](const std::string& u) { return u != "admin"; }));
//
// Thread-safety: the returned authorizers are immutable and safe to call from any thread;
// RbacPolicy's methods are thread-safe, and an authorizer from PolicyAuthorizer sees the policy
// as it is at each request.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_RBAC_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_RBAC_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
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

// Kubernetes' user-facing ClusterRoles as its RBAC bootstrap policy defines their aggregation:
// `admin` aggregates rbac.authorization.k8s.io/aggregate-to-admin, `edit` aggregate-to-edit and
// is itself labelled aggregate-to-admin, `view` aggregate-to-view and is labelled
// aggregate-to-edit. The built-in resources' rules (system:aggregate-to-edit, ...) are left out:
// these roles hold only what other ClusterRoles aggregate into them.
extern const char kUserFacingClusterRoles[];

// True when `labels` (an object of strings) satisfy `selector`, a metav1.LabelSelector
// (matchLabels, matchExpressions with In, NotIn, Exists, DoesNotExist); an empty selector matches
// everything.
bool LabelSelectorMatches(const nlohmann::json& selector, const nlohmann::json& labels);

class RbacPolicy {
 public:
  // Adds or replaces the Roles, ClusterRoles, RoleBindings and ClusterRoleBindings among the YAML
  // documents of `manifest` (other kinds are skipped), then re-aggregates. A namespaced object
  // without metadata.namespace goes to `default_namespace`. Errors: InvalidArgument for YAML that
  // does not parse, an object without a name, or a role without rules and aggregationRule.
  absl::Status Apply(absl::string_view manifest, const std::string& default_namespace);
  // Apply of a file's text. Errors: NotFound for a file that cannot be read; those of Apply,
  // naming the file.
  absl::Status ApplyFile(const std::string& path, const std::string& default_namespace);
  // Removes a ClusterRole, then re-aggregates. NotFound when there is none.
  absl::Status DeleteClusterRole(const std::string& name);
  // The ClusterRole as the API would serve it (an aggregated one with its computed rules).
  // Errors: NotFound.
  absl::StatusOr<nlohmann::json> GetClusterRole(const std::string& name) const;
  // True when a binding whose subjects name `attributes.user` (kind User, or ServiceAccount as
  // ServiceAccountUser) grants the request: a ClusterRoleBinding everywhere, a RoleBinding (to a
  // Role of its namespace or to a ClusterRole) only in its namespace. Non-resource requests are
  // allowed.
  bool Allows(const RequestAttributes& attributes) const;

 private:
  // The clusterrole-aggregation controller's pass, repeated until nothing changes.
  void AggregateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<PolicyRule> RulesOfLocked(const std::string& kind, const std::string& ns,
                                        const std::string& name) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, nlohmann::json> cluster_roles_ ABSL_GUARDED_BY(mu_);  // by name
  // By "<namespace>/<name>".
  std::map<std::string, nlohmann::json> roles_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, nlohmann::json> role_bindings_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, nlohmann::json> cluster_role_bindings_ ABSL_GUARDED_BY(mu_);
};

// An authorizer holding each user for which `restricted` is true to `policy` (as it is at each
// request); other users are allowed everything.
Authorizer PolicyAuthorizer(std::shared_ptr<const RbacPolicy> policy,
                            std::function<bool(const std::string& user)> restricted);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_RBAC_H_
