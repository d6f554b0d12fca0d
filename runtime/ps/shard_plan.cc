#include "runtime/ps/shard_plan.h"

#include <algorithm>

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
  ShardPlan plan;
  for (size_t t = 0; t < tensor_sizes.size(); ++t) {
    if (tensor_sizes[t] < 1) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t, " has no elements"));
    }
    plan.total += tensor_sizes[t];
  }
  if (plan.total < shards) {
    return absl::InvalidArgumentError(absl::StrCat("spec.ps.shards: ", shards,
                                                   " shards for a model of ", plan.total,
                                                   " parameters"));
  }
  std::vector<int64_t> boundary(shards + 1);
  for (int s = 0; s <= shards; ++s) boundary[s] = plan.total * s / shards;
  // Cut every tensor at the boundaries inside it.
  int64_t offset = 0;
  for (int64_t n : tensor_sizes) {
    int64_t begin = offset;
    for (int s = 1; s < shards; ++s) {
      if (boundary[s] > begin && boundary[s] < offset + n) {
        plan.pieces.push_back(boundary[s] - begin);
        begin = boundary[s];
      }
    }
    plan.pieces.push_back(offset + n - begin);
    offset += n;
  }
  int piece = 0;
  offset = 0;
  for (int s = 0; s < shards; ++s) {
    ShardRange range;
    range.begin = boundary[s];
    range.end = boundary[s + 1];
    range.first_piece = piece;
    while (offset < range.end) {
      range.piece_sizes.push_back(plan.pieces[piece]);
      offset += plan.pieces[piece++];
    }
    range.last_piece = piece;
    plan.shards.push_back(std::move(range));
  }
  return plan;
}

}  // namespace hptrain::ps
