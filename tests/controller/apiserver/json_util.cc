#include "tests/controller/apiserver/json_util.h"

#include <cstdlib>
#include <regex>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/controller/apiserver/api_status.h"
#include "yaml-cpp/yaml.h"

namespace hptrain::testing {
namespace {

nlohmann::json ScalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: always a string
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return nullptr;
  }
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  if (std::regex_match(text, kInt)) {
    errno = 0;
    long long value = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == 0) return value;
  }
  if (std::regex_match(text, kFloat)) return std::strtod(text.c_str(), nullptr);
  return text;
}

nlohmann::json NodeToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return ScalarToJson(node);
    case YAML::NodeType::Sequence: {
      nlohmann::json array = nlohmann::json::array();
      for (const YAML::Node& item : node) array.push_back(NodeToJson(item));
      return array;
    }
    case YAML::NodeType::Map: {
      nlohmann::json object = nlohmann::json::object();
      for (const auto& entry : node)
        object[entry.first.as<std::string>()] = NodeToJson(entry.second);
      return object;
    }
    default:
      return nullptr;
  }
}

}  // namespace

absl::StatusOr<PatchType> PatchTypeFromContentType(absl::string_view content_type) {
  std::string type = absl::AsciiStrToLower(
      absl::StripAsciiWhitespace(content_type.substr(0, content_type.find(';'))));
  if (type == "application/merge-patch+json") return PatchType::kMerge;
  if (type == "application/json-patch+json") return PatchType::kJson;
  if (type == "application/strategic-merge-patch+json") return PatchType::kStrategicMerge;
  if (type == "application/apply-patch+yaml" || type == "application/apply-patch+json") {
    return PatchType::kApply;
  }
  return UnsupportedMediaTypeError(content_type);
}

absl::StatusOr<nlohmann::json> ParseBody(absl::string_view body, absl::string_view content_type) {
  if (absl::StrContains(absl::AsciiStrToLower(content_type), "yaml")) return YamlToJson(body);
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return BadRequestError(absl::StrCat("the body of the request could not be decoded as JSON (",
                                        body.size(), " bytes)"));
  }
  return parsed;
}

absl::StatusOr<nlohmann::json> YamlToJson(absl::string_view text) {
  try {
    return NodeToJson(YAML::Load(std::string(text)));
  } catch (const YAML::Exception& e) {
    return BadRequestError(absl::StrCat("error converting YAML to JSON: ", e.what()));
  }
}

absl::StatusOr<std::vector<nlohmann::json>> YamlDocumentsToJson(absl::string_view text) {
  try {
    std::vector<nlohmann::json> documents;
    for (const YAML::Node& node : YAML::LoadAll(std::string(text))) {
      nlohmann::json document = NodeToJson(node);
      if (!document.is_null()) documents.push_back(std::move(document));
    }
    return documents;
  } catch (const YAML::Exception& e) {
    return BadRequestError(absl::StrCat("error converting YAML to JSON: ", e.what()));
  }
}

nlohmann::json ApplyMergePatch(const nlohmann::json& target, const nlohmann::json& patch) {
  nlohmann::json result = target;
  result.merge_patch(patch);
  return result;
}

absl::StatusOr<nlohmann::json> ApplyJsonPatch(const nlohmann::json& target,
                                              const nlohmann::json& patch) {
  if (!patch.is_array()) {
    return BadRequestError("a JSON patch must be an array of operations");
  }
  try {
    return target.patch(patch);
  } catch (const nlohmann::json::exception& e) {
    return ApiError(FailureBody(422, "Invalid",
                                absl::StrCat("the JSON patch could not be "
                                             "applied: ",
                                             e.what())));
  }
}

nlohmann::json DeepMerge(const nlohmann::json& base, const nlohmann::json& config) {
  if (!base.is_object() || !config.is_object()) return config;
  nlohmann::json result = base;
  for (const auto& [key, value] : config.items()) {
    result[key] = result.contains(key) ? DeepMerge(result[key], value) : value;
  }
  return result;
}

absl::StatusOr<std::vector<std::string>> ParseFieldPath(absl::string_view path) {
  if (path.size() < 2 || path[0] != '.' || absl::StrContains(path, "[")) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported field path \"", path, "\""));
  }
  std::vector<std::string> keys = absl::StrSplit(path.substr(1), '.');
  for (const std::string& key : keys) {
    if (key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("unsupported field path \"", path, "\""));
    }
  }
  return keys;
}

const nlohmann::json* FindPath(const nlohmann::json& object, const std::vector<std::string>& path) {
  const nlohmann::json* node = &object;
  for (const std::string& key : path) {
    if (!node->is_object()) return nullptr;
    auto it = node->find(key);
    if (it == node->end()) return nullptr;
    node = &*it;
  }
  return node;
}

void SetPath(nlohmann::json* object, const std::vector<std::string>& path, nlohmann::json value) {
  nlohmann::json* node = object;
  for (const std::string& key : path) {
    if (!node->is_object()) *node = nlohmann::json::object();
    node = &(*node)[key];
  }
  *node = std::move(value);
}

}  // namespace hptrain::testing
