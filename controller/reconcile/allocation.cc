#include "controller/reconcile/allocation.h"

#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/reconcile/conditions.h"
#include "controller/reconcile/kube_time.h"
#include "controller/reconcile/parsed_job.h"
#include "runtime/base/status.h"

namespace hptrain::reconcile {

absl::StatusOr<AllocationRecord> RecordAllocation(const Json& job,
                                                  const std::vector<int>& batch_sizes,
                                                  absl::Time now) {
  HPTRAIN_ASSIGN_OR_RETURN(ParsedJob parsed, ParseTrainingJob(job));
  const int world = parsed.spec.WorldSize();
  if (static_cast<int>(batch_sizes.size()) != world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "allocation has ", batch_sizes.size(), " batch sizes, the job has ", world, " workers"));
  }
  for (size_t r = 0; r < batch_sizes.size(); ++r) {
    if (batch_sizes[r] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("allocation: rank ", r, " has batch size ", batch_sizes[r], " (< 1)"));
    }
  }
  int64_t sum = std::accumulate(batch_sizes.begin(), batch_sizes.end(), int64_t{0});
  if (sum != parsed.spec.global_batch_size) {
    return absl::InvalidArgumentError(absl::StrCat("allocation adds up to ", sum,
                                                   ", spec.globalBatchSize is ",
                                                   parsed.spec.global_batch_size));
  }

  AllocationRecord record;
  const Json* old = Find(job, {"status"});
  record.status = old != nullptr && old->is_object() ? *old : Json::object();
  Json* workers = record.status.contains("workers") ? &record.status["workers"] : nullptr;
  std::vector<bool> seen(batch_sizes.size(), false);
  if (workers != nullptr && workers->is_array()) {
    for (Json& entry : *workers) {
      int64_t rank = IntAt(entry, {"rank"}, -1);
      if (!entry.is_object() || rank < 0 || rank >= world) continue;
      entry["batchSize"] = batch_sizes[rank];
      seen[rank] = true;
    }
  }
  for (size_t r = 0; r < seen.size(); ++r) {
    if (!seen[r]) {
      return absl::FailedPreconditionError(
          absl::StrCat("status.workers has no entry for rank ", r, " yet"));
    }
  }
  int64_t generation = IntAt(record.status, {"allocationGeneration"}, 0) + 1;
  record.status["allocationGeneration"] = generation;
  record.status["lastRebalanceTime"] = FormatKubeTime(now);
  std::string message = absl::StrCat("allocation ", generation, ": batch sizes [",
                                     absl::StrJoin(batch_sizes, ", "), "] by rank");
  SetCondition(&record.status, {kConditionRebalanced, kTrue, kReasonRebalanced, message},
               Generation(job), now);
  record.event = {kEventNormal, kReasonRebalanced, message};
  return record;
}

}  // namespace hptrain::reconcile
