#include "runtime/sync/strategy_descriptor.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hptrain::sync {

// Defined in strategy_descriptors.cc: the built-in descriptors, in documentation order.
std::vector<StrategyDescriptor> BuiltinStrategyDescriptors();

namespace {

std::vector<StrategyDescriptor>& Registry() {
  static auto* registry = new std::vector<StrategyDescriptor>(BuiltinStrategyDescriptors());
  return *registry;
}

}  // namespace

std::string FormatOptionValue(const OptionValue& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&value)) return absl::StrCat(*i);
  if (const double* d = std::get_if<double>(&value)) return absl::StrCat(*d);
  return std::get<std::string>(value);
}

const char* ParamTypeName(ParamType type) {
  switch (type) {
    case ParamType::kInteger:
      return "integer";
    case ParamType::kNumber:
      return "number";
    case ParamType::kBoolean:
      return "boolean";
    case ParamType::kEnum:
    case ParamType::kString:
      return "string";
    case ParamType::kIntegerOrString:
      return "integer-or-string";
    case ParamType::kObject:
      return "object";
  }
  return "?";
}

std::string ParamSpec::DefaultText() const {
  if (default_value.has_value()) return FormatOptionValue(*default_value);
  if (!default_doc.empty()) return default_doc;
  return required ? "required" : "unset";
}

const ParamSpec* StrategyDescriptor::Param(absl::string_view param) const {
  for (const ParamSpec& p : params) {
    if (p.name == param) return &p;
  }
  return nullptr;
}

std::vector<std::string> StrategyDescriptor::ParamNames() const {
  std::vector<std::string> names;
  for (const ParamSpec& p : params) names.push_back(p.name);
  return names;
}

const std::vector<StrategyDescriptor>& StrategyDescriptors() { return Registry(); }

const StrategyDescriptor* FindStrategyDescriptor(absl::string_view name) {
  for (const StrategyDescriptor& d : Registry()) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

StrategyTraits DeclaredTraits(absl::string_view name) {
  const StrategyDescriptor* d = FindStrategyDescriptor(name);
  return d != nullptr ? d->traits : StrategyTraits();
}

bool RegisterStrategyDescriptor(StrategyDescriptor descriptor) {
  if (FindStrategyDescriptor(descriptor.name) != nullptr) return false;
  Registry().push_back(std::move(descriptor));
  return true;
}

std::vector<const ParamSpec*> AllStrategyParams() {
  // The first declaration of each name: the catalogue's where a strategy takes it, so that the
  // order is the catalogue's (job-file and CRD order), then a strategy's own parameters.
  std::vector<const ParamSpec*> params;
  std::set<std::string> seen;
  for (const ParamSpec& p : ParamCatalogue()) {
    for (const StrategyDescriptor& d : Registry()) {
      const ParamSpec* taken = d.Param(p.name);
      if (taken == nullptr) continue;
      params.push_back(taken);
      seen.insert(p.name);
      break;
    }
  }
  for (const StrategyDescriptor& d : Registry()) {
    for (const ParamSpec& p : d.params) {
      if (seen.insert(p.name).second) params.push_back(&p);
    }
  }
  return params;
}

std::vector<std::string> StrategiesTaking(absl::string_view param) {
  std::vector<std::string> names;
  for (const StrategyDescriptor& d : Registry()) {
    if (d.Param(param) != nullptr) names.push_back(d.name);
  }
  return names;
}

std::vector<std::string> AllEnumValues(absl::string_view param) {
  std::vector<std::string> values;
  for (const StrategyDescriptor& d : Registry()) {
    const ParamSpec* p = d.Param(param);
    if (p == nullptr) continue;
    for (const std::string& v : p->enum_values) {
      if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
    }
  }
  return values;
}

ParamSpec CatalogueParam(absl::string_view name) {
  for (const ParamSpec& p : ParamCatalogue()) {
    if (p.name == name) return p;
  }
  return ParamSpec{std::string(name)};
}

}  // namespace hptrain::sync
