#include "runtime/job/job_spec.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/sync/strategy_descriptor.h"

namespace hptrain::job {

bool DatasetSpec::builtin_format() const {
  return format == "idx" || format == "cifar-binary" || format == "synthetic";
}

int JobSpec::WorldSize() const {
  int world = 0;
  for (const WorkerGroupSpec& group : worker_groups) world += std::max(group.replicas, 0);
  return world;
}

std::vector<std::string> JobSpec::RankGroups() const {
  std::vector<std::string> groups;
  groups.reserve(WorldSize());
  for (const WorkerGroupSpec& group : worker_groups) {
    for (int i = 0; i < group.replicas; ++i) groups.push_back(group.name);
  }
  return groups;
}

int JobSpec::Slots() const {
  return elastic.enabled ? std::max(WorldSize(), elastic.max_replicas) : WorldSize();
}

std::vector<std::string> JobSpec::SlotGroups() const {
  std::vector<std::string> groups = RankGroups();
  const std::string last = worker_groups.empty() ? "" : worker_groups.back().name;
  while (static_cast<int>(groups.size()) < Slots()) groups.push_back(last);
  return groups;
}

std::vector<int> EvenAllocation(int global_batch, int members) {
  std::vector<int> allocation;
  if (members <= 0) return allocation;
  for (int i = 0; i < members; ++i) {
    allocation.push_back(global_batch / members + (i < global_batch % members ? 1 : 0));
  }
  return allocation;
}

std::vector<int> JobSpec::InitialAllocation() const {
  // Ranks of groups with a batchSize take it; whatever is left of the global batch is split
  // equally over the other ranks. With equal weights the largest-remainder method reduces to
  // "everyone gets floor(B/N), the first B mod N ranks one more". A valid job has either all
  // groups or none setting batchSize; the mixed case is defined only so nothing here can fail.
  std::vector<int> allocation;
  allocation.reserve(WorldSize());
  int fixed_total = 0;
  int free_ranks = 0;
  for (const WorkerGroupSpec& group : worker_groups) {
    int replicas = std::max(group.replicas, 0);
    if (group.batch_size > 0) {
      fixed_total += group.batch_size * replicas;
    } else {
      free_ranks += replicas;
    }
  }
  int remaining = std::max(global_batch_size - fixed_total, 0);
  int base = free_ranks > 0 ? remaining / free_ranks : 0;
  int extra = free_ranks > 0 ? remaining % free_ranks : 0;
  for (const WorkerGroupSpec& group : worker_groups) {
    for (int i = 0; i < group.replicas; ++i) {
      if (group.batch_size > 0) {
        allocation.push_back(group.batch_size);
      } else {
        allocation.push_back(base + (extra > 0 ? 1 : 0));
        if (extra > 0) --extra;
      }
    }
  }
  return allocation;
}

std::string ResolveDevice(const JobSpec& spec, bool gpu_visible) {
  if (spec.device == "cuda") return "cuda";
  if (spec.device != "auto") return "cpu";
  // The priority scheduler runs on host buffers only; ValidateJob refuses it with device cuda.
  if (spec.scheduler.type == "priority") return "cpu";
  return gpu_visible ? "cuda" : "cpu";
}

bool ExchangesOnDevice(const StrategySpec& strategy) {
  const sync::StrategyDescriptor* d = sync::FindStrategyDescriptor(strategy.type);
  if (d == nullptr || !d->devices.nccl) return false;
  return d->devices.host_only_param.empty() ||
         strategy.String(d->devices.host_only_param) != d->devices.host_only_value;
}

std::string HostOnlyReason(const StrategySpec& strategy) {
  const sync::StrategyDescriptor* d = sync::FindStrategyDescriptor(strategy.type);
  if (d == nullptr || !d->devices.nccl || d->devices.host_only_param.empty() ||
      strategy.String(d->devices.host_only_param) != d->devices.host_only_value) {
    return "";
  }
  return absl::StrCat(" (", d->devices.host_only_param, ": ", d->devices.host_only_value, ")");
}

absl::StatusOr<std::string> ResolveBackend(const JobSpec& spec, const std::string& device,
                                           bool nccl_built, bool one_gpu_per_worker) {
  const std::string& backend = spec.communicator.backend;
  const std::string& strategy = spec.strategy.type;
  const bool on_cuda = device == "cuda";
  if (backend == "gloo") return std::string("gloo");
  if (backend == "auto") {
    const bool nccl = on_cuda && nccl_built && one_gpu_per_worker &&
                      ExchangesOnDevice(spec.strategy) && !spec.communicator.hierarchical;
    return std::string(nccl ? "nccl" : "gloo");
  }
  auto invalid = [](const auto&... reason) {
    return absl::InvalidArgumentError(absl::StrCat("spec.communicator.backend: ", reason...));
  };
  if (backend != "nccl") {
    return invalid("unknown backend \"", backend, "\" (expected one of auto, gloo, nccl)");
  }
  if (!on_cuda) {
    return invalid("nccl needs the workers on cuda, but they run on ", device,
                   " (spec.device: ", spec.device, ")");
  }
  if (!nccl_built) {
    return invalid("nccl is not available: this build has no NCCL (use gloo or auto)");
  }
  if (!one_gpu_per_worker) {
    return invalid("nccl needs a GPU of its own for every worker, but workers share a GPU (use "
                   "gloo or auto)");
  }
  if (!ExchangesOnDevice(spec.strategy)) {
    return invalid("nccl does not carry strategy ", strategy, HostOnlyReason(spec.strategy),
                   ", which exchanges through host memory (use gloo or auto)");
  }
  if (spec.communicator.hierarchical) {
    return invalid("nccl cannot run spec.communicator.hierarchical, whose all-reduce runs over "
                   "Gloo's transport (use gloo or auto)");
  }
  return std::string("nccl");
}

}  // namespace hptrain::job
