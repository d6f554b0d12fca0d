#include "runtime/metrics/registry.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hptrain::metrics {
namespace {

// Metric definitions are code, so a bad one is a programmer bug (see registry.h): fail loudly.
[[noreturn]] void Die(absl::string_view what) {
  std::fprintf(stderr, "hptrain metrics: programmer error: %.*s\n", static_cast<int>(what.size()),
               what.data());
  std::fflush(stderr);
  std::abort();
}

void DieIfError(const absl::Status& status) {
  if (!status.ok()) Die(status.message());
}

// std::atomic<double>::fetch_add is C++20; a CAS loop is lock-free on every target we build.
void AtomicAdd(std::atomic<double>& target, double v) {
  double old = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(old, old + v, std::memory_order_relaxed)) {
  }
}

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

absl::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

absl::Status ValidateMetricName(absl::string_view name) {
  bool ok = !name.empty() && !IsDigit(name[0]);
  for (char c : name) ok = ok && (IsAlpha(c) || IsDigit(c) || c == '_' || c == ':');
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("invalid metric name \"", name, "\": must match [a-zA-Z_:][a-zA-Z0-9_:]*"));
}

absl::Status ValidateLabelName(absl::string_view name) {
  bool ok = !name.empty() && !IsDigit(name[0]) && !absl::StartsWith(name, "__");
  for (char c : name) ok = ok && (IsAlpha(c) || IsDigit(c) || c == '_');
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid label name \"", name, "\": must match [a-zA-Z_][a-zA-Z0-9_]* without leading __"));
}

absl::Status ValidateBuckets(const std::vector<double>& bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram bucket bound ", i, " is not finite (+Inf is implicit)"));
    }
    if (i > 0 && !(bounds[i - 1] < bounds[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram bucket bounds must be strictly increasing; bound ", i, " (",
                       bounds[i], ") <= bound ", i - 1, " (", bounds[i - 1], ")"));
    }
  }
  return absl::OkStatus();
}

std::vector<double> DefaultDurationBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) {
    Die(absl::StrCat("ExponentialBuckets(", start, ", ", factor, ", ", count,
                     ") needs start > 0, factor > 1, count >= 1"));
  }
  std::vector<double> bounds;
  for (int i = 0; i < count; ++i, start *= factor) bounds.push_back(start);
  return bounds;
}

std::vector<double> LinearBuckets(double start, double width, int count) {
  if (!(width > 0) || count < 1) {
    Die(absl::StrCat("LinearBuckets(", start, ", ", width, ", ", count,
                     ") needs width > 0, count >= 1"));
  }
  std::vector<double> bounds;
  // start + i * width rather than repeated addition, so bounds do not drift (0.1 * 3 ...).
  for (int i = 0; i < count; ++i) bounds.push_back(start + i * width);
  return bounds;
}

// Counter / Gauge / Histogram -----------------------------------------------------------------

void Counter::Inc(double v) {
  assert(v >= 0 && "Counter::Inc with a negative or NaN value");
  if (!(v >= 0)) return;
  AtomicAdd(value_, v);
}

void Gauge::Inc(double v) { AtomicAdd(value_, v); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  DieIfError(ValidateBuckets(bounds_));
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  size_t index = std::isnan(v)
                     ? bounds_.size()
                     : std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  buckets_[index].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, v);
}

HistogramSnapshot Histogram::Snapshot() const {
  HistogramSnapshot snap;
  snap.bounds = bounds_;
  snap.cumulative.resize(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    snap.cumulative[i] = running;
  }
  snap.count = running;
  snap.sum = sum_.load(std::memory_order_relaxed);
  return snap;
}

// Families ------------------------------------------------------------------------------------

FamilyBase::FamilyBase(std::string name, std::string help, MetricType type,
                       std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {}

void FamilyBase::CheckArity(const std::vector<std::string>& label_values) const {
  if (label_values.size() != label_names_.size()) {
    Die(absl::StrCat("metric ", name_, " has labels {", absl::StrJoin(label_names_, ","),
                     "} but got ", label_values.size(), " value(s) {",
                     absl::StrJoin(label_values, ","), "}"));
  }
}

template <typename T>
Family<T>::Family(std::string name, std::string help, MetricType type,
                  std::vector<std::string> label_names, std::vector<double> bounds)
    : FamilyBase(std::move(name), std::move(help), type, std::move(label_names)),
      bounds_(std::move(bounds)) {
  // An unlabelled series exists from the start, so dashboards see 0 rather than "no data".
  if (this->label_names().empty()) WithLabels({});
}

template <typename T>
T* Family<T>::WithLabels(const std::vector<std::string>& label_values) {
  CheckArity(label_values);
  absl::MutexLock lock(&mu_);
  std::unique_ptr<T>& child = children_[label_values];
  if (child == nullptr) {
    if constexpr (std::is_same_v<T, metrics::Histogram>) {
      child = std::make_unique<T>(bounds_);
    } else {
      child = std::make_unique<T>();
    }
  }
  return child.get();
}

template <typename T>
FamilySnapshot Family<T>::Collect() const {
  FamilySnapshot snap{name(), help(), type(), label_names(), {}};
  absl::MutexLock lock(&mu_);
  snap.children.reserve(children_.size());
  for (const auto& [values, child] : children_) {
    ChildSnapshot c;
    c.label_values = values;
    if constexpr (std::is_same_v<T, metrics::Histogram>) {
      c.histogram = child->Snapshot();
    } else {
      c.value = child->Value();
    }
    snap.children.push_back(std::move(c));
  }
  return snap;
}

template class Family<metrics::Counter>;
template class Family<metrics::Gauge>;
template class Family<metrics::Histogram>;

bool IsTargetLabel(absl::string_view name) { return name == "job" || name == "instance"; }

// Registry ------------------------------------------------------------------------------------

Registry::Registry(Labels const_labels) : const_labels_(std::move(const_labels)) {
  std::set<std::string> seen;
  for (const auto& [label, value] : const_labels_) {
    DieIfError(ValidateLabelName(label));
    if (label == "le") Die("constant label \"le\" is reserved for histogram buckets");
    if (IsTargetLabel(label)) {
      Die(absl::StrCat("constant label \"", label,
                       "\" is one Prometheus gives every target: use another name"));
    }
    if (!seen.insert(label).second) Die(absl::StrCat("constant label ", label, " given twice"));
  }
}

CounterFamily* Registry::Counter(absl::string_view name, absl::string_view help,
                                 std::vector<std::string> label_names) {
  if (!absl::EndsWith(name, "_total")) {
    Die(absl::StrCat("counter name \"", name, "\" must end in _total"));
  }
  return GetOrCreate<metrics::Counter>(name, help, MetricType::kCounter, std::move(label_names),
                                       {});
}

GaugeFamily* Registry::Gauge(absl::string_view name, absl::string_view help,
                             std::vector<std::string> label_names) {
  return GetOrCreate<metrics::Gauge>(name, help, MetricType::kGauge, std::move(label_names), {});
}

HistogramFamily* Registry::Histogram(absl::string_view name, absl::string_view help,
                                     std::vector<std::string> label_names,
                                     std::vector<double> bounds) {
  DieIfError(ValidateBuckets(bounds));
  if (std::find(label_names.begin(), label_names.end(), "le") != label_names.end()) {
    Die(absl::StrCat("histogram ", name, " may not use the label \"le\""));
  }
  return GetOrCreate<metrics::Histogram>(name, help, MetricType::kHistogram, std::move(label_names),
                                         std::move(bounds));
}

template <typename T>
Family<T>* Registry::GetOrCreate(absl::string_view name, absl::string_view help, MetricType type,
                                 std::vector<std::string> label_names, std::vector<double> bounds) {
  DieIfError(ValidateMetricName(name));
  std::set<std::string> seen;
  for (const auto& [label, value] : const_labels_) seen.insert(label);
  for (const std::string& label : label_names) {
    DieIfError(ValidateLabelName(label));
    if (IsTargetLabel(label)) {
      Die(absl::StrCat("metric ", name, ": label \"", label,
                       "\" is one Prometheus gives every target: use another name"));
    }
    if (!seen.insert(label).second) {
      Die(absl::StrCat("metric ", name, ": label ", label, " repeats a label or constant label"));
    }
  }

  absl::MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it == families_.end()) {
    auto* family = new Family<T>(std::string(name), std::string(help), type, std::move(label_names),
                                 std::move(bounds));
    families_.emplace(std::string(name), std::unique_ptr<FamilyBase>(family));
    return family;
  }
  // Two call sites may register the same metric; they must agree on its shape.
  FamilyBase* existing = it->second.get();
  auto* family = dynamic_cast<Family<T>*>(existing);
  if (family == nullptr || existing->help() != help || existing->label_names() != label_names ||
      family->bounds_ != bounds) {
    Die(absl::StrCat("metric ", name, " registered twice with different type, help, labels or ",
                     "buckets (first as ", MetricTypeName(existing->type()), ")"));
  }
  return family;
}

std::vector<FamilySnapshot> Registry::Collect() const {
  std::vector<const FamilyBase*> families;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, family] : families_) families.push_back(family.get());
  }
  // Families are never removed, so they can be read outside the registry lock; this keeps a
  // scrape from blocking registrations.
  std::vector<FamilySnapshot> snaps;
  snaps.reserve(families.size());
  for (const FamilyBase* family : families) snaps.push_back(family->Collect());
  return snaps;
}

}  // namespace hptrain::metrics
