// Strategy descriptors: the one definition of every strategy's options.
//
// A descriptor names a strategy (the `spec.strategy.type` value), says in one line what it does,
// lists the parameters it takes (each with its job-file name, type, range or enum, default and a
// one-line doc), its traits and the devices and back ends it runs on. The job parser, the
// validator, `hptrain strategies`, the CRD's spec.strategy schema and the README's strategy table
// are all produced from the descriptors, so a parameter is defined here and nowhere else.
//
// The built-in descriptors are registered in one place (strategy_descriptors.cc). Tests may add
// their own with RegisterStrategyDescriptor. This library depends on abseil only (no libtorch, no
// communicator), so that runtime/job can use it.
#ifndef HPTRAIN_RUNTIME_SYNC_STRATEGY_DESCRIPTOR_H_
#define HPTRAIN_RUNTIME_SYNC_STRATEGY_DESCRIPTOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/sync/strategy_traits.h"

namespace hptrain::sync {

class StrategyOptions;

// The value of one parameter: a boolean, an integer, a number or a string (enums, and the string
// form of integer-or-string parameters).
using OptionValue = std::variant<bool, int64_t, double, std::string>;

// How a value reads in documentation and errors: true, 8, 0.01, dynamic.
std::string FormatOptionValue(const OptionValue& value);

enum class ParamType {
  kInteger,           // a YAML integer
  kNumber,            // a YAML number (an integer is taken as a number)
  kBoolean,           // true or false
  kEnum,              // one of `enum_values`
  kString,            // any string (a file path)
  kIntegerOrString,   // an integer, or one of the words in `words`
  kObject,            // a map of `fields`
};

// The name of a type as the CRD and `hptrain strategies` write it: integer, number, boolean,
// string, integer-or-string, object.
const char* ParamTypeName(ParamType type);

// Bounds of an integer or a number; unset bounds are open.
struct ParamRange {
  std::optional<double> min;
  std::optional<double> max;
  bool min_exclusive = false;
  bool max_exclusive = false;

  bool empty() const { return !min.has_value() && !max.has_value(); }
};

// A CEL rule of the CRD's schema (x-kubernetes-validations): the Kubernetes twin of a check the
// validator makes that a schema keyword cannot express.
struct CelRule {
  std::string rule;
  std::string message;
  std::string field_path;  // ".bits"; empty: the rule's own place
};

struct ParamSpec {
  std::string name;  // as in the job file: "density", "warmupEpochs"
  ParamType type = ParamType::kInteger;
  std::string doc;   // one line
  // The value in force when the job file leaves the parameter out; none where leaving it out has
  // its own meaning, which `default_doc` then says ("the schedule's warm-up", "required").
  std::optional<OptionValue> default_value;
  std::string default_doc;
  ParamRange range;  // kInteger, kNumber; for kIntegerOrString, the range of its integers
  // kEnum: the allowed strings. kInteger: the allowed values, as text ("0", "1"). kIntegerOrString:
  // when not empty, the allowed values as text, integers and words ("1", ..., "dynamic").
  std::vector<std::string> enum_values;
  std::string enum_noun;             // kEnum, for "unknown <noun> \"x\"": "sparse encoding"
  std::vector<std::string> words;    // kIntegerOrString: the strings it takes ("adaptive")
  std::vector<ParamSpec> fields;     // kObject: its parameters, named relative to it
  bool required = false;             // the strategy does not run without it
  std::vector<CelRule> cel;          // rules on the value (the CRD property's own)
  std::string range_doc;             // how the range reads where `range` cannot say it

  // How the default reads in documentation: the value, else default_doc, else "unset".
  std::string DefaultText() const;
};

// Where a strategy runs. Every strategy runs on cpu and cuda over Gloo (cuda staging through host
// memory); `nccl`: its gradient exchange runs on device buffers, so NCCL can carry it, unless
// parameter `host_only_param` has the value `host_only_value`.
struct StrategyDevices {
  bool nccl = false;
  std::string host_only_param;  // e.g. "sparseEncoding"
  std::string host_only_value;  // e.g. "compact"
};

// Cross-field rules that no single parameter expresses. `path` is the options' field path
// ("spec.strategy"); errors name a field below it.
using StrategyValidator =
    std::function<absl::Status(const StrategyOptions& options, absl::string_view path)>;

struct StrategyDescriptor {
  std::string name;  // the spec.strategy.type value
  std::string doc;   // one line
  std::vector<ParamSpec> params;
  StrategyTraits traits;  // the traits every instance has (strategy_traits.h)
  StrategyDevices devices;
  StrategyValidator validate;  // may be empty
  // validate's twins in the CRD, rules on the spec.strategy object; each message names the
  // field as validate's does.
  std::vector<CelRule> cel;

  const ParamSpec* Param(absl::string_view param) const;
  // The parameter names, in declaration order.
  std::vector<std::string> ParamNames() const;
};

// The traits the descriptor of strategy `name` declares (the defaults for a name without one).
StrategyTraits DeclaredTraits(absl::string_view name);

// Every registered descriptor, built-in ones first in documentation order (ssgd first), then
// those added by RegisterStrategyDescriptor in the order added. The reference stays valid; the
// list grows only through RegisterStrategyDescriptor. Thread-safe once no registration runs.
const std::vector<StrategyDescriptor>& StrategyDescriptors();

// The descriptor of strategy `name`, or null.
const StrategyDescriptor* FindStrategyDescriptor(absl::string_view name);

// Adds `descriptor` (tests: a strategy the build does not have). Returns false and adds nothing
// when the name is taken. Not thread-safe: call before any reader runs (a static initialiser).
bool RegisterStrategyDescriptor(StrategyDescriptor descriptor);

// Every parameter name any strategy takes, each once, in the order they are first declared
// (the built-in parameter catalogue's order, then a registered strategy's own). For the parser,
// the CRD and the tables: spec.strategy is one map whose keys are this list plus "type".
std::vector<const ParamSpec*> AllStrategyParams();

// The strategies that take parameter `param`, in descriptor order.
std::vector<std::string> StrategiesTaking(absl::string_view param);

// Every value in the enum_values of parameter `param`, over the strategies that take it, in the
// order first declared (bits: quantized's 1, 2, ..., dynamic; hps takes a subset).
std::vector<std::string> AllEnumValues(absl::string_view param);

// The parameters several strategies share, each defined once (strategy_descriptors.cc); a
// descriptor takes one with CatalogueParam and may override its default or doc.
const std::vector<ParamSpec>& ParamCatalogue();
ParamSpec CatalogueParam(absl::string_view name);

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_STRATEGY_DESCRIPTOR_H_
