#include "tests/controller/apiserver/openapi_schema.h"

#include <cmath>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hptrain::testing {
namespace {

bool IsTopLevelMeta(const std::string& path, const std::string& key) {
  return path.empty() && (key == "apiVersion" || key == "kind" || key == "metadata");
}

std::string Child(const std::string& path, const std::string& key) {
  return path.empty() ? key : absl::StrCat(path, ".", key);
}

bool PreservesUnknown(const nlohmann::json& schema) {
  return schema.value("x-kubernetes-preserve-unknown-fields", false);
}

// How the real server prints a value in "Invalid value: X" (Go's %v / %q).
std::string ShowValue(const nlohmann::json& value) {
  if (value.is_string()) return nlohmann::json(value).dump();
  if (value.is_object()) return "\"object\"";
  if (value.is_array()) return "\"array\"";
  return value.dump();
}

std::string TypeName(const nlohmann::json& value) {
  if (value.is_string()) return "string";
  if (value.is_boolean()) return "boolean";
  if (value.is_number_integer() || value.is_number_unsigned()) return "integer";
  if (value.is_number()) return "number";
  if (value.is_object()) return "object";
  if (value.is_array()) return "array";
  return "null";
}

bool HasType(const nlohmann::json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "boolean") return value.is_boolean();
  if (type == "number") return value.is_number();
  if (type == "integer") {
    if (value.is_number_integer() || value.is_number_unsigned()) return true;
    if (value.is_number_float()) {
      double d = value.get<double>();
      return std::floor(d) == d;
    }
    return false;
  }
  return true;
}

void Invalid(std::vector<Cause>* causes, const std::string& path, const nlohmann::json& value,
             const std::string& what) {
  causes->push_back(
      {"FieldValueInvalid",
       absl::StrCat("Invalid value: ", ShowValue(value), ": ", path, " in body ", what), path});
}

void Validate(const nlohmann::json& schema, const nlohmann::json& value, const std::string& path,
              std::vector<Cause>* causes) {
  if (!schema.is_object()) return;
  if (value.is_null()) {
    if (!schema.value("nullable", false) && schema.contains("type")) {
      causes->push_back(
          {"FieldValueTypeInvalid",
           absl::StrCat("Invalid value: \"null\": ", path, " in body must be of type ",
                        schema["type"].get<std::string>(), ": \"null\""),
           path});
    }
    return;
  }
  if (schema.value("x-kubernetes-int-or-string", false)) {
    if (!value.is_string() && !HasType(value, "integer")) {
      causes->push_back(
          {"FieldValueTypeInvalid",
           absl::StrCat("Invalid value: \"", TypeName(value), "\": ", path,
                        " in body must be of type integer,string: \"", TypeName(value), "\""),
           path});
    }
    return;
  }
  if (schema.contains("type") && schema["type"].is_string()) {
    std::string type = schema["type"];
    if (!HasType(value, type)) {
      causes->push_back(
          {"FieldValueTypeInvalid",
           absl::StrCat("Invalid value: \"", TypeName(value), "\": ", path,
                        " in body must be of type ", type, ": \"", TypeName(value), "\""),
           path});
      return;
    }
  }
  if (schema.contains("enum") && schema["enum"].is_array()) {
    bool found = false;
    std::vector<std::string> shown;
    for (const nlohmann::json& allowed : schema["enum"]) {
      if (allowed == value) found = true;
      shown.push_back(allowed.dump());
    }
    if (!found) {
      causes->push_back({"FieldValueNotSupported",
                         absl::StrCat("Unsupported value: ", ShowValue(value),
                                      ": supported values: ", absl::StrJoin(shown, ", ")),
                         path});
    }
  }
  if (value.is_number()) {
    double v = value.get<double>();
    if (schema.contains("minimum")) {
      double min = schema["minimum"].get<double>();
      bool exclusive = schema.value("exclusiveMinimum", false);
      if (exclusive ? v <= min : v < min) {
        Invalid(causes, path, value,
                absl::StrCat("should be greater than ", exclusive ? "" : "or equal to ",
                             schema["minimum"].dump()));
      }
    }
    if (schema.contains("maximum")) {
      double max = schema["maximum"].get<double>();
      bool exclusive = schema.value("exclusiveMaximum", false);
      if (exclusive ? v >= max : v > max) {
        Invalid(causes, path, value,
                absl::StrCat("should be less than ", exclusive ? "" : "or equal to ",
                             schema["maximum"].dump()));
      }
    }
  }
  if (value.is_string()) {
    size_t length = value.get<std::string>().size();
    if (schema.contains("minLength") && length < schema["minLength"].get<size_t>()) {
      Invalid(causes, path, value,
              absl::StrCat("should be at least ", schema["minLength"].dump(), " chars long"));
    }
    if (schema.contains("maxLength") && length > schema["maxLength"].get<size_t>()) {
      Invalid(causes, path, value,
              absl::StrCat("should be at most ", schema["maxLength"].dump(), " chars long"));
    }
    if (schema.contains("pattern") && schema["pattern"].is_string()) {
      std::string pattern = schema["pattern"];
      try {
        if (!std::regex_search(value.get<std::string>(), std::regex(pattern))) {
          Invalid(causes, path, value, absl::StrCat("should match '", pattern, "'"));
        }
      } catch (const std::regex_error&) {
        // A pattern std::regex cannot compile is not checked.
      }
    }
  }
  if (value.is_array()) {
    size_t size = value.size();
    if (schema.contains("minItems") && size < schema["minItems"].get<size_t>()) {
      Invalid(causes, path, nlohmann::json(size),
              absl::StrCat("should have at least ", schema["minItems"].dump(), " items"));
    }
    if (schema.contains("maxItems") && size > schema["maxItems"].get<size_t>()) {
      causes->push_back({"FieldValueTooMany",
                         absl::StrCat("Too many: ", size, ": must have at most ",
                                      schema["maxItems"].dump(), " items"),
                         path});
    }
    if (schema.contains("items")) {
      for (size_t i = 0; i < size; ++i) {
        Validate(schema["items"], value[i], absl::StrCat(path, "[", i, "]"), causes);
      }
    }
  }
  if (value.is_object()) {
    for (const nlohmann::json& required : schema.value("required", nlohmann::json::array())) {
      std::string key = required.get<std::string>();
      if (!value.contains(key)) {
        causes->push_back({"FieldValueRequired", "Required value", Child(path, key)});
      }
    }
    const nlohmann::json properties = schema.value("properties", nlohmann::json::object());
    for (const auto& [key, child] : value.items()) {
      if (IsTopLevelMeta(path, key)) continue;
      if (properties.contains(key)) {
        Validate(properties[key], child, Child(path, key), causes);
      } else if (schema.contains("additionalProperties") &&
                 schema["additionalProperties"].is_object()) {
        Validate(schema["additionalProperties"], child, Child(path, key), causes);
      }
    }
  }
}

void Prune(const nlohmann::json& schema, nlohmann::json* value, const std::string& path) {
  if (!schema.is_object()) return;
  if (value->is_array() && schema.contains("items")) {
    for (nlohmann::json& item : *value) Prune(schema["items"], &item, absl::StrCat(path, "[]"));
    return;
  }
  if (!value->is_object()) return;
  const nlohmann::json properties = schema.value("properties", nlohmann::json::object());
  const nlohmann::json* additional =
      schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
  bool keep_unknown =
      PreservesUnknown(schema) ||
      (additional != nullptr && additional->is_boolean() && additional->get<bool>());
  for (auto it = value->begin(); it != value->end();) {
    const std::string key = it.key();
    if (IsTopLevelMeta(path, key)) {
      ++it;
      continue;
    }
    const nlohmann::json* child_schema = nullptr;
    if (properties.contains(key)) {
      child_schema = &properties[key];
    } else if (additional != nullptr && additional->is_object()) {
      child_schema = additional;
    }
    if (child_schema == nullptr && !keep_unknown) {
      it = value->erase(it);
      continue;
    }
    if (child_schema != nullptr && it->is_null() && !child_schema->value("nullable", false)) {
      it = value->erase(it);
      continue;
    }
    if (child_schema != nullptr) Prune(*child_schema, &*it, Child(path, key));
    ++it;
  }
  for (const auto& [key, child_schema] : properties.items()) {
    if (!value->contains(key) && child_schema.contains("default")) {
      (*value)[key] = child_schema["default"];
    }
  }
}

}  // namespace

void PruneAndDefault(const nlohmann::json& schema, nlohmann::json* object) {
  Prune(schema, object, "");
}

std::vector<Cause> ValidateAgainstSchema(const nlohmann::json& schema,
                                         const nlohmann::json& object) {
  std::vector<Cause> causes;
  Validate(schema, object, "", &causes);
  return causes;
}

}  // namespace hptrain::testing
