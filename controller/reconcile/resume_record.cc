#include "controller/reconcile/resume_record.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "controller/reconcile/labels.h"

namespace hptrain::reconcile {

void RecordResume(const ParsedJob& job, const GangAssessment& gang,
                  const WorkerMetricsMap& metrics, Json* status, std::vector<Event>* events) {
  const int64_t restarts = IntAt(*status, {"restarts"}, 0);
  if (restarts <= 0 || job.spec.checkpoint.path.empty()) return;
  if (IntAt(*status, {"resume", "restart"}, -1) == restarts) return;
  const std::string worker0 = WorkerPodName(job.name, 0);
  const bool current = std::any_of(gang.current.begin(), gang.current.end(),
                                   [&](const PodView* pod) { return pod->name == worker0; });
  if (!current) return;
  auto it = metrics.find(worker0);
  if (it == metrics.end() || it->second.resumed_from_step < 0) return;
  const int64_t step = it->second.resumed_from_step;
  (*status)["resume"] = {{"restart", restarts}, {"step", step}};
  std::string message =
      step > 0 ? absl::StrCat("gang restart ", restarts, " resumed training from step ", step,
                              " (checkpoint ", job.spec.checkpoint.path, ")")
               : absl::StrCat("gang restart ", restarts, " found no checkpoint at ",
                              job.spec.checkpoint.path, ": training started over from step 0");
  events->push_back({kEventNormal, kReasonCheckpointRestored, std::move(message)});
}

}  // namespace hptrain::reconcile
