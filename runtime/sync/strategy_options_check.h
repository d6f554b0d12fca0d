// Checking a StrategyOptions against the descriptors (strategy_descriptor.h): the part of job
// validation that the descriptors define.
#ifndef HPTRAIN_RUNTIME_SYNC_STRATEGY_OPTIONS_CHECK_H_
#define HPTRAIN_RUNTIME_SYNC_STRATEGY_OPTIONS_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/sync/strategy_options.h"

namespace hptrain::sync {

// Checks, in this order: every value set names a parameter of some strategy ("unknown field"),
// and one of options.type (`<path>.<name>: does not apply to strategy X (X takes a, b)`), in the
// order of AllStrategyParams(); each value's type, enum and range, and an integer-or-string's
// words (`<path>.interval: adaptive applies only to strategy multistep, got localsgd (use an
// integer)`); then the descriptor's own cross-field rules. Returns OK or InvalidArgument
// "<path>.<name>: <reason>", one line, for the first problem. options.type must name a registered
// descriptor (InvalidArgument otherwise). Pure.
absl::Status CheckStrategyOptions(const StrategyOptions& options, absl::string_view path);

// How a list of allowed values reads in errors and documentation: "0 or 1", "1, 2, 4 or 8".
std::string JoinOr(const std::vector<std::string>& values);

// How a range reads in errors and documentation: ">= 1", "in (0, 1]", "between 2 and 64".
std::string DescribeRange(const ParamRange& range, ParamType type);

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_STRATEGY_OPTIONS_CHECK_H_
