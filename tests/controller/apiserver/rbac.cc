#include "tests/controller/apiserver/rbac.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/controller/apiserver/json_util.h"
#include "tests/controller/apiserver/selectors.h"

namespace hptrain::testing {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

std::vector<std::string> Strings(const nlohmann::json& rule, const char* key) {
  std::vector<std::string> out;
  if (!rule.contains(key) || !rule[key].is_array()) return out;
  for (const nlohmann::json& item : rule[key]) {
    if (item.is_string()) out.push_back(item.get<std::string>());
  }
  return out;
}

bool ResourceAllowed(const std::vector<std::string>& resources, const std::string& resource,
                     const std::string& subresource) {
  std::string full = subresource.empty() ? resource : absl::StrCat(resource, "/", subresource);
  if (Contains(resources, "*") || Contains(resources, full)) return true;
  if (!subresource.empty() && Contains(resources, absl::StrCat("*/", subresource))) return true;
  return false;
}

}  // namespace

absl::StatusOr<std::vector<PolicyRule>> PolicyRulesFromRole(const nlohmann::json& role) {
  if (!role.is_object() || !role.contains("rules") || !role["rules"].is_array()) {
    return absl::InvalidArgumentError("role has no rules array");
  }
  std::vector<PolicyRule> rules;
  for (const nlohmann::json& rule : role["rules"]) {
    rules.push_back({Strings(rule, "apiGroups"), Strings(rule, "resources"), Strings(rule, "verbs"),
                     Strings(rule, "resourceNames")});
  }
  return rules;
}

bool RulesAllow(const std::vector<PolicyRule>& rules, const RequestAttributes& attributes) {
  if (!attributes.resource_request) return true;
  for (const PolicyRule& rule : rules) {
    if (!Contains(rule.verbs, "*") && !Contains(rule.verbs, attributes.verb)) continue;
    if (!Contains(rule.api_groups, "*") && !Contains(rule.api_groups, attributes.group)) continue;
    if (!ResourceAllowed(rule.resources, attributes.resource, attributes.subresource)) continue;
    if (!rule.resource_names.empty() && !Contains(rule.resource_names, attributes.name)) continue;
    return true;
  }
  return false;
}

bool GrantsAllow(const std::vector<RoleGrant>& grants, const RequestAttributes& attributes) {
  if (!attributes.resource_request) return true;
  for (const RoleGrant& grant : grants) {
    // A RoleBinding grants nothing outside its namespace, cluster-scoped requests included.
    if (!grant.ns.empty() && grant.ns != attributes.ns) continue;
    if (RulesAllow(grant.rules, attributes)) return true;
  }
  return false;
}

absl::StatusOr<std::vector<RoleGrant>> GrantsFromManifest(absl::string_view manifest,
                                                          const std::string& role_namespace) {
  absl::StatusOr<std::vector<nlohmann::json>> documents = YamlDocumentsToJson(manifest);
  if (!documents.ok()) return absl::InvalidArgumentError(documents.status().message());
  std::vector<RoleGrant> grants;
  for (const nlohmann::json& object : *documents) {
    if (!object.is_object()) continue;
    const std::string kind = object.value("kind", "");
    if (kind != "Role" && kind != "ClusterRole") continue;
    const nlohmann::json metadata = object.value("metadata", nlohmann::json::object());
    RoleGrant grant;
    grant.role = absl::StrCat(kind, "/", metadata.value("name", ""));
    if (kind == "Role") grant.ns = metadata.value("namespace", role_namespace);
    absl::StatusOr<std::vector<PolicyRule>> rules = PolicyRulesFromRole(object);
    if (!rules.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(grant.role, ": ", rules.status().message()));
    }
    grant.rules = *std::move(rules);
    grants.push_back(std::move(grant));
  }
  return grants;
}

absl::StatusOr<std::vector<RoleGrant>> GrantsFromManifestFiles(
    const std::vector<std::string>& paths, const std::string& role_namespace) {
  std::vector<RoleGrant> grants;
  for (const std::string& path : paths) {
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<std::vector<RoleGrant>> more = GrantsFromManifest(text.str(), role_namespace);
    if (!more.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", more.status().message()));
    }
    grants.insert(grants.end(), more->begin(), more->end());
  }
  return grants;
}

std::string ServiceAccountUser(absl::string_view ns, absl::string_view name) {
  return absl::StrCat("system:serviceaccount:", ns, ":", name);
}

Authorizer RbacAuthorizer(std::string user, std::vector<PolicyRule> rules) {
  return GrantsAuthorizer([user = std::move(user)](const std::string& u) { return u == user; },
                          {RoleGrant{"ClusterRole", "", std::move(rules)}});
}

const char kUserFacingClusterRoles[] = R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: admin
aggregationRule:
  clusterRoleSelectors:
    - matchLabels:
        rbac.authorization.k8s.io/aggregate-to-admin: "true"
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: edit
  labels:
    rbac.authorization.k8s.io/aggregate-to-admin: "true"
aggregationRule:
  clusterRoleSelectors:
    - matchLabels:
        rbac.authorization.k8s.io/aggregate-to-edit: "true"
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: view
  labels:
    rbac.authorization.k8s.io/aggregate-to-edit: "true"
aggregationRule:
  clusterRoleSelectors:
    - matchLabels:
        rbac.authorization.k8s.io/aggregate-to-view: "true"
rules: []
)";

bool LabelSelectorMatches(const nlohmann::json& selector, const nlohmann::json& labels) {
  return LabelSelector::FromObject(selector).Matches(labels);
}

absl::Status RbacPolicy::Apply(absl::string_view manifest, const std::string& default_namespace) {
  absl::StatusOr<std::vector<nlohmann::json>> documents = YamlDocumentsToJson(manifest);
  if (!documents.ok()) return absl::InvalidArgumentError(documents.status().message());
  absl::MutexLock lock(&mu_);
  for (nlohmann::json object : *documents) {
    if (!object.is_object()) continue;
    const std::string kind = object.value("kind", "");
    std::map<std::string, nlohmann::json>* into = nullptr;
    if (kind == "ClusterRole") into = &cluster_roles_;
    if (kind == "Role") into = &roles_;
    if (kind == "RoleBinding") into = &role_bindings_;
    if (kind == "ClusterRoleBinding") into = &cluster_role_bindings_;
    if (into == nullptr) continue;
    nlohmann::json& metadata = object["metadata"];
    if (!metadata.is_object()) metadata = nlohmann::json::object();
    const std::string name = metadata.value("name", "");
    if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(kind, " without a name"));
    if ((kind == "Role" || kind == "ClusterRole") && !object.contains("aggregationRule") &&
        !PolicyRulesFromRole(object).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(kind, "/", name, ": role has no rules array"));
    }
    std::string key = name;
    if (kind == "Role" || kind == "RoleBinding") {
      if (!metadata.contains("namespace")) metadata["namespace"] = default_namespace;
      key = absl::StrCat(metadata.value("namespace", ""), "/", name);
    }
    (*into)[key] = std::move(object);
  }
  AggregateLocked();
  return absl::OkStatus();
}

absl::Status RbacPolicy::ApplyFile(const std::string& path, const std::string& default_namespace) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::Status status = Apply(text.str(), default_namespace);
  if (!status.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", status.message()));
  return absl::OkStatus();
}

absl::Status RbacPolicy::DeleteClusterRole(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (cluster_roles_.erase(name) == 0) {
    return absl::NotFoundError(absl::StrCat("clusterroles \"", name, "\" not found"));
  }
  AggregateLocked();
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> RbacPolicy::GetClusterRole(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = cluster_roles_.find(name);
  if (it == cluster_roles_.end()) {
    return absl::NotFoundError(absl::StrCat("clusterroles \"", name, "\" not found"));
  }
  return it->second;
}

void RbacPolicy::AggregateLocked() {
  // Each pass sets every aggregated role's rules from the others' current rules (in name order,
  // each rule once), as the controller does on every ClusterRole event; nested aggregations
  // settle within as many passes as there are roles.
  for (size_t pass = 0; pass <= cluster_roles_.size(); ++pass) {
    bool changed = false;
    for (auto& [name, role] : cluster_roles_) {
      if (!role.contains("aggregationRule")) continue;
      const nlohmann::json selectors =
          role["aggregationRule"].value("clusterRoleSelectors", nlohmann::json::array());
      nlohmann::json rules = nlohmann::json::array();
      for (const auto& [other_name, other] : cluster_roles_) {
        if (other_name == name) continue;
        const nlohmann::json labels = other["metadata"].value("labels", nlohmann::json::object());
        bool selected = false;
        for (const nlohmann::json& selector : selectors) {
          selected = selected || LabelSelectorMatches(selector, labels);
        }
        if (!selected) continue;
        for (const nlohmann::json& rule : other.value("rules", nlohmann::json::array())) {
          if (std::find(rules.begin(), rules.end(), rule) == rules.end()) rules.push_back(rule);
        }
      }
      if (role.value("rules", nlohmann::json::array()) != rules) {
        role["rules"] = std::move(rules);
        changed = true;
      }
    }
    if (!changed) return;
  }
}

std::vector<PolicyRule> RbacPolicy::RulesOfLocked(const std::string& kind, const std::string& ns,
                                                  const std::string& name) const {
  const nlohmann::json* role = nullptr;
  if (kind == "ClusterRole") {
    auto it = cluster_roles_.find(name);
    if (it != cluster_roles_.end()) role = &it->second;
  } else if (kind == "Role") {
    auto it = roles_.find(absl::StrCat(ns, "/", name));
    if (it != roles_.end()) role = &it->second;
  }
  // A binding to a role that does not exist (yet) grants nothing, as on a cluster.
  if (role == nullptr || !role->contains("rules")) return {};
  absl::StatusOr<std::vector<PolicyRule>> rules = PolicyRulesFromRole(*role);
  return rules.ok() ? *std::move(rules) : std::vector<PolicyRule>{};
}

namespace {

bool SubjectsName(const nlohmann::json& binding, const std::string& user) {
  for (const nlohmann::json& subject : binding.value("subjects", nlohmann::json::array())) {
    const std::string kind = subject.value("kind", "");
    const std::string name = subject.value("name", "");
    if (kind == "User" && name == user) return true;
    if (kind == "ServiceAccount" &&
        ServiceAccountUser(subject.value("namespace", ""), name) == user) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool RbacPolicy::Allows(const RequestAttributes& attributes) const {
  if (!attributes.resource_request) return true;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [key, binding] : cluster_role_bindings_) {
    if (!SubjectsName(binding, attributes.user)) continue;
    const nlohmann::json ref = binding.value("roleRef", nlohmann::json::object());
    if (ref.value("kind", "") != "ClusterRole") continue;  // the API refuses any other
    if (RulesAllow(RulesOfLocked("ClusterRole", "", ref.value("name", "")), attributes)) {
      return true;
    }
  }
  for (const auto& [key, binding] : role_bindings_) {
    const std::string ns = binding["metadata"].value("namespace", "");
    // A RoleBinding grants nothing outside its namespace, cluster-scoped requests included.
    if (ns != attributes.ns || !SubjectsName(binding, attributes.user)) continue;
    const nlohmann::json ref = binding.value("roleRef", nlohmann::json::object());
    if (RulesAllow(RulesOfLocked(ref.value("kind", ""), ns, ref.value("name", "")), attributes)) {
      return true;
    }
  }
  return false;
}

Authorizer PolicyAuthorizer(std::shared_ptr<const RbacPolicy> policy,
                            std::function<bool(const std::string& user)> restricted) {
  return [policy = std::move(policy),
          restricted = std::move(restricted)](const RequestAttributes& attributes) {
    return !restricted(attributes.user) || policy->Allows(attributes);
  };
}

Authorizer GrantsAuthorizer(std::function<bool(const std::string& user)> restricted,
                            std::vector<RoleGrant> grants) {
  return [restricted = std::move(restricted),
          grants = std::move(grants)](const RequestAttributes& attributes) {
    return !restricted(attributes.user) || GrantsAllow(grants, attributes);
  };
}

}  // namespace hptrain::testing
