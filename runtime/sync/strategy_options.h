// StrategyOptions: a strategy's type and the values of its parameters, as the job file gave them.
//
// A parameter is either set (the job file or code gave it a value) or not; reading one that is
// not set gives its default from the strategy's descriptor (strategy_descriptor.h). There are no
// sentinel values: `density: 0` is a value, and the validator refuses it.
//
// Names are the job file's (`density`, `warmupEpochs`); a parameter of an object parameter is
// named with a dot (`compression.bits`). Values keep the type they were set with; the readers
// convert between integer and number. CheckStrategyOptions (strategy_options_check.h) checks a
// set of values against the descriptor.
#ifndef HPTRAIN_RUNTIME_SYNC_STRATEGY_OPTIONS_H_
#define HPTRAIN_RUNTIME_SYNC_STRATEGY_OPTIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/string_view.h"
#include "runtime/sync/strategy_descriptor.h"

namespace hptrain::sync {

class StrategyOptions {
 public:
  // The strategy (spec.strategy.type).
  std::string type = "ssgd";

  // Sets parameter `name` to `value`: a bool, any integer, a floating-point number or a string.
  template <typename T>
  void Set(absl::string_view name, T value) {
    if constexpr (std::is_same_v<T, bool>) {
      values_[std::string(name)] = OptionValue(value);
    } else if constexpr (std::is_integral_v<T>) {
      values_[std::string(name)] = OptionValue(static_cast<int64_t>(value));
    } else if constexpr (std::is_floating_point_v<T>) {
      values_[std::string(name)] = OptionValue(static_cast<double>(value));
    } else {
      values_[std::string(name)] = OptionValue(std::string(value));
    }
  }
  void SetValue(absl::string_view name, OptionValue value) {
    values_[std::string(name)] = std::move(value);
  }
  // Unsets `name` (and, for an object parameter, its fields).
  void Clear(absl::string_view name);

  // True when `name` was set; for an object parameter, when any of its fields was.
  bool Has(absl::string_view name) const;
  // The value set, or null.
  const OptionValue* Find(absl::string_view name) const;

  // The value set, else the default of `type`'s descriptor, else the type's zero (false, 0, "").
  bool Bool(absl::string_view name) const;
  int64_t Int(absl::string_view name) const;
  double Number(absl::string_view name) const;
  // Strings as they are; integers and numbers as FormatOptionValue writes them.
  std::string String(absl::string_view name) const;

  // Every value set, by name.
  const std::map<std::string, OptionValue>& values() const { return values_; }

 private:
  // The value set, else the descriptor's default, else null.
  const OptionValue* Resolve(absl::string_view name) const;

  std::map<std::string, OptionValue> values_;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_STRATEGY_OPTIONS_H_
