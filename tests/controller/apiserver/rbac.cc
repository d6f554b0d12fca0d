#include "tests/controller/apiserver/rbac.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tests/controller/apiserver/json_util.h"

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

Authorizer GrantsAuthorizer(std::function<bool(const std::string& user)> restricted,
                            std::vector<RoleGrant> grants) {
  return [restricted = std::move(restricted),
          grants = std::move(grants)](const RequestAttributes& attributes) {
    return !restricted(attributes.user) || GrantsAllow(grants, attributes);
  };
}

}  // namespace hptrain::testing
