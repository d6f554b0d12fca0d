#include "controller/reconcile/kube_time.h"

#include <cstdint>

namespace hptrain::reconcile {

std::string FormatKubeTime(absl::Time time) {
  // absl::RFC3339_sec would print "+00:00"; Kubernetes writes "Z".
  int64_t seconds = absl::ToUnixSeconds(time);  // rounds towards the past
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%SZ", absl::FromUnixSeconds(seconds),
                          absl::UTCTimeZone());
}

std::optional<absl::Time> ParseKubeTime(absl::string_view text) {
  if (text.empty()) return std::nullopt;
  absl::Time time;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &time, &error)) return std::nullopt;
  return time;
}

}  // namespace hptrain::reconcile
