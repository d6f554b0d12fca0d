#include "runtime/job/job_spec.h"

#include <algorithm>

namespace hptrain::job {

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

}  // namespace hptrain::job
