#include "runtime/cli/strategy_docs.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "runtime/sync/strategy_descriptor.h"
#include "runtime/sync/strategy_options_check.h"

namespace hptrain::cli {

// The CRD without spec.strategy (generated into crd_template.cc at build time).
extern const char kCrdTemplate[];

namespace {

using sync::ParamSpec;
using sync::ParamType;
using sync::JoinOr;
using sync::StrategyDescriptor;

constexpr char kSchemaMarker[] = "__HPTRAIN_STRATEGY_SCHEMA__";

// "a", "a and b", "a, b and c".
std::string JoinAnd(const std::vector<std::string>& items) {
  if (items.size() < 2) return absl::StrJoin(items, "");
  return absl::StrCat(
      absl::StrJoin(std::vector<std::string>(items.begin(), items.end() - 1), ", "), " and ",
      items.back());
}

// How a parameter's allowed values read: "in (0, 1]", "0 or 1", "pairs or compact".
std::string RangeText(const ParamSpec& p) {
  if (!p.range_doc.empty()) return p.range_doc;
  switch (p.type) {
    case ParamType::kEnum:
      return JoinOr(p.enum_values);
    case ParamType::kInteger:
      if (!p.enum_values.empty()) return JoinOr(p.enum_values);
      return p.range.empty() ? "" : sync::DescribeRange(p.range, p.type);
    case ParamType::kNumber:
      return p.range.empty() ? "" : sync::DescribeRange(p.range, p.type);
    case ParamType::kIntegerOrString: {
      if (!p.enum_values.empty()) return JoinOr(p.enum_values);
      std::vector<std::string> forms;
      if (!p.range.empty()) forms.push_back(sync::DescribeRange(p.range, ParamType::kInteger));
      for (const std::string& w : p.words) forms.push_back(w);
      return JoinOr(forms);
    }
    default:
      return "";
  }
}

std::string DevicesText(const StrategyDescriptor& d) {
  std::string text = "cpu, cuda (gloo)";
  if (d.devices.nccl) {
    absl::StrAppend(&text, "; cuda (nccl");
    if (!d.devices.host_only_param.empty()) {
      absl::StrAppend(&text, ", not with ", d.devices.host_only_param, ": ",
                      d.devices.host_only_value);
    }
    absl::StrAppend(&text, ")");
  }
  return text;
}

// --- JSON --------------------------------------------------------------------------------------

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string JsonValue(const sync::OptionValue& value) {
  if (std::holds_alternative<std::string>(value)) return JsonString(std::get<std::string>(value));
  return sync::FormatOptionValue(value);
}

std::string JsonList(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const std::string& item : items) quoted.push_back(JsonString(item));
  return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
}

std::string ParamJson(const ParamSpec& p) {
  std::string range = "null";
  if (!p.range.empty()) {
    range = absl::StrCat(
        "{\"min\": ", p.range.min ? absl::StrCat(*p.range.min) : "null",
        ", \"max\": ", p.range.max ? absl::StrCat(*p.range.max) : "null",
        ", \"minExclusive\": ", p.range.min_exclusive ? "true" : "false",
        ", \"maxExclusive\": ", p.range.max_exclusive ? "true" : "false", "}");
  }
  std::vector<std::string> fields;
  for (const ParamSpec& f : p.fields) fields.push_back(ParamJson(f));
  return absl::StrCat(
      "{\"name\": ", JsonString(p.name), ", \"type\": ", JsonString(sync::ParamTypeName(p.type)),
      ", \"doc\": ", JsonString(p.doc),
      ", \"default\": ", p.default_value ? JsonValue(*p.default_value) : "null",
      ", \"defaultDoc\": ", JsonString(p.DefaultText()),
      ", \"required\": ", p.required ? "true" : "false", ", \"range\": ", range,
      ", \"rangeDoc\": ", JsonString(RangeText(p)), ", \"enum\": ", JsonList(p.enum_values),
      ", \"words\": ", JsonList(p.words), ", \"fields\": [", absl::StrJoin(fields, ", "), "]}");
}

// --- YAML (the CRD) ----------------------------------------------------------------------------

std::string SingleQuoted(absl::string_view text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "''"}}), "'");
}

std::string DoubleQuoted(absl::string_view text) {
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\"");
}

class Yaml {
 public:
  explicit Yaml(int indent) : indent_(indent) {}
  void Line(int depth, absl::string_view text) {
    absl::StrAppend(&out_, std::string(indent_ + 2 * depth, ' '), text, "\n");
  }
  void Rules(int depth, const std::vector<sync::CelRule>& rules) {
    if (rules.empty()) return;
    Line(depth, "x-kubernetes-validations:");
    for (const sync::CelRule& r : rules) {
      Line(depth + 1, absl::StrCat("- rule: ", DoubleQuoted(r.rule)));
      Line(depth + 2, absl::StrCat("message: ", SingleQuoted(r.message)));
      if (!r.field_path.empty()) Line(depth + 2, absl::StrCat("fieldPath: ", r.field_path));
    }
  }
  std::string Take() { return std::move(out_); }

 private:
  const int indent_;
  std::string out_;
};

// The bounds every strategy taking a parameter accepts: the loosest of theirs.
sync::ParamRange UnionRange(const std::vector<const ParamSpec*>& specs) {
  sync::ParamRange r = specs.front()->range;
  for (const ParamSpec* p : specs) {
    if (!p->range.min.has_value() || (r.min && *p->range.min < *r.min)) r.min = p->range.min;
    if (!p->range.max.has_value() || (r.max && *p->range.max > *r.max)) r.max = p->range.max;
    r.min_exclusive = r.min_exclusive && p->range.min_exclusive;
    r.max_exclusive = r.max_exclusive && p->range.max_exclusive;
  }
  return r;
}

std::vector<std::string> Quote(const std::vector<std::string>& names) {
  std::vector<std::string> quoted;
  for (const std::string& n : names) quoted.push_back(absl::StrCat("'", n, "'"));
  return quoted;
}

// One property: its type keywords, description and value rules.
void EmitProperty(Yaml* y, int depth, const std::vector<const ParamSpec*>& specs,
                  const std::string& description) {
  const ParamSpec& p = *specs.front();
  y->Line(depth, absl::StrCat(p.name, ":"));
  const int d = depth + 1;
  switch (p.type) {
    case ParamType::kIntegerOrString:
      y->Line(d, absl::StrCat("description: ", SingleQuoted(description)));
      y->Line(d, "x-kubernetes-int-or-string: true");
      y->Line(d, "anyOf:");
      y->Line(d + 1, "- type: integer");
      y->Line(d + 1, "- type: string");
      if (!p.enum_values.empty()) {
        const std::vector<std::string> values = sync::AllEnumValues(p.name);
        std::vector<sync::CelRule> rules = {
            {absl::StrCat("string(self) in [", absl::StrJoin(Quote(values), ", "), "]"),
             absl::StrCat("must be one of ", absl::StrJoin(values, ", ")), ""}};
        rules.insert(rules.end(), p.cel.begin(), p.cel.end());
        y->Rules(d, rules);
      } else {
        y->Rules(d, p.cel);
      }
      return;
    case ParamType::kObject: {
      y->Line(d, "type: object");
      y->Line(d, absl::StrCat("description: ", SingleQuoted(description)));
      y->Rules(d, p.cel);
      y->Line(d, "properties:");
      for (const ParamSpec& f : p.fields) {
        std::string doc = absl::StrCat(f.doc, ".");
        const std::string range = RangeText(f);
        if (!range.empty()) absl::StrAppend(&doc, " One of ", range, ".");
        absl::StrAppend(&doc, " Default: ", f.DefaultText(), ".");
        EmitProperty(y, d + 1, {&f}, doc);
      }
      return;
    }
    case ParamType::kBoolean:
      y->Line(d, "type: boolean");
      break;
    case ParamType::kEnum:
      y->Line(d, "type: string");
      y->Line(d, absl::StrCat("enum: [", absl::StrJoin(p.enum_values, ", "), "]"));
      break;
    case ParamType::kString:
      y->Line(d, "type: string");
      break;
    case ParamType::kInteger:
    case ParamType::kNumber: {
      y->Line(d, p.type == ParamType::kInteger ? "type: integer" : "type: number");
      sync::ParamRange r = UnionRange(specs);
      if (!p.enum_values.empty()) {
        // Consecutive integers are a range (staleness: 0 or 1), others an enum.
        std::vector<int64_t> values;
        for (const std::string& v : p.enum_values) values.push_back(std::stoll(v));
        bool consecutive = true;
        for (size_t i = 1; i < values.size(); ++i) consecutive &= values[i] == values[i - 1] + 1;
        if (!consecutive) {
          y->Line(d, absl::StrCat("enum: [", absl::StrJoin(p.enum_values, ", "), "]"));
          break;
        }
        r = sync::ParamRange{};
        r.min = static_cast<double>(values.front());
        r.max = static_cast<double>(values.back());
      }
      if (r.min) {
        y->Line(d, absl::StrCat("minimum: ", *r.min));
        if (r.min_exclusive) y->Line(d, "exclusiveMinimum: true");
      }
      if (r.max) {
        y->Line(d, absl::StrCat("maximum: ", *r.max));
        if (r.max_exclusive) y->Line(d, "exclusiveMaximum: true");
      }
      break;
    }
  }
  y->Line(d, absl::StrCat("description: ", SingleQuoted(description)));
  y->Rules(d, p.cel);
}

// `self.type == 'a'` or `self.type in ['a', 'b']`.
std::string TypeIn(const std::vector<std::string>& names) {
  if (names.size() == 1) return absl::StrCat("self.type == '", names.front(), "'");
  return absl::StrCat("self.type in [", absl::StrJoin(Quote(names), ", "), "]");
}

std::string StrategyWord(const std::vector<std::string>& names) {
  return absl::StrCat(names.size() == 1 ? "strategy " : "strategies ", JoinAnd(names));
}

// The description of a property several strategies may share: who takes it, what it is, its
// values and each strategy's default.
std::string Describe(const std::vector<const ParamSpec*>& specs,
                     const std::vector<std::string>& takers) {
  const ParamSpec& p = *specs.front();
  std::string text = absl::StrCat(absl::StrJoin(takers, ", "), ": ", p.doc, ".");
  std::vector<std::string> ranges;
  std::vector<std::string> defaults;
  bool same_default = true;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string range = RangeText(*specs[i]);
    if (!range.empty() && std::find(ranges.begin(), ranges.end(), range) == ranges.end()) {
      ranges.push_back(range);
    }
    defaults.push_back(absl::StrCat(takers[i], " ", specs[i]->DefaultText()));
    if (specs[i]->DefaultText() != p.DefaultText()) same_default = false;
  }
  if (ranges.size() == 1) absl::StrAppend(&text, " ", ranges.front(), ".");
  if (ranges.size() > 1) {
    std::vector<std::string> each;
    for (size_t i = 0; i < specs.size(); ++i) {
      const std::string range = RangeText(*specs[i]);
      if (!range.empty()) each.push_back(absl::StrCat(takers[i], " ", range));
    }
    absl::StrAppend(&text, " ", absl::StrJoin(each, "; "), ".");
  }
  if (p.type == ParamType::kObject) return text;
  absl::StrAppend(&text, same_default ? absl::StrCat(" Default: ", p.DefaultText(), ".")
                                      : absl::StrCat(" Default: ", absl::StrJoin(defaults, ", "),
                                                     "."));
  return text;
}

}  // namespace

std::string StrategiesTable() {
  std::vector<std::vector<std::string>> rows = {
      {"STRATEGY", "PARAMETER", "TYPE", "DEFAULT", "RANGE", "DEVICES"}};
  for (const StrategyDescriptor& d : sync::StrategyDescriptors()) {
    if (d.params.empty()) rows.push_back({d.name, "-", "", "", "", DevicesText(d)});
    for (size_t i = 0; i < d.params.size(); ++i) {
      const ParamSpec& p = d.params[i];
      rows.push_back({i == 0 ? d.name : "", p.name, sync::ParamTypeName(p.type),
                      p.type == ParamType::kObject ? "" : p.DefaultText(), RangeText(p),
                      i == 0 ? DevicesText(d) : ""});
      for (const ParamSpec& f : p.fields) {
        rows.push_back({"", absl::StrCat(p.name, ".", f.name), sync::ParamTypeName(f.type),
                        f.DefaultText(), RangeText(f), ""});
      }
    }
  }
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&line, row[c]);
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string StrategiesJson() {
  std::vector<std::string> strategies;
  for (const StrategyDescriptor& d : sync::StrategyDescriptors()) {
    std::vector<std::string> params;
    for (const ParamSpec& p : d.params) params.push_back(ParamJson(p));
    std::vector<std::string> devices = {"cpu/gloo", "cuda/gloo"};
    if (d.devices.nccl) devices.push_back("cuda/nccl");
    strategies.push_back(absl::StrCat(
        "{\"name\": ", JsonString(d.name), ", \"doc\": ", JsonString(d.doc),
        ", \"usesParameterServer\": ", d.traits.uses_parameter_server ? "true" : "false",
        ", \"devices\": ", JsonList(devices), ", \"ncclHostOnly\": ",
        d.devices.host_only_param.empty()
            ? std::string("null")
            : absl::StrCat("{", JsonString(d.devices.host_only_param), ": ",
                           JsonString(d.devices.host_only_value), "}"),
        ", \"parameters\": [", absl::StrJoin(params, ", "), "]}"));
  }
  return absl::StrCat("{\"strategies\": [\n  ", absl::StrJoin(strategies, ",\n  "), "\n]}\n");
}

std::string StrategiesMarkdown() {
  std::string out =
      "| `type` | what it does | parameters (defaults; values) | runs on |\n|---|---|---|---|\n";
  for (const StrategyDescriptor& d : sync::StrategyDescriptors()) {
    std::vector<std::string> params;
    for (const ParamSpec& p : d.params) {
      std::vector<std::string> notes;
      if (p.type == ParamType::kObject) {
        std::vector<std::string> fields;
        for (const ParamSpec& f : p.fields) {
          fields.push_back(absl::StrCat("`", f.name, "` (", f.DefaultText(), "; ", RangeText(f),
                                        ")"));
        }
        notes.push_back(absl::StrJoin(fields, ", "));
      } else {
        notes.push_back(p.DefaultText());
        const std::string range = RangeText(p);
        if (!range.empty()) notes.push_back(range);
      }
      params.push_back(absl::StrCat("`", p.name, "` (", absl::StrJoin(notes, "; "), ")"));
    }
    absl::StrAppend(&out, "| `", d.name, "` | ", d.doc, " | ",
                    params.empty() ? "—" : absl::StrJoin(params, ", "), " | ", DevicesText(d),
                    " |\n");
  }
  return out;
}

std::string StrategySchemaYaml(int indent) {
  Yaml y(indent);
  y.Line(0, "strategy:");
  y.Line(1, "type: object");
  y.Line(1, "description: >-");
  y.Line(2, "How workers exchange gradients or models. Each parameter applies only to the");
  y.Line(2, "strategies named in its description; a parameter set for another strategy is");
  y.Line(2, "an error. Generated from the strategy descriptors (`hptrain strategies`).");
  std::vector<sync::CelRule> rules;
  const std::vector<const ParamSpec*> all = sync::AllStrategyParams();
  for (const ParamSpec* p : all) {
    const std::vector<std::string> takers = sync::StrategiesTaking(p->name);
    rules.push_back({absl::StrCat("!has(self.", p->name, ") || (has(self.type) && ",
                                  TypeIn(takers), ")"),
                     absl::StrCat("spec.strategy.", p->name, " applies only to ",
                                  StrategyWord(takers)),
                     absl::StrCat(".", p->name)});
    // A strategy that takes fewer of the parameter's values than the others (hps's bits).
    const std::vector<std::string> values = sync::AllEnumValues(p->name);
    for (const std::string& name : takers) {
      const ParamSpec* own = sync::FindStrategyDescriptor(name)->Param(p->name);
      if (own->enum_values.empty() || own->enum_values == values) continue;
      const bool text = p->type != ParamType::kInteger;
      rules.push_back(
          {absl::StrCat("!has(self.type) || self.type != '", name, "' || !has(self.", p->name,
                        ") || ", text ? "string(self." : "self.", p->name, text ? ")" : "",
                        " in [", absl::StrJoin(text ? Quote(own->enum_values) : own->enum_values,
                                               ", "),
                        "]"),
           absl::StrCat("spec.strategy.", p->name, " for strategy ", name, " must be one of ",
                        absl::StrJoin(own->enum_values, ", ")),
           absl::StrCat(".", p->name)});
    }
    if (p->type != ParamType::kIntegerOrString) continue;
    // Words that only some of its strategies take (interval's adaptive).
    std::vector<std::string> words;
    std::vector<std::string> with_words;
    for (const std::string& name : takers) {
      const ParamSpec* own = sync::FindStrategyDescriptor(name)->Param(p->name);
      if (own->words.empty()) continue;
      with_words.push_back(name);
      for (const std::string& w : own->words) {
        if (std::find(words.begin(), words.end(), w) == words.end()) words.push_back(w);
      }
    }
    if (with_words.empty() || with_words.size() == takers.size()) continue;
    rules.push_back({absl::StrCat("!has(self.", p->name, ") || type(self.", p->name,
                                  ") == int || (has(self.type) && ", TypeIn(with_words), ")"),
                     absl::StrCat("spec.strategy.", p->name, " ", JoinOr(words), " is only for ",
                                  StrategyWord(with_words)),
                     absl::StrCat(".", p->name)});
  }
  for (const StrategyDescriptor& d : sync::StrategyDescriptors()) {
    rules.insert(rules.end(), d.cel.begin(), d.cel.end());
  }
  y.Rules(1, rules);
  y.Line(1, "properties:");
  y.Line(2, "type:");
  y.Line(3, "type: string");
  y.Line(3, "maxLength: 32");
  std::vector<std::string> names;
  std::vector<std::string> docs;
  for (const StrategyDescriptor& d : sync::StrategyDescriptors()) {
    names.push_back(d.name);
    docs.push_back(absl::StrCat(d.name, " (", d.doc, ")"));
  }
  y.Line(3, absl::StrCat("description: ",
                         SingleQuoted(absl::StrCat("The strategy, ssgd when left out: ",
                                                   absl::StrJoin(docs, "; "), "."))));
  y.Line(3, "enum:");
  for (const std::string& name : names) y.Line(4, absl::StrCat("- ", name));
  for (const ParamSpec* p : all) {
    const std::vector<std::string> takers = sync::StrategiesTaking(p->name);
    std::vector<const ParamSpec*> specs;
    for (const std::string& name : takers) {
      specs.push_back(sync::FindStrategyDescriptor(name)->Param(p->name));
    }
    EmitProperty(&y, 2, specs, Describe(specs, takers));
  }
  return y.Take();
}

std::string CrdYaml() {
  std::string out;
  for (absl::string_view line : absl::StrSplit(kCrdTemplate, '\n')) {
    const size_t at = line.find(kSchemaMarker);
    if (at == absl::string_view::npos) {
      absl::StrAppend(&out, line, "\n");
      continue;
    }
    absl::StrAppend(&out, StrategySchemaYaml(static_cast<int>(at)));
  }
  // StrSplit leaves one empty piece after the template's final newline.
  if (out.size() >= 2 && out.compare(out.size() - 2, 2, "\n\n") == 0) out.pop_back();
  return out;
}

}  // namespace hptrain::cli
