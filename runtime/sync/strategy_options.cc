#include "runtime/sync/strategy_options.h"

#include <cmath>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hptrain::sync {
namespace {

// The spec of `name` ("compression.bits" included) in strategy `type`'s descriptor, or null.
const ParamSpec* SpecOf(absl::string_view type, absl::string_view name) {
  const StrategyDescriptor* descriptor = FindStrategyDescriptor(type);
  if (descriptor == nullptr) return nullptr;
  std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
  const std::vector<ParamSpec>* params = &descriptor->params;
  const ParamSpec* found = nullptr;
  for (absl::string_view part : parts) {
    found = nullptr;
    for (const ParamSpec& p : *params) {
      if (p.name == part) found = &p;
    }
    if (found == nullptr) return nullptr;
    params = &found->fields;
  }
  return found;
}

}  // namespace

void StrategyOptions::Clear(absl::string_view name) {
  const std::string prefix = absl::StrCat(name, ".");
  for (auto it = values_.begin(); it != values_.end();) {
    if (it->first == name || absl::StartsWith(it->first, prefix)) {
      it = values_.erase(it);
    } else {
      ++it;
    }
  }
}

bool StrategyOptions::Has(absl::string_view name) const {
  if (values_.count(std::string(name)) > 0) return true;
  const std::string prefix = absl::StrCat(name, ".");
  auto it = values_.lower_bound(prefix);
  return it != values_.end() && absl::StartsWith(it->first, prefix);
}

const OptionValue* StrategyOptions::Find(absl::string_view name) const {
  auto it = values_.find(std::string(name));
  return it == values_.end() ? nullptr : &it->second;
}

const OptionValue* StrategyOptions::Resolve(absl::string_view name) const {
  if (const OptionValue* value = Find(name)) return value;
  const ParamSpec* spec = SpecOf(type, name);
  if (spec == nullptr || !spec->default_value.has_value()) return nullptr;
  return &*spec->default_value;
}

bool StrategyOptions::Bool(absl::string_view name) const {
  const OptionValue* value = Resolve(name);
  if (value == nullptr) return false;
  if (const bool* b = std::get_if<bool>(value)) return *b;
  return false;
}

int64_t StrategyOptions::Int(absl::string_view name) const {
  const OptionValue* value = Resolve(name);
  if (value == nullptr) return 0;
  if (const int64_t* i = std::get_if<int64_t>(value)) return *i;
  if (const double* d = std::get_if<double>(value)) return static_cast<int64_t>(*d);
  if (const std::string* s = std::get_if<std::string>(value)) {
    int64_t parsed = 0;
    return absl::SimpleAtoi(*s, &parsed) ? parsed : 0;
  }
  return 0;
}

double StrategyOptions::Number(absl::string_view name) const {
  const OptionValue* value = Resolve(name);
  if (value == nullptr) return 0;
  if (const double* d = std::get_if<double>(value)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(value)) return static_cast<double>(*i);
  return 0;
}

std::string StrategyOptions::String(absl::string_view name) const {
  const OptionValue* value = Resolve(name);
  return value == nullptr ? std::string() : FormatOptionValue(*value);
}

}  // namespace hptrain::sync
