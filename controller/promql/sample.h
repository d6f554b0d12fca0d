// Sample: one value of one time series, as read from a /metrics page or a Prometheus query.
//
// The series is identified by its labels; the metric name, when the source gives one, is the
// label "__name__" (Prometheus' own convention), so `up{job="w"}` is
// {{"__name__", "up"}, {"job", "w"}}. A scalar query result has no labels at all.
//
// Thread-safety: a value type; NameOf is pure.
#ifndef HPTRAIN_CONTROLLER_PROMQL_SAMPLE_H_
#define HPTRAIN_CONTROLLER_PROMQL_SAMPLE_H_

#include <map>
#include <string>

namespace hptrain::promql {

struct Sample {
  std::map<std::string, std::string> labels;  // includes "__name__" when the source gives a name
  double value = 0;                           // may be NaN or +-Inf
  double timestamp_seconds = 0;               // seconds since the epoch; 0 when absent
};

// The "__name__" label of `sample`, or "" when it has none.
inline std::string NameOf(const Sample& sample) {
  auto it = sample.labels.find("__name__");
  return it == sample.labels.end() ? std::string() : it->second;
}

}  // namespace hptrain::promql

#endif  // HPTRAIN_CONTROLLER_PROMQL_SAMPLE_H_
