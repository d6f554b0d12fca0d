// Metric registry: the in-tree replacement for prometheus-cpp (not packaged for Debian bookworm).
//
// A Registry owns metric *families*. A family has a name, help text, a type (counter, gauge or
// histogram) and label names; its *children* are the individual time series, one per tuple of
// label values. Every sample the registry exposes also carries the registry's constant labels
// (trainingjob, role, rank: kTrainingJobLabel and its neighbours below), given once at
// construction.
//
//   Registry registry({{"trainingjob", "mnist"}, {"role", "worker"}, {"rank", "3"}});
//   Counter* sent = registry.Counter("hptrain_comm_bytes_total", "Bytes moved by collectives.",
//                                    {"direction"})->WithLabels({"sent"});
//   sent->Inc(n);                                            // hot path: one atomic, no lock
//   registry.Gauge("hptrain_step", "Current training step.")->Get()->Set(step);
//   registry.Histogram("hptrain_step_duration_seconds", "Wall time of one step.")
//       ->Get()->Observe(seconds);                           // DefaultDurationBuckets()
//
// Errors. Metric names, label names, bucket layouts and the number of label values are written
// in code, so getting them wrong is a programmer bug: the registry prints the reason to stderr
// and aborts (docs/design.md's metric names are an interface; a typo must not ship silently). Callers
// that build names at run time validate them first with ValidateMetricName/ValidateLabelName.
// Label *values* may be any UTF-8 string and are escaped on exposition.
//
// Lifetime and threads. All classes here are thread-safe. Families and children are never
// removed, so the pointers returned stay valid for the registry's lifetime; cache them instead of
// looking them up per update. Looking up a child takes the family's mutex; updating a child
// (Inc/Set/Observe) is lock-free.
#ifndef HPTRAIN_RUNTIME_METRICS_REGISTRY_H_
#define HPTRAIN_RUNTIME_METRICS_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace hptrain::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// "counter", "gauge" or "histogram", as written on a # TYPE line.
absl::string_view MetricTypeName(MetricType type);

// Constant labels of a registry, in exposition order: (name, value) pairs.
using Labels = std::vector<std::pair<std::string, std::string>>;

// The constant labels of the runtime's processes (docs/metrics.md): the TrainingJob's name, the
// process' role ("worker" or "ps") and its rank (a worker's rank, a ps pod's shard).
inline constexpr char kTrainingJobLabel[] = "trainingjob";
inline constexpr char kRoleLabel[] = "role";
inline constexpr char kRankLabel[] = "rank";

// The constant labels of one runtime process, in that order: {trainingjob, role, rank}.
inline Labels ProcessLabels(std::string job, std::string role, int rank) {
  return {{kTrainingJobLabel, std::move(job)},
          {kRoleLabel, std::move(role)},
          {kRankLabel, std::to_string(rank)}};
}

// True for "job" and "instance", the labels Prometheus gives every target it scrapes. An
// exposed series that carried one would collide with the scrape's: kept only with honor_labels
// (which then hides the scrape job) and renamed exported_<name> otherwise. A Registry refuses
// them.
bool IsTargetLabel(absl::string_view name);

// OK when `name` matches the Prometheus metric name regex [a-zA-Z_:][a-zA-Z0-9_:]*;
// InvalidArgument naming the offending string otherwise.
absl::Status ValidateMetricName(absl::string_view name);

// OK when `name` matches [a-zA-Z_][a-zA-Z0-9_]* and does not start with the reserved "__";
// InvalidArgument otherwise.
absl::Status ValidateLabelName(absl::string_view name);

// OK when `bounds` are finite and strictly increasing (the implicit +Inf bucket is not listed);
// InvalidArgument otherwise. An empty list is valid: the histogram then has only +Inf.
absl::Status ValidateBuckets(const std::vector<double>& bounds);

// Upper bounds in seconds for durations from a millisecond to a minute:
// 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 30 60.
std::vector<double> DefaultDurationBuckets();

// `count` bounds start, start*factor, start*factor^2, ... Requires start > 0, factor > 1,
// count >= 1 (aborts otherwise: programmer bug).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// `count` bounds start, start+width, ... Requires width > 0, count >= 1 (aborts otherwise).
std::vector<double> LinearBuckets(double start, double width, int count);

// A monotonically increasing value (bytes sent, rejected RPCs). Starts at 0.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds `v`. A negative or NaN `v` would break monotonicity: it is ignored (and asserts in debug
  // builds). Lock-free.
  void Inc(double v = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down (batch size, queue depth, loss). Starts at 0.
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  // All lock-free. Any double is accepted, including +-Inf and NaN.
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Inc(double v = 1.0);
  void Dec(double v = 1.0) { Inc(-v); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Cumulative view of a histogram at one instant.
struct HistogramSnapshot {
  std::vector<double> bounds;        // finite upper bounds, ascending; +Inf is implicit
  std::vector<uint64_t> cumulative;  // bounds.size() + 1 entries; the last is the +Inf bucket
  uint64_t count = 0;                // == cumulative.back()
  double sum = 0.0;
};

// Counts observations into fixed buckets chosen at creation (le = "less than or equal").
class Histogram {
 public:
  // `bounds` must pass ValidateBuckets (aborts otherwise: programmer bug).
  explicit Histogram(std::vector<double> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Records one observation: one relaxed atomic increment plus a CAS on the sum; no lock.
  // NaN lands only in the +Inf bucket (and makes the sum NaN), as in client_golang.
  void Observe(double v);

  // Counts are read bucket by bucket while others may observe, so a snapshot can miss an
  // in-flight observation, but count always equals the +Inf bucket as Prometheus requires.
  HistogramSnapshot Snapshot() const;

  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0.0};
};

// One child's values inside a FamilySnapshot.
struct ChildSnapshot {
  std::vector<std::string> label_values;  // same order as FamilySnapshot::label_names
  double value = 0.0;                     // counter and gauge
  HistogramSnapshot histogram;            // histogram only
};

// A copy of one family, taken by Registry::Collect for exposition.
struct FamilySnapshot {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<std::string> label_names;
  std::vector<ChildSnapshot> children;  // sorted by label values
};

// Common part of Family<T>; lets the registry hold families of all three types.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Copies the family's current values. Takes the family mutex briefly.
  virtual FamilySnapshot Collect() const = 0;

 protected:
  FamilyBase(std::string name, std::string help, MetricType type,
             std::vector<std::string> label_names);

  // Aborts unless `label_values` has one entry per label name (programmer bug).
  void CheckArity(const std::vector<std::string>& label_values) const;

 private:
  const std::string name_;
  const std::string help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
};

// A family of children of type T (Counter, Gauge or Histogram). Created only by Registry.
template <typename T>
class Family final : public FamilyBase {
 public:
  // Returns the child for `label_values` (one per label name, in order), creating it at 0 on first
  // use. Never null; owned by the family and valid for the registry's lifetime. Takes the family
  // mutex: look a child up once and keep the pointer. Aborts on a wrong number of values.
  T* WithLabels(const std::vector<std::string>& label_values);

  // The single child of a family declared without label names (created with the family, so it is
  // exposed as 0 before the first update). Aborts if the family has label names.
  T* Get() { return WithLabels({}); }

  FamilySnapshot Collect() const override;

 private:
  friend class Registry;
  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
         std::vector<double> bounds);

  const std::vector<double> bounds_;  // histogram families only
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_ ABSL_GUARDED_BY(mu_);
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

// Owns metric families. Thread-safe; neither copyable nor movable (children are shared by
// pointer).
class Registry {
 public:
  // `const_labels` (trainingjob, role, rank, ...) are added to every sample, before the family's
  // own labels. Aborts on an invalid or duplicate label name, the reserved "le", or a target
  // label (IsTargetLabel: "job", "instance").
  Registry() : Registry(Labels{}) {}
  explicit Registry(Labels const_labels);
  // So that Registry r({{"trainingjob", "x"}}) means one label, not the copy constructor given a
  // vector built from two `const char*` iterators.
  Registry(std::initializer_list<std::pair<std::string, std::string>> const_labels)
      : Registry(Labels(const_labels)) {}
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Each returns the family named `name`, creating it on the first call. A later call with the
  // same name returns the same family if type, help, label names (and buckets) are equal, and
  // aborts otherwise. Also aborts (programmer bug) when: the name fails ValidateMetricName; a
  // counter name does not end in "_total"; a label name fails ValidateLabelName, is a target
  // label (IsTargetLabel), repeats, or repeats a constant label; a histogram uses the label "le"
  // or buckets failing ValidateBuckets.
  // The returned family is owned by the registry and lives as long as it does.
  CounterFamily* Counter(absl::string_view name, absl::string_view help,
                         std::vector<std::string> label_names = {});
  GaugeFamily* Gauge(absl::string_view name, absl::string_view help,
                     std::vector<std::string> label_names = {});
  HistogramFamily* Histogram(absl::string_view name, absl::string_view help,
                             std::vector<std::string> label_names = {},
                             std::vector<double> bounds = DefaultDurationBuckets());

  // Snapshot of every family, sorted by name.
  std::vector<FamilySnapshot> Collect() const;

  const Labels& const_labels() const { return const_labels_; }

 private:
  // Returns the existing family `name` checked against the requested shape, or creates it.
  template <typename T>
  Family<T>* GetOrCreate(absl::string_view name, absl::string_view help, MetricType type,
                         std::vector<std::string> label_names, std::vector<double> bounds);

  const Labels const_labels_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<FamilyBase>, std::less<>> families_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hptrain::metrics

#endif  // HPTRAIN_RUNTIME_METRICS_REGISTRY_H_
