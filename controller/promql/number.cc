#include "controller/promql/number.h"

#include <cmath>
#include <system_error>

#include "absl/strings/charconv.h"

namespace hptrain::promql {

bool ParseFloatValue(absl::string_view text, double* value) {
  if (text.empty()) return false;
  bool negative = false;
  if (text.front() == '+' || text.front() == '-') {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  // absl::from_chars would also take a second sign, hex ("0x1p3") and "nan(payload)", none of
  // which Go's ParseFloat (the writer's and Prometheus' own parser) accepts.
  if (text.empty() || text.front() == '+' || text.front() == '-') return false;
  for (char c : text) {
    if (c == 'x' || c == 'X' || c == '(') return false;
  }
  double parsed = 0;
  absl::from_chars_result result = absl::from_chars(text.data(), text.data() + text.size(), parsed);
  if (result.ptr != text.data() + text.size()) return false;
  if (result.ec == std::errc::result_out_of_range) {
    if (std::fabs(parsed) >= 1) return false;  // overflow; underflow rounds to 0 / a denormal
  } else if (result.ec != std::errc()) {
    return false;
  }
  *value = negative ? -parsed : parsed;
  return true;
}

}  // namespace hptrain::promql
