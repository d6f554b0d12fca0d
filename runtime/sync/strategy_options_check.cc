#include "runtime/sync/strategy_options_check.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace hptrain::sync {
namespace {

template <typename... Args>
absl::Status Invalid(absl::string_view path, const Args&... reason) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", reason...));
}

bool Contains(const std::vector<std::string>& list, absl::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

std::string Quoted(const OptionValue& value) {
  if (std::holds_alternative<std::string>(value)) {
    return absl::StrCat("\"", std::get<std::string>(value), "\"");
  }
  return FormatOptionValue(value);
}

bool InRange(const ParamRange& r, double v) {
  if (r.min.has_value() && (r.min_exclusive ? v <= *r.min : v < *r.min)) return false;
  if (r.max.has_value() && (r.max_exclusive ? v >= *r.max : v > *r.max)) return false;
  return true;
}

// Words of parameter `name` that other strategies take, for "adaptive applies only to ...".
std::vector<std::string> StrategiesWithWord(absl::string_view name, absl::string_view word) {
  std::vector<std::string> names;
  for (const StrategyDescriptor& d : StrategyDescriptors()) {
    const ParamSpec* p = d.Param(name);
    if (p != nullptr && Contains(p->words, word)) names.push_back(d.name);
  }
  return names;
}

absl::Status CheckNumber(const ParamSpec& p, const std::string& path, double v) {
  if (std::isnan(v)) return Invalid(path, "must be a number");
  if (InRange(p.range, v)) return absl::OkStatus();
  return Invalid(path, "must be ", DescribeRange(p.range, p.type), ", got ", v);
}

absl::Status CheckValue(const ParamSpec& p, const std::string& path, const OptionValue& value,
                        absl::string_view type) {
  const bool is_int = std::holds_alternative<int64_t>(value);
  const bool is_double = std::holds_alternative<double>(value);
  const bool is_string = std::holds_alternative<std::string>(value);
  switch (p.type) {
    case ParamType::kBoolean:
      if (!std::holds_alternative<bool>(value)) {
        return Invalid(path, "must be true or false, got ", Quoted(value));
      }
      return absl::OkStatus();
    case ParamType::kNumber:
      if (!is_int && !is_double) return Invalid(path, "must be a number, got ", Quoted(value));
      return CheckNumber(p, path, is_int ? static_cast<double>(std::get<int64_t>(value))
                                         : std::get<double>(value));
    case ParamType::kInteger:
      if (!is_int) return Invalid(path, "must be an integer, got ", Quoted(value));
      if (!p.enum_values.empty()) {
        if (Contains(p.enum_values, FormatOptionValue(value))) return absl::OkStatus();
        return Invalid(path, "must be ", JoinOr(p.enum_values), ", got ",
                       FormatOptionValue(value));
      }
      if (!InRange(p.range, static_cast<double>(std::get<int64_t>(value)))) {
        return Invalid(path, "must be ", DescribeRange(p.range, p.type), ", got ",
                       std::get<int64_t>(value));
      }
      return absl::OkStatus();
    case ParamType::kEnum:
    case ParamType::kString: {
      if (!is_string) return Invalid(path, "must be a string, got ", Quoted(value));
      const std::string& s = std::get<std::string>(value);
      if (p.type == ParamType::kString || Contains(p.enum_values, s)) return absl::OkStatus();
      const std::string allowed = absl::StrJoin(p.enum_values, ", ");
      if (s.empty()) return Invalid(path, "required (one of ", allowed, ")");
      return Invalid(path, "unknown ", p.enum_noun, " \"", s, "\" (expected one of ", allowed,
                     ")");
    }
    case ParamType::kIntegerOrString: {
      if (!is_int && !is_string) return Invalid(path, "must be an integer, got ", Quoted(value));
      const std::string text = FormatOptionValue(value);
      if (!p.enum_values.empty()) {
        if (Contains(p.enum_values, text)) return absl::OkStatus();
        // A value another strategy takes (quantized's 1 bit, not hps's) says what this one takes.
        const std::vector<std::string> all = AllEnumValues(p.name);
        if (Contains(all, text)) {
          return Invalid(path, "strategy ", type, " takes ", JoinOr(p.enum_values), ", got \"",
                         text, "\"");
        }
        return Invalid(path, "must be one of ", absl::StrJoin(all, ", "), ", got \"", text, "\"");
      }
      if (is_string) {
        if (Contains(p.words, text)) return absl::OkStatus();
        std::vector<std::string> takers = StrategiesWithWord(p.name, text);
        if (!takers.empty()) {
          return Invalid(path, text, " applies only to strategy ", absl::StrJoin(takers, ", "),
                         ", got ", type, " (use an integer)");
        }
        return Invalid(path, "must be an integer, got \"", text, "\"");
      }
      if (!p.range.empty() && !InRange(p.range, static_cast<double>(std::get<int64_t>(value)))) {
        return Invalid(path, "must be ", DescribeRange(p.range, ParamType::kInteger), ", got ",
                       std::get<int64_t>(value));
      }
      return absl::OkStatus();
    }
    case ParamType::kObject:
      return Invalid(path, "must be a map");
  }
  return absl::OkStatus();
}

}  // namespace

std::string JoinOr(const std::vector<std::string>& values) {
  if (values.size() < 2) return absl::StrJoin(values, "");
  return absl::StrCat(
      absl::StrJoin(std::vector<std::string>(values.begin(), values.end() - 1), ", "), " or ",
      values.back());
}

std::string DescribeRange(const ParamRange& r, ParamType type) {
  if (r.min.has_value() && r.max.has_value()) {
    if (type == ParamType::kInteger && !r.min_exclusive && !r.max_exclusive) {
      return absl::StrCat("between ", *r.min, " and ", *r.max);
    }
    return absl::StrCat("in ", r.min_exclusive ? "(" : "[", *r.min, ", ", *r.max,
                        r.max_exclusive ? ")" : "]");
  }
  if (r.min.has_value()) return absl::StrCat(r.min_exclusive ? "> " : ">= ", *r.min);
  if (r.max.has_value()) return absl::StrCat(r.max_exclusive ? "< " : "<= ", *r.max);
  return "any";
}

absl::Status CheckStrategyOptions(const StrategyOptions& options, absl::string_view path) {
  const StrategyDescriptor* d = FindStrategyDescriptor(options.type);
  if (d == nullptr) {
    return Invalid(absl::StrCat(path, ".type"), "unknown strategy \"", options.type, "\"");
  }
  const std::vector<const ParamSpec*> all = AllStrategyParams();
  for (const auto& [name, value] : options.values()) {
    const std::string top(absl::string_view(name).substr(0, name.find('.')));
    const bool known = std::any_of(all.begin(), all.end(),
                                   [&](const ParamSpec* p) { return p->name == top; });
    if (!known) return Invalid(absl::StrCat(path, ".", name), "unknown field");
  }
  for (const ParamSpec* p : all) {
    if (!options.Has(p->name) || d->Param(p->name) != nullptr) continue;
    const std::vector<std::string> takes = d->ParamNames();
    return Invalid(absl::StrCat(path, ".", p->name), "does not apply to strategy ", d->name, " (",
                   d->name, " takes ", takes.empty() ? "no parameters" : absl::StrJoin(takes, ", "),
                   ")");
  }
  for (const ParamSpec* general : all) {
    const ParamSpec* p = d->Param(general->name);
    if (p == nullptr || !options.Has(p->name)) continue;
    const std::string field = absl::StrCat(path, ".", p->name);
    if (p->type != ParamType::kObject) {
      if (const OptionValue* value = options.Find(p->name)) {
        absl::Status status = CheckValue(*p, field, *value, d->name);
        if (!status.ok()) return status;
      } else {
        return Invalid(field, "must be a ", ParamTypeName(p->type), ", got a map");
      }
      continue;
    }
    if (options.Find(p->name) != nullptr) return Invalid(field, "must be a map");
    for (const auto& [name, value] : options.values()) {
      if (name.rfind(p->name + ".", 0) != 0) continue;
      const std::string sub = name.substr(p->name.size() + 1);
      const ParamSpec* f = nullptr;
      for (const ParamSpec& candidate : p->fields) {
        if (candidate.name == sub) f = &candidate;
      }
      if (f == nullptr) return Invalid(absl::StrCat(path, ".", name), "unknown field");
    }
    for (const ParamSpec& f : p->fields) {
      const OptionValue* value = options.Find(absl::StrCat(p->name, ".", f.name));
      if (value == nullptr) continue;
      absl::Status status = CheckValue(f, absl::StrCat(field, ".", f.name), *value, d->name);
      if (!status.ok()) return status;
    }
  }
  if (d->validate) return d->validate(options, path);
  return absl::OkStatus();
}

}  // namespace hptrain::sync
