#include "tests/controller/apiserver/rbac.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

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

Authorizer RbacAuthorizer(std::string user, std::vector<PolicyRule> rules) {
  return [user = std::move(user), rules = std::move(rules)](const RequestAttributes& attributes) {
    return attributes.user != user || RulesAllow(rules, attributes);
  };
}

}  // namespace hptrain::testing
