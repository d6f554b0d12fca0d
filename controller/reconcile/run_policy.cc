#include "controller/reconcile/run_policy.h"

#include <algorithm>

#include "controller/reconcile/kube_time.h"

namespace hptrain::reconcile {
namespace {

std::optional<absl::Time> After(const Json& status, const char* field, int64_t seconds) {
  if (seconds <= 0) return std::nullopt;
  std::optional<absl::Time> start = ParseKubeTime(StringAt(status, {field}));
  if (!start.has_value()) return std::nullopt;
  return *start + absl::Seconds(seconds);
}

}  // namespace

std::optional<absl::Time> DeadlineOf(int64_t active_deadline_seconds, const Json& status) {
  return After(status, "startTime", active_deadline_seconds);
}

std::optional<absl::Time> TtlExpiryOf(int64_t ttl_seconds, const Json& status) {
  return After(status, "completionTime", ttl_seconds);
}

int64_t TtlSecondsOf(const Json& job) {
  return std::max<int64_t>(IntAt(job, {"spec", "runPolicy", "ttlSecondsAfterFinished"}, 0), 0);
}

void RequeueAt(absl::Time due, absl::Time now, std::optional<absl::Duration>* requeue) {
  absl::Duration wait = std::max(due - now, absl::Seconds(1));
  if (!requeue->has_value() || wait < **requeue) *requeue = wait;
}

}  // namespace hptrain::reconcile
