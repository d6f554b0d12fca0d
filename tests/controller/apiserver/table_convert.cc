#include "tests/controller/apiserver/table_convert.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"
#include "controller/kube/timestamps.h"
#include "tests/controller/apiserver/json_util.h"

namespace hptrain::testing {
namespace {

// The value at a simple JSONPath (".a.b.c"); null when any step is missing or the path is not
// one.
nlohmann::json At(const nlohmann::json& object, const std::string& path) {
  absl::StatusOr<std::vector<std::string>> keys = ParseFieldPath(path);
  if (!keys.ok()) return nullptr;
  const nlohmann::json* found = FindPath(object, *keys);
  return found == nullptr ? nlohmann::json(nullptr) : *found;
}

// What jsonpath's PrintResults writes for a value: strings bare, others as JSON.
std::string Printed(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

nlohmann::json Cell(const std::string& type, const nlohmann::json& value, absl::Time now) {
  if (value.is_null()) return nullptr;
  if (type == "string") return Printed(value);
  if (type == "integer" && value.is_number()) {
    return value.is_number_float() ? nlohmann::json(static_cast<int64_t>(value.get<double>()))
                                   : value;
  }
  if (type == "number" && value.is_number()) return value.get<double>();
  if (type == "boolean" && value.is_boolean()) return value;
  if (type == "date" && value.is_string()) {
    absl::StatusOr<absl::Time> t = kube::ParseKubeTime(value.get<std::string>());
    return t.ok() ? HumanDuration(now - *t) : "<invalid>";
  }
  return nullptr;
}

}  // namespace

std::optional<std::string> AcceptedTableVersion(const std::string& accept) {
  for (absl::string_view media : absl::StrSplit(accept, ',')) {
    std::vector<std::string> params = absl::StrSplit(media, ';');
    bool table = false, meta_group = false;
    std::string version;
    for (std::string& p : params) {
      absl::StripAsciiWhitespace(&p);
      if (p == "as=Table") table = true;
      if (p == "g=meta.k8s.io") meta_group = true;
      if (absl::StartsWith(p, "v=")) version = p.substr(2);
    }
    if (table && meta_group && (version == "v1" || version == "v1beta1")) {
      return absl::StrCat("meta.k8s.io/", version);
    }
  }
  return std::nullopt;
}

nlohmann::json PrinterColumnsOf(const nlohmann::json& crd_version) {
  auto it = crd_version.find("additionalPrinterColumns");
  if (it != crd_version.end() && it->is_array() && !it->empty()) return *it;
  return nlohmann::json::array(
      {{{"name", "Age"}, {"type", "date"}, {"jsonPath", ".metadata.creationTimestamp"}}});
}

std::string HumanDuration(absl::Duration d) {
  const int64_t seconds = absl::ToInt64Seconds(d);
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return absl::StrCat(seconds, "s");
  const int64_t minutes = seconds / 60;
  if (minutes < 10) {
    return seconds % 60 == 0 ? absl::StrCat(minutes, "m")
                             : absl::StrCat(minutes, "m", seconds % 60, "s");
  }
  if (minutes < 180) return absl::StrCat(minutes, "m");
  const int64_t hours = minutes / 60;
  if (hours < 8) {
    return minutes % 60 == 0 ? absl::StrCat(hours, "h") : absl::StrCat(hours, "h", minutes % 60, "m");
  }
  if (hours < 48) return absl::StrCat(hours, "h");
  if (hours < 24 * 8) {
    return hours % 24 == 0 ? absl::StrCat(hours / 24, "d")
                           : absl::StrCat(hours / 24, "d", hours % 24, "h");
  }
  if (hours < 24 * 365 * 2) return absl::StrCat(hours / 24, "d");
  if (hours < 24 * 365 * 8) {
    const int64_t days = (hours / 24) % 365;
    return days == 0 ? absl::StrCat(hours / 24 / 365, "y")
                     : absl::StrCat(hours / 24 / 365, "y", days, "d");
  }
  return absl::StrCat(hours / 24 / 365, "y");
}

nlohmann::json ToTable(const ResourceType& type, const std::vector<nlohmann::json>& objects,
                       const TableOptions& options) {
  nlohmann::json columns = nlohmann::json::array();
  columns.push_back({{"name", "Name"},
                     {"type", "string"},
                     {"format", "name"},
                     {"description", "Name must be unique within a namespace."},
                     {"priority", 0}});
  for (const nlohmann::json& c : type.printer_columns) {
    const std::string path = c.value("jsonPath", "");
    columns.push_back(
        {{"name", c.value("name", "")},
         {"type", c.value("type", "string")},
         {"format", c.value("format", "")},
         {"description",
          c.value("description",
                  absl::StrCat("Custom resource definition column (in JSONPath format): ", path))},
         {"priority", c.value("priority", 0)}});
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const nlohmann::json& object : objects) {
    nlohmann::json cells = nlohmann::json::array({At(object, ".metadata.name")});
    for (const nlohmann::json& c : type.printer_columns) {
      cells.push_back(Cell(c.value("type", "string"), At(object, c.value("jsonPath", "")),
                           options.now));
    }
    nlohmann::json row = {{"cells", std::move(cells)}};
    if (options.include_object == "Object") {
      row["object"] = object;
    } else if (options.include_object != "None") {
      row["object"] = {{"kind", "PartialObjectMetadata"},
                       {"apiVersion", options.api_version},
                       {"metadata", object.value("metadata", nlohmann::json::object())}};
    }
    rows.push_back(std::move(row));
  }
  nlohmann::json metadata = {{"resourceVersion", options.resource_version}};
  if (!options.continue_token.empty()) metadata["continue"] = options.continue_token;
  return {{"kind", "Table"},
          {"apiVersion", options.api_version},
          {"metadata", std::move(metadata)},
          {"columnDefinitions", std::move(columns)},
          {"rows", std::move(rows)}};
}

}  // namespace hptrain::testing
