// Sample values as Prometheus writes them, in the text format and in the HTTP API's JSON
// ("1", "-2.5e-3", "NaN", "+Inf", "-Inf"): Go's strconv.ParseFloat syntax, decimal only.
//
// Thread-safety: pure functions.
#ifndef HPTRAIN_CONTROLLER_PROMQL_NUMBER_H_
#define HPTRAIN_CONTROLLER_PROMQL_NUMBER_H_

#include "absl/strings/string_view.h"

namespace hptrain::promql {

// Parses all of `text` as a float: an optional sign, then a decimal number with an optional
// exponent, or Inf / Infinity / NaN (any case). Returns false, leaving *value alone, for anything
// else: empty text, surrounding spaces, trailing bytes, or a finite number too large for a double.
// A number too small for a double parses as 0 or a denormal.
bool ParseFloatValue(absl::string_view text, double* value);

}  // namespace hptrain::promql

#endif  // HPTRAIN_CONTROLLER_PROMQL_NUMBER_H_
