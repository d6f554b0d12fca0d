// What `hptrain strategies` and `hptrain crd` print: the strategy descriptors
// (runtime/sync/strategy_descriptor.h) as a table, JSON, the README's markdown table, and the
// TrainingJob CRD whose spec.strategy schema (with its CEL rules) is generated from them. No
// libtorch; pure functions of the registered descriptors.
#ifndef HPTRAIN_RUNTIME_CLI_STRATEGY_DOCS_H_
#define HPTRAIN_RUNTIME_CLI_STRATEGY_DOCS_H_

#include <string>

namespace hptrain::cli {

// One row per parameter: strategy, parameter, type, default, range, and the devices the
// strategy runs on; a strategy without parameters gets one row with "-".
std::string StrategiesTable();

// {"strategies": [{"name", "doc", "usesParameterServer", "devices": [...], "parameters": [{"name",
// "type", "doc", "default", "required", "range", "enum", "words", "fields"}]}]}, one document.
std::string StrategiesJson();

// The README's strategy table (README.md, "Strategies"): type, what it does, parameters with
// their defaults and ranges, where it runs.
std::string StrategiesMarkdown();

// The spec.strategy property of the CRD's schema, its first line "strategy:", every line
// indented by `indent` spaces and ending in a newline.
std::string StrategySchemaYaml(int indent);

// The whole TrainingJob CRD: the template (runtime/cli/crd/trainingjobs.template.yaml, embedded
// at build time) with the generated spec.strategy schema in place of its marker line.
std::string CrdYaml();

}  // namespace hptrain::cli

#endif  // HPTRAIN_RUNTIME_CLI_STRATEGY_DOCS_H_
