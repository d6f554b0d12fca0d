// Kubernetes timestamp formats.
//
// metav1.Time is RFC 3339 in UTC with whole seconds ("2026-11-22T02:13:49Z"): events, conditions,
// creation times. metav1.MicroTime carries six fractional digits ("2026-11-22T00:00:00.000000Z"):
// Lease acquire/renew times, events.k8s.io eventTime. Both are written in UTC with a "Z" suffix.
//
// Pure functions, thread-safe.
#ifndef HPTRAIN_CONTROLLER_KUBE_TIMESTAMPS_H_
#define HPTRAIN_CONTROLLER_KUBE_TIMESTAMPS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hptrain::kube {

// "2006-01-02T15:04:05Z" (sub-second part truncated).
std::string FormatKubeTime(absl::Time t);

// "2006-01-02T15:04:05.000000Z".
std::string FormatMicroTime(absl::Time t);

// Parses either form, or any RFC 3339 time with an offset. InvalidArgument naming the text on
// failure.
absl::StatusOr<absl::Time> ParseKubeTime(absl::string_view text);

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_TIMESTAMPS_H_
