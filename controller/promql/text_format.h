// ParseTextFormat: the Prometheus text exposition format, version 0.0.4, into Samples.
//
// What a worker's /metrics page (runtime/metrics/exposition.h) and most exporters serve:
//
//   # HELP hptrain_step Current training step.
//   # TYPE hptrain_step gauge
//   hptrain_step{trainingjob="mnist",rank="3"} 1200
//   hptrain_loss NaN 1712000000123
//
// One sample per line: a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), an optional label set
// `{name="value",...}` (a trailing comma is allowed; values escape \\ \" and \n), a value (a
// decimal float with optional exponent, NaN, +Inf or -Inf) and an optional integer timestamp in
// milliseconds, returned in seconds. Spaces and tabs may separate the tokens and surround the
// label set's parts. Blank lines and comments are skipped; # HELP and # TYPE lines are checked
// for a valid metric name, a valid HELP escape (\\ or \n) and a known TYPE (counter, gauge,
// histogram, summary, untyped). Lines end with "\n"; a "\r" before it is dropped, and the last
// line needs no newline. The rules follow Go's expfmt.TextParser, the reference implementation;
// unlike it, this parser does not check that label values are valid UTF-8 nor the order and
// uniqueness of HELP/TYPE lines (Prometheus judges those when it scrapes).
//
// Samples come back in page order, each with "__name__" set; histogram and summary series
// (_bucket, _sum, _count, quantile) are plain samples like any other.
//
// Errors: the first malformed line fails the whole page with InvalidArgument, one line naming
// the 1-based line number and what is wrong, e.g.
//   line 7: expected '=' after label name "rank", found '}'
// The parser never reads outside `text` (it need not be NUL-terminated) and is linear in its
// size.
//
// Thread-safety: pure function.
#ifndef HPTRAIN_CONTROLLER_PROMQL_TEXT_FORMAT_H_
#define HPTRAIN_CONTROLLER_PROMQL_TEXT_FORMAT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "controller/promql/sample.h"

namespace hptrain::promql {

// Every sample of the page `text`, in order; InvalidArgument "line N: ..." on the first
// malformed line.
absl::StatusOr<std::vector<Sample>> ParseTextFormat(absl::string_view text);

}  // namespace hptrain::promql

#endif  // HPTRAIN_CONTROLLER_PROMQL_TEXT_FORMAT_H_
