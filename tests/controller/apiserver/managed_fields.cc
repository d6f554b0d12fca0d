#include "tests/controller/apiserver/managed_fields.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/controller/apiserver/api_status.h"
#include "tests/controller/apiserver/json_util.h"

namespace hptrain::testing {
namespace {

struct Entry {
  std::string manager;
  std::string operation;
  std::string subresource;
  std::string api_version;
  std::string time;
  FieldSet fields;
};

void Walk(const nlohmann::json& node, FieldPath* path, FieldSet* out) {
  if (node.is_object() && !node.empty()) {
    for (const auto& [key, child] : node.items()) {
      path->push_back(key);
      Walk(child, path, out);
      path->pop_back();
    }
    return;
  }
  out->insert(*path);
}

std::vector<Entry> ReadEntries(const nlohmann::json& object) {
  std::vector<Entry> entries;
  if (!object.is_object()) return entries;
  const nlohmann::json* list = FindPath(object, {"metadata", "managedFields"});
  if (list == nullptr || !list->is_array()) return entries;
  for (const nlohmann::json& item : *list) {
    if (!item.is_object()) continue;
    Entry entry{item.value("manager", ""),     item.value("operation", ""),
                item.value("subresource", ""), item.value("apiVersion", ""),
                item.value("time", ""),        {}};
    if (item.contains("fieldsV1")) entry.fields = FromFieldsV1(item["fieldsV1"]);
    entries.push_back(std::move(entry));
  }
  return entries;
}

// Writes `entries` in kube-apiserver's order: Apply before Update, then older before newer (by
// the second), then by manager, apiVersion and subresource.
void WriteEntries(std::vector<Entry> entries, bool custom, nlohmann::json* object) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.operation, a.time, a.manager, a.api_version, a.subresource) <
           std::tie(b.operation, b.time, b.manager, b.api_version, b.subresource);
  });
  nlohmann::json list = nlohmann::json::array();
  for (const Entry& entry : entries) {
    if (entry.fields.empty()) continue;
    nlohmann::json item = {
        {"manager", entry.manager},
        {"operation", entry.operation},
        {"apiVersion", entry.api_version},
        {"time", entry.time},
        {"fieldsType", "FieldsV1"},
        {"fieldsV1", ToFieldsV1(entry.fields, entry.operation == "Update", custom)}};
    if (!entry.subresource.empty()) item["subresource"] = entry.subresource;
    list.push_back(std::move(item));
  }
  if (list.empty()) {
    (*object)["metadata"].erase("managedFields");
  } else {
    (*object)["metadata"]["managedFields"] = std::move(list);
  }
}

// Keeps only the paths that still exist in `object`.
void DropMissing(const nlohmann::json& object, FieldSet* fields) {
  for (auto it = fields->begin(); it != fields->end();) {
    it = FindPath(object, *it) == nullptr ? fields->erase(it) : std::next(it);
  }
}

// Erases the field at `path`, then the maps below the top level that it leaves empty.
void ErasePath(nlohmann::json* object, const FieldPath& path) {
  if (path.empty()) return;
  std::vector<nlohmann::json*> chain = {object};
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    nlohmann::json* node = chain.back();
    if (!node->is_object() || !node->contains(path[i])) return;
    chain.push_back(&(*node)[path[i]]);
  }
  if (!chain.back()->is_object()) return;
  chain.back()->erase(path.back());
  for (size_t i = chain.size() - 1; i >= 2 && chain[i]->empty(); --i) {
    chain[i - 1]->erase(path[i - 1]);
  }
}

bool ValuesEqual(const nlohmann::json& a, const nlohmann::json& b, const FieldPath& path) {
  const nlohmann::json* x = FindPath(a, path);
  const nlohmann::json* y = FindPath(b, path);
  if (x == nullptr || y == nullptr) return x == y;
  return *x == *y;
}

std::string ManagerLabel(const Entry& entry) {
  if (entry.operation == "Apply") return absl::StrCat("\"", entry.manager, "\"");
  return absl::StrCat("\"", entry.manager, "\" using ", entry.api_version);
}

void AddDots(nlohmann::json* node, int depth, bool custom) {
  for (auto& [key, child] : node->items()) {
    if (key == "." || child.empty()) continue;
    bool skip = depth == 0 && (key == "f:metadata" || !custom);
    if (!skip) child["."] = nlohmann::json::object();
    AddDots(&child, depth + 1, custom);
  }
}

}  // namespace

FieldSet FieldsOf(const nlohmann::json& object, bool status_only) {
  FieldSet out;
  if (!object.is_object()) return out;
  FieldPath path;
  for (const auto& [key, value] : object.items()) {
    if (key == "apiVersion" || key == "kind") continue;
    if ((key == "status") != status_only) continue;
    path.push_back(key);
    if (key == "metadata") {
      for (const char* owned : {"labels", "annotations", "ownerReferences", "finalizers"}) {
        if (!value.is_object() || !value.contains(owned)) continue;
        path.push_back(owned);
        if (std::string(owned) == "labels" || std::string(owned) == "annotations") {
          Walk(value[owned], &path, &out);
        } else {
          out.insert(path);
        }
        path.pop_back();
      }
    } else {
      Walk(value, &path, &out);
    }
    path.pop_back();
  }
  return out;
}

std::string PathString(const FieldPath& path) {
  std::string out;
  for (const std::string& key : path) absl::StrAppend(&out, ".", key);
  return out;
}

nlohmann::json ToFieldsV1(const FieldSet& fields, bool dots, bool custom) {
  nlohmann::json root = nlohmann::json::object();
  for (const FieldPath& path : fields) {
    nlohmann::json* node = &root;
    for (const std::string& key : path) {
      nlohmann::json& child = (*node)[absl::StrCat("f:", key)];
      if (child.is_null()) child = nlohmann::json::object();
      node = &child;
    }
  }
  if (dots) AddDots(&root, 0, custom);
  return root;
}

FieldSet FromFieldsV1(const nlohmann::json& fields_v1) {
  FieldSet out;
  FieldPath path;
  std::function<void(const nlohmann::json&)> visit = [&](const nlohmann::json& node) {
    for (const auto& [key, child] : node.items()) {
      if (!absl::StartsWith(key, "f:")) continue;
      path.push_back(key.substr(2));
      bool leaf = true;
      bool keyed = false;
      if (child.is_object()) {
        for (const auto& item : child.items()) {
          if (absl::StartsWith(item.key(), "f:")) leaf = false;
          if (absl::StartsWith(item.key(), "k:") || absl::StartsWith(item.key(), "v:") ||
              absl::StartsWith(item.key(), "i:")) {
            keyed = true;
          }
        }
      }
      if (leaf || keyed) {
        out.insert(path);
      } else {
        visit(child);
      }
      path.pop_back();
    }
  };
  if (fields_v1.is_object()) visit(fields_v1);
  return out;
}

void RecordUpdate(const nlohmann::json& old, nlohmann::json* updated, const FieldManagerInfo& who) {
  bool status_only = who.subresource == "status";
  std::vector<Entry> entries = ReadEntries(old);
  FieldSet old_fields = old.is_null() ? FieldSet() : FieldsOf(old, status_only);
  FieldSet new_fields = FieldsOf(*updated, status_only);
  FieldSet changed;
  for (const FieldPath& path : new_fields) {
    if (old_fields.count(path) == 0 || !ValuesEqual(old, *updated, path)) changed.insert(path);
  }
  bool removed_any = false;
  for (const FieldPath& path : old_fields) {
    if (new_fields.count(path) == 0) removed_any = true;
  }
  if (!changed.empty() || removed_any) {
    Entry* own = nullptr;
    for (Entry& entry : entries) {
      if (entry.manager == who.manager && entry.operation == "Update" &&
          entry.subresource == who.subresource) {
        own = &entry;
        continue;
      }
      for (const FieldPath& path : changed) entry.fields.erase(path);
    }
    if (own == nullptr) {
      entries.push_back({who.manager, "Update", who.subresource, who.api_version, who.time, {}});
      own = &entries.back();
    }
    own->fields.insert(changed.begin(), changed.end());
    own->time = who.time;
    own->api_version = who.api_version;
  }
  for (Entry& entry : entries) DropMissing(*updated, &entry.fields);
  WriteEntries(entries, who.custom, updated);
}

absl::StatusOr<nlohmann::json> ApplyConfig(const nlohmann::json& current,
                                           const nlohmann::json& config,
                                           const FieldManagerInfo& who, bool force) {
  if (who.manager.empty()) {
    return BadRequestError(
        "PATCH, application/apply-patch+yaml: fieldManager is required for "
        "apply requests");
  }
  bool status_only = who.subresource == "status";
  FieldSet config_fields = FieldsOf(config, status_only);
  std::vector<Entry> entries = ReadEntries(current);

  // Conflicts: another manager owns a field the config sets to a different value.
  std::vector<std::pair<size_t, FieldPath>> conflicts;
  Entry* own = nullptr;
  for (size_t i = 0; i < entries.size(); ++i) {
    Entry& entry = entries[i];
    if (entry.manager == who.manager && entry.operation == "Apply" &&
        entry.subresource == who.subresource) {
      own = &entry;
      continue;
    }
    for (const FieldPath& path : entry.fields) {
      if (config_fields.count(path) && !ValuesEqual(current, config, path)) {
        conflicts.emplace_back(i, path);
      }
    }
  }
  if (!conflicts.empty() && !force) {
    nlohmann::json causes = nlohmann::json::array();
    std::map<std::string, std::vector<std::string>> by_manager;
    for (const auto& [index, path] : conflicts) {
      std::string label = ManagerLabel(entries[index]);
      causes.push_back({{"reason", "FieldManagerConflict"},
                        {"message", absl::StrCat("conflict with ", label)},
                        {"field", PathString(path)}});
      by_manager[label].push_back(PathString(path));
    }
    std::string what;
    if (conflicts.size() == 1) {
      what = absl::StrCat("conflict with ", by_manager.begin()->first, ": ",
                          by_manager.begin()->second[0]);
    } else {
      std::vector<std::string> lines;
      for (const auto& [label, paths] : by_manager) {
        lines.push_back(absl::StrCat("conflicts with ", label, ":"));
        for (const std::string& path : paths) lines.push_back(absl::StrCat("- ", path));
      }
      what = absl::StrJoin(lines, "\n");
    }
    std::string message = absl::StrCat("Apply failed with ", conflicts.size(), " conflict",
                                       conflicts.size() == 1 ? "" : "s", ": ", what);
    return ApiError(FailureBody(409, "Conflict", message, {{"causes", causes}}));
  }

  nlohmann::json merged;
  if (current.is_null()) {
    merged = config;
  } else if (status_only) {
    merged = current;
    merged["status"] = DeepMerge(current.value("status", nlohmann::json::object()),
                                 config.value("status", nlohmann::json::object()));
  } else {
    merged = DeepMerge(current, config);
  }

  // Fields this manager applied before and no longer applies go away unless someone else owns
  // them.
  if (own != nullptr) {
    for (const FieldPath& path : own->fields) {
      if (config_fields.count(path)) continue;
      bool owned_elsewhere = false;
      for (const Entry& entry : entries) {
        if (&entry != own && entry.fields.count(path)) owned_elsewhere = true;
      }
      if (!owned_elsewhere) ErasePath(&merged, path);
    }
  }
  for (const auto& [index, path] : conflicts) entries[index].fields.erase(path);
  if (own == nullptr) {
    entries.push_back({who.manager, "Apply", who.subresource, who.api_version, who.time, {}});
    own = &entries.back();
  }
  own->fields = config_fields;
  own->time = who.time;
  own->api_version = who.api_version;
  if (!merged.contains("metadata") || !merged["metadata"].is_object()) {
    merged["metadata"] = nlohmann::json::object();
  }
  for (Entry& entry : entries) DropMissing(merged, &entry.fields);
  WriteEntries(entries, who.custom, &merged);
  return merged;
}

}  // namespace hptrain::testing
