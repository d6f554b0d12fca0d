// Prometheus text exposition format, version 0.0.4.
//
// Renders a Registry the way a Prometheus server (and `promtool check metrics`) expects:
//
//   # HELP hptrain_comm_bytes_total Bytes moved by collectives.
//   # TYPE hptrain_comm_bytes_total counter
//   hptrain_comm_bytes_total{trainingjob="mnist",rank="3",direction="sent"} 1048576
//   # HELP hptrain_step_duration_seconds Wall time of one step.
//   # TYPE hptrain_step_duration_seconds histogram
//   hptrain_step_duration_seconds_bucket{trainingjob="mnist",rank="3",le="0.1"} 2
//   hptrain_step_duration_seconds_bucket{trainingjob="mnist",rank="3",le="+Inf"} 3
//   hptrain_step_duration_seconds_sum{trainingjob="mnist",rank="3"} 0.75
//   hptrain_step_duration_seconds_count{trainingjob="mnist",rank="3"} 3
//
// Families are sorted by name and children by label values, so the output is deterministic.
// Constant labels come first on every sample, then the family's labels, then "le". Numbers use
// the shortest decimal form that parses back to the same double; infinities and NaN are written
// +Inf, -Inf and NaN. No timestamps are written (the scraper assigns them).
//
// All functions are pure and thread-safe; none fails.
#ifndef HPTRAIN_RUNTIME_METRICS_EXPOSITION_H_
#define HPTRAIN_RUNTIME_METRICS_EXPOSITION_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/metrics/registry.h"

namespace hptrain::metrics {

// Content-Type of the text format, for HTTP responses.
inline constexpr char kTextContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// The whole registry (a consistent-enough snapshot taken via Registry::Collect) as text.
std::string TextExposition(const Registry& registry);

// Renders already collected families; `const_labels` are prepended to every sample.
std::string FormatFamilies(const std::vector<FamilySnapshot>& families, const Labels& const_labels);

// Shortest round-trip decimal form of `v`; "+Inf", "-Inf", "NaN" for the special values.
std::string FormatValue(double v);

// Escapes a # HELP text: backslash -> \\, newline -> \n.
std::string EscapeHelp(absl::string_view help);

// Escapes a label value: backslash -> \\, double quote -> \", newline -> \n.
std::string EscapeLabelValue(absl::string_view value);

}  // namespace hptrain::metrics

#endif  // HPTRAIN_RUNTIME_METRICS_EXPOSITION_H_
