// Timestamps as Kubernetes writes them (metav1.Time): RFC 3339 in UTC with whole seconds,
// e.g. "2026-11-22T02:13:50Z".
//
// The reconciler never reads a clock; callers pass `now` in, and these helpers convert it to and
// from the text in status fields (startTime, completionTime, lastTransitionTime, ...).
// Pure and thread-safe.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_KUBE_TIME_H_
#define HPTRAIN_CONTROLLER_RECONCILE_KUBE_TIME_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hptrain::reconcile {

// `time` truncated to whole seconds, as "YYYY-MM-DDTHH:MM:SSZ".
std::string FormatKubeTime(absl::Time time);

// Parses any RFC 3339 timestamp (fractional seconds and offsets accepted); nullopt when `text`
// is not one.
std::optional<absl::Time> ParseKubeTime(absl::string_view text);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_KUBE_TIME_H_
