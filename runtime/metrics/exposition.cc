#include "runtime/metrics/exposition.h"

#include <charconv>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace hptrain::metrics {
namespace {

std::string Escape(absl::string_view in, bool quote) {
  std::string out;
  out.reserve(in.size());
  for (char c : in) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// Appends `{a="x",b="y"}` (nothing when there are no labels). `extra_name`, when non-empty, adds
// one more pair at the end: the histogram's "le".
void AppendLabels(std::string* out, const Labels& const_labels,
                  const std::vector<std::string>& names, const std::vector<std::string>& values,
                  absl::string_view extra_name = {}, absl::string_view extra_value = {}) {
  if (const_labels.empty() && names.empty() && extra_name.empty()) return;
  char sep = '{';
  auto append = [&](absl::string_view name, absl::string_view value) {
    absl::StrAppend(out, absl::string_view(&sep, 1), name, "=\"", EscapeLabelValue(value), "\"");
    sep = ',';
  };
  for (const auto& [name, value] : const_labels) append(name, value);
  for (size_t i = 0; i < names.size(); ++i) append(names[i], values[i]);
  if (!extra_name.empty()) append(extra_name, extra_value);
  out->push_back('}');
}

void AppendSample(std::string* out, absl::string_view name, absl::string_view suffix,
                  const Labels& const_labels, const std::vector<std::string>& names,
                  const std::vector<std::string>& values, const std::string& value,
                  absl::string_view le = {}) {
  absl::StrAppend(out, name, suffix);
  AppendLabels(out, const_labels, names, values, le.empty() ? "" : "le", le);
  absl::StrAppend(out, " ", value, "\n");
}

void AppendFamily(std::string* out, const FamilySnapshot& family, const Labels& const_labels) {
  absl::StrAppend(out, "# HELP ", family.name, " ", EscapeHelp(family.help), "\n");
  absl::StrAppend(out, "# TYPE ", family.name, " ", MetricTypeName(family.type), "\n");
  const std::vector<std::string>& names = family.label_names;
  for (const ChildSnapshot& child : family.children) {
    const std::vector<std::string>& values = child.label_values;
    if (family.type != MetricType::kHistogram) {
      AppendSample(out, family.name, "", const_labels, names, values, FormatValue(child.value));
      continue;
    }
    const HistogramSnapshot& h = child.histogram;
    for (size_t i = 0; i < h.cumulative.size(); ++i) {
      std::string le = i < h.bounds.size() ? FormatValue(h.bounds[i]) : "+Inf";
      AppendSample(out, family.name, "_bucket", const_labels, names, values,
                   absl::StrCat(h.cumulative[i]), le);
    }
    AppendSample(out, family.name, "_sum", const_labels, names, values, FormatValue(h.sum));
    AppendSample(out, family.name, "_count", const_labels, names, values, absl::StrCat(h.count));
  }
}

}  // namespace

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // std::to_chars without a precision gives the shortest string that round-trips (C++17).
  char buf[64];
  std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string EscapeHelp(absl::string_view help) { return Escape(help, /*quote=*/false); }

std::string EscapeLabelValue(absl::string_view value) { return Escape(value, /*quote=*/true); }

std::string FormatFamilies(const std::vector<FamilySnapshot>& families,
                           const Labels& const_labels) {
  std::string out;
  for (const FamilySnapshot& family : families) AppendFamily(&out, family, const_labels);
  return out;
}

std::string TextExposition(const Registry& registry) {
  return FormatFamilies(registry.Collect(), registry.const_labels());
}

}  // namespace hptrain::metrics
