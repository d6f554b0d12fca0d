#include "runtime/ps/shard_plan.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace hptrain::ps {

int ShardPlan::ShardOf(int64_t offset) const {
  for (size_t s = 0; s < shards.size(); ++s) {
    if (offset < shards[s].end) return static_cast<int>(s);
  }
  return static_cast<int>(shards.size()) - 1;
}

absl::StatusOr<ShardPlan> PlanShards(const std::vector<int64_t>& tensor_sizes, int shards) {
  if (shards < 1) return absl::InvalidArgumentError("spec.ps.shards must be at least 1");
  const int tensors = static_cast<int>(tensor_sizes.size());
  if (tensors < shards) {
    return absl::InvalidArgumentError(absl::StrCat("spec.ps.shards: ", shards,
                                                   " shards for a model of ", tensors,
                                                   " tensors (each shard serves whole tensors)"));
  }
  std::vector<int64_t> offsets(tensors + 1, 0);  // offsets[t] = start of tensor t
  for (int t = 0; t < tensors; ++t) {
    if (tensor_sizes[t] < 1) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t, " has no elements"));
    }
    offsets[t + 1] = offsets[t] + tensor_sizes[t];
  }
  ShardPlan plan;
  plan.total = offsets[tensors];
  // boundary[s] = index of the first tensor of shard s.
  std::vector<int> boundary(shards + 1, 0);
  boundary[shards] = tensors;
  for (int s = 1; s < shards; ++s) {
    const int64_t target = plan.total * s / shards;
    int best = boundary[s - 1] + 1;
    for (int t = best; t <= tensors - (shards - s); ++t) {
      if (std::llabs(offsets[t] - target) < std::llabs(offsets[best] - target)) best = t;
    }
    boundary[s] = best;
  }
  for (int s = 0; s < shards; ++s) {
    ShardRange range;
    range.first_tensor = boundary[s];
    range.last_tensor = boundary[s + 1];
    range.begin = offsets[range.first_tensor];
    range.end = offsets[range.last_tensor];
    range.tensor_sizes.assign(tensor_sizes.begin() + range.first_tensor,
                              tensor_sizes.begin() + range.last_tensor);
    plan.shards.push_back(std::move(range));
  }
  return plan;
}

}  // namespace hptrain::ps
