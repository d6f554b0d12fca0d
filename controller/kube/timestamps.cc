#include "controller/kube/timestamps.h"

#include "absl/strings/str_cat.h"

namespace hptrain::kube {

std::string FormatKubeTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

std::string FormatMicroTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

absl::StatusOr<absl::Time> ParseKubeTime(absl::string_view text) {
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &t, &error)) {
    return absl::InvalidArgumentError(absl::StrCat("bad timestamp \"", text, "\": ", error));
  }
  return t;
}

}  // namespace hptrain::kube
