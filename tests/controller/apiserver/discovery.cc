#include "tests/controller/apiserver/discovery.h"

#include <algorithm>
#include <functional>
#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hptrain::testing {
namespace {

nlohmann::json GroupVersion(const std::string& group, const std::string& version) {
  return {{"groupVersion", absl::StrCat(group, "/", version)}, {"version", version}};
}

std::string StorageVersionHash(const ResourceType& type) {
  size_t hash =
      std::hash<std::string>()(absl::StrCat(type.group, "/", type.version, "/", type.kind));
  std::string bytes(reinterpret_cast<const char*>(&hash), sizeof(hash));
  return absl::Base64Escape(bytes);
}

nlohmann::json GroupEntry(const std::string& group, const std::vector<std::string>& versions) {
  nlohmann::json list = nlohmann::json::array();
  for (const std::string& version : versions) list.push_back(GroupVersion(group, version));
  return {{"name", group}, {"versions", list}, {"preferredVersion", list[0]}};
}

// Served groups (named groups only) in first-seen order with their versions.
std::vector<std::pair<std::string, std::vector<std::string>>> Groups(
    const std::vector<ResourceType>& types) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const ResourceType& type : types) {
    if (type.group.empty()) continue;
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& entry) { return entry.first == type.group; });
    if (it == groups.end()) {
      groups.push_back({type.group, {type.version}});
    } else if (std::find(it->second.begin(), it->second.end(), type.version) == it->second.end()) {
      it->second.push_back(type.version);
    }
  }
  return groups;
}

}  // namespace

nlohmann::json VersionInfo(const std::string& git_version) {
  std::vector<std::string> parts = absl::StrSplit(git_version, absl::ByAnyChar("v."));
  std::string major = parts.size() > 1 ? parts[1] : "1";
  std::string minor = parts.size() > 2 ? parts[2] : "28";
  return {{"major", major},
          {"minor", minor},
          {"gitVersion", git_version},
          {"gitCommit", "0000000000000000000000000000000000000000"},
          {"gitTreeState", "clean"},
          {"buildDate", "2026-01-01T00:00:00Z"},
          {"goVersion", "go1.21.13"},
          {"compiler", "gc"},
          {"platform", "linux/amd64"}};
}

nlohmann::json CoreApiVersions(const std::string& server_address) {
  return {{"kind", "APIVersions"},
          {"versions", nlohmann::json::array({"v1"})},
          {"serverAddressByClientCIDRs",
           {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}}}};
}

nlohmann::json ApiGroupList(const std::vector<ResourceType>& types) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& [group, versions] : Groups(types)) groups.push_back(GroupEntry(group, versions));
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
}

std::optional<nlohmann::json> ApiGroup(const std::vector<ResourceType>& types,
                                       const std::string& group) {
  for (const auto& [name, versions] : Groups(types)) {
    if (name != group) continue;
    nlohmann::json body = GroupEntry(name, versions);
    body["kind"] = "APIGroup";
    body["apiVersion"] = "v1";
    return body;
  }
  return std::nullopt;
}

std::optional<nlohmann::json> ApiResourceList(const std::vector<ResourceType>& types,
                                              const std::string& group,
                                              const std::string& version) {
  nlohmann::json resources = nlohmann::json::array();
  for (const ResourceType& type : types) {
    if (type.group != group || type.version != version) continue;
    nlohmann::json entry = {
        {"name", type.plural},
        {"singularName", type.Singular()},
        {"namespaced", type.namespaced},
        {"kind", type.kind},
        {"verbs",
         {"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}}};
    if (!type.short_names.empty()) entry["shortNames"] = type.short_names;
    if (!type.categories.empty()) entry["categories"] = type.categories;
    entry["storageVersionHash"] = StorageVersionHash(type);
    resources.push_back(entry);
    if (type.status_subresource) {
      resources.push_back({{"name", absl::StrCat(type.plural, "/status")},
                           {"singularName", ""},
                           {"namespaced", type.namespaced},
                           {"kind", type.kind},
                           {"verbs", {"get", "patch", "update"}}});
    }
    if (type.scale.has_value()) {
      resources.push_back({{"name", absl::StrCat(type.plural, "/scale")},
                           {"singularName", ""},
                           {"namespaced", type.namespaced},
                           {"group", "autoscaling"},
                           {"version", "v1"},
                           {"kind", "Scale"},
                           {"verbs", {"get", "patch", "update"}}});
    }
  }
  if (resources.empty()) return std::nullopt;
  std::string group_version = group.empty() ? version : absl::StrCat(group, "/", version);
  return nlohmann::json{{"kind", "APIResourceList"},
                        {"apiVersion", "v1"},
                        {"groupVersion", group_version},
                        {"resources", resources}};
}

}  // namespace hptrain::testing
