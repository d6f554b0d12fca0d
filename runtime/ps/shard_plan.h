// ShardPlan: how a model's flat parameters are split over the S parameter-server shards
// (spec.ps.shards). Shard s serves the contiguous range [s·P/S, (s+1)·P/S) of the P flat
// parameters, so every shard carries the same share of the traffic whatever the model's layer
// sizes (LeNet-5's first fully connected layer alone is 78 % of its parameters). A tensor that
// straddles a boundary is cut there: the unit of every push and pull is a piece, a tensor or the
// part of one inside a shard, and with one shard the pieces are the tensors. Every worker
// computes the same plan from the same tensor sizes.
#ifndef HPTRAIN_RUNTIME_PS_SHARD_PLAN_H_
#define HPTRAIN_RUNTIME_PS_SHARD_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace hptrain::ps {

struct ShardRange {
  int64_t begin = 0;  // flat element offsets
  int64_t end = 0;
  int first_piece = 0;  // pieces [first_piece, last_piece) lie in the range
  int last_piece = 0;
  std::vector<int64_t> piece_sizes;  // their sizes, in order
  int64_t size() const { return end - begin; }
};

struct ShardPlan {
  std::vector<ShardRange> shards;
  std::vector<int64_t> pieces;  // every piece's size, in flat order
  int64_t total = 0;
  // The shard holding flat element `offset` (offset in [0, total)).
  int ShardOf(int64_t offset) const;
};

// Errors: InvalidArgument when shards < 1, a tensor size is < 1, or there are more shards than
// parameters.
absl::StatusOr<ShardPlan> PlanShards(const std::vector<int64_t>& tensor_sizes, int shards);

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_SHARD_PLAN_H_
