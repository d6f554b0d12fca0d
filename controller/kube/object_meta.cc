#include "controller/kube/object_meta.h"

#include "absl/strings/str_cat.h"

namespace hptrain::kube {
namespace {

const nlohmann::json* Metadata(const nlohmann::json& object) {
  if (!object.is_object()) return nullptr;
  auto it = object.find("metadata");
  if (it == object.end() || !it->is_object()) return nullptr;
  return &*it;
}

std::string MetaString(const nlohmann::json& object, const char* key) {
  const nlohmann::json* metadata = Metadata(object);
  if (metadata == nullptr) return "";
  auto it = metadata->find(key);
  if (it == metadata->end() || !it->is_string()) return "";
  return it->get<std::string>();
}

}  // namespace

std::string NameOf(const nlohmann::json& object) { return MetaString(object, "name"); }
std::string NamespaceOf(const nlohmann::json& object) { return MetaString(object, "namespace"); }
std::string ResourceVersionOf(const nlohmann::json& object) {
  return MetaString(object, "resourceVersion");
}
std::string UidOf(const nlohmann::json& object) { return MetaString(object, "uid"); }

std::map<std::string, std::string> LabelsOf(const nlohmann::json& object) {
  std::map<std::string, std::string> labels;
  const nlohmann::json* metadata = Metadata(object);
  if (metadata == nullptr) return labels;
  auto it = metadata->find("labels");
  if (it == metadata->end() || !it->is_object()) return labels;
  for (auto label = it->begin(); label != it->end(); ++label) {
    if (label->is_string()) labels.emplace(label.key(), label->get<std::string>());
  }
  return labels;
}

bool IsBeingDeleted(const nlohmann::json& object) {
  return !MetaString(object, "deletionTimestamp").empty();
}

std::string ObjectKey(absl::string_view ns, absl::string_view name) {
  if (ns.empty()) return std::string(name);
  return absl::StrCat(ns, "/", name);
}

std::string KeyOf(const nlohmann::json& object) {
  return ObjectKey(NamespaceOf(object), NameOf(object));
}

void SplitKey(absl::string_view key, std::string* ns, std::string* name) {
  size_t slash = key.find('/');
  if (slash == absl::string_view::npos) {
    ns->clear();
    *name = std::string(key);
    return;
  }
  *ns = std::string(key.substr(0, slash));
  *name = std::string(key.substr(slash + 1));
}

}  // namespace hptrain::kube
