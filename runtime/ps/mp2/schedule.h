// The MP² push schedule (docs/algorithms.md §1b): which elements of a predicted tensor workers push in
// each round. Nothing about it travels: the PS and every worker derive the same schedule from
// (seed, shard, piece).
//
// A piece (a model tensor, or the part of one in a shard: runtime/ps/shard_plan.h) with more than
// kMaxDenseElements elements is predicted when the push ratio ρ < 1. Its elements are shuffled
// once by a fixed random permutation π drawn from (seed, shard, piece); with
// n = ceil(ρ·size) and C = ceil(1/ρ) rounds per cycle, round t pushes
//     S_t = π[(t mod C)·n, min((t mod C + 1)·n, size)),
// sorted ascending (so gathering walks memory forwards). Over any C consecutive rounds the subsets
// are disjoint and cover every index exactly once. Smaller pieces, and every piece at ρ = 1, are
// pushed whole every round.
#ifndef HPTRAIN_RUNTIME_PS_MP2_SCHEDULE_H_
#define HPTRAIN_RUNTIME_PS_MP2_SCHEDULE_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace hptrain::ps::mp2 {

// Pieces of at most this many elements (biases, normalisation parameters, small layers) are
// always pushed dense (docs/algorithms.md §1b's small-tensor threshold).
inline constexpr int64_t kMaxDenseElements = 4096;

// C = ceil(1/ρ) for ρ in (0, 1].
int RoundsPerCycle(double push_ratio);

class SubsetSchedule {
 public:
  // The schedule of piece `piece` of shard `shard` with `size` elements. A piece that is not
  // predicted (size ≤ kMaxDenseElements or ρ = 1) pushes every index every round.
  SubsetSchedule(uint64_t seed, int shard, int piece, int64_t size, double push_ratio);

  int64_t size() const { return size_; }
  bool predicted() const { return predicted_; }
  int cycle() const { return cycle_; }  // C (1 when not predicted)

  // The sorted indices pushed in round `round` (≥ 0). Not predicted: every index.
  absl::Span<const int32_t> Subset(int64_t round) const;

  // out[k] = values[Subset(round)[k]].
  void Gather(int64_t round, const float* values, float* out) const;

 private:
  int64_t size_ = 0;
  bool predicted_ = false;
  int cycle_ = 1;
  int64_t slice_ = 0;                // n
  std::vector<int32_t> slices_;      // the permutation, each slice of n sorted
};

// A fingerprint of the schedule's parameters (seed and push ratio), carried by every push so that
// the PS refuses one cut by a different schedule.
uint64_t ScheduleFingerprint(uint64_t seed, double push_ratio);

}  // namespace hptrain::ps::mp2

#endif  // HPTRAIN_RUNTIME_PS_MP2_SCHEDULE_H_
