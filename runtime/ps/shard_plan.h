// ShardPlan: how a model's flat parameters are split over the S parameter-server shards
// (spec.ps.shards). Shard s serves one contiguous range of whole tensors; the boundary between
// shards s−1 and s is the tensor boundary nearest to s·P/S (P = total parameters), moved so that
// no shard is empty. Every worker and the PS compute the same plan from the same tensor sizes.
#ifndef HPTRAIN_RUNTIME_PS_SHARD_PLAN_H_
#define HPTRAIN_RUNTIME_PS_SHARD_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace hptrain::ps {

struct ShardRange {
  int64_t begin = 0;  // flat element offsets
  int64_t end = 0;
  int first_tensor = 0;  // tensors [first_tensor, last_tensor) lie in the range
  int last_tensor = 0;
  std::vector<int64_t> tensor_sizes;  // their sizes, in order
  int64_t size() const { return end - begin; }
};

struct ShardPlan {
  std::vector<ShardRange> shards;
  int64_t total = 0;
  // The shard holding flat element `offset` (offset in [0, total)).
  int ShardOf(int64_t offset) const;
};

// Errors: InvalidArgument when shards < 1, a tensor size is < 1, or there are fewer tensors than
// shards ("spec.ps.shards: 8 shards for a model of 4 tensors").
absl::StatusOr<ShardPlan> PlanShards(const std::vector<int64_t>& tensor_sizes, int shards);

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_SHARD_PLAN_H_
