#include "runtime/cli/worker_device.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status.h"

namespace hptrain::cli {

absl::StatusOr<WorkerDevice> ChooseWorkerDevice(const job::JobSpec& spec, int local_rank,
                                                int workers_on_host, int visible_gpus,
                                                bool nccl_built, bool cuda_built) {
  WorkerDevice chosen;
  chosen.kind = job::ResolveDevice(spec, visible_gpus > 0);
  if (chosen.kind == "cuda") {
    if (!cuda_built) {
      return absl::FailedPreconditionError(
          "spec.device: cuda, but this hptrain build has no CUDA (its libtorch is CPU-only); run "
          "GPU workers with the runtime-cuda image");
    }
    if (visible_gpus <= 0) {
      return absl::FailedPreconditionError(
          "spec.device: cuda, but this process sees no GPU (no CUDA device or driver, or "
          "CUDA_VISIBLE_DEVICES hides them)");
    }
    chosen.cuda_index = (local_rank < 0 ? 0 : local_rank) % visible_gpus;
    chosen.device = absl::StrCat("cuda:", chosen.cuda_index);
  }
  HPTRAIN_ASSIGN_OR_RETURN(chosen.backend,
                           job::ResolveBackend(spec, chosen.kind, nccl_built,
                                               chosen.kind == "cuda" &&
                                                   workers_on_host <= visible_gpus));
  return chosen;
}

absl::Status CheckSameDevice(comm::KeyValueStore& store, int rank, int world,
                             const WorkerDevice& mine, std::chrono::milliseconds timeout) {
  const std::string value = absl::StrCat(mine.kind, "/", mine.backend);
  HPTRAIN_RETURN_IF_ERROR(store.Set(absl::StrCat("device/", rank), value),
                          "publishing this worker's device");
  std::map<std::string, std::vector<int>> ranks_of;
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<std::string> theirs = store.Get(absl::StrCat("device/", r), timeout);
    if (!theirs.ok()) {
      return Annotate(theirs.status(), absl::StrCat("waiting for rank ", r, "'s device"));
    }
    ranks_of[*theirs].push_back(r);
  }
  if (ranks_of.size() == 1) return absl::OkStatus();
  std::vector<std::string> sides;
  for (const auto& [device, ranks] : ranks_of) {
    sides.push_back(absl::StrCat(device, " on rank", ranks.size() == 1 ? " " : "s ",
                                 absl::StrJoin(ranks, ",")));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the workers disagree on device/back end (", absl::StrJoin(sides, "; "),
      "): a job trains on one kind of device; set spec.device and spec.communicator.backend "
      "explicitly or give every worker the same hardware"));
}

}  // namespace hptrain::cli
