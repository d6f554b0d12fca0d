// Sampler: which samples each worker computes at each step.
//
// Semantics (docs/design.md, "Global batch, per-worker slices"):
//
//   1. Every epoch has one permutation of the data set, EpochPermutation(n, seed, epoch). It is a
//      pure function of (n, seed, epoch): every worker computes the same one without talking to
//      the others, on any platform (own Fisher-Yates over splitmix64, no std:: distributions,
//      whose output is implementation-defined).
//   2. Step s of an epoch consumes the global batch perm[s*B, (s+1)*B), B = global batch size.
//      The last partial batch of an epoch is dropped (StepsPerEpoch), so every step has exactly
//      B samples and the weighted aggregate (divide by B) is always right.
//   3. Worker i with allocation b_i (sum b_i = B) takes the slice [o_i, o_i + b_i) of that global
//      batch, o_i = sum_{j<i} b_j. Changing the allocation changes who computes which samples,
//      never which samples are in the step.
//
// Everything here is a pure function, thread-safe, and independent of libtorch.
#ifndef HPTRAIN_RUNTIME_TRAIN_DATA_SAMPLER_H_
#define HPTRAIN_RUNTIME_TRAIN_DATA_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace hptrain::train {

// Returns a permutation of [0, n) that depends only on (n, seed, epoch); different epochs give
// different permutations (with overwhelming probability for n > 2). n <= 0 gives an empty vector.
std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int epoch);

// Number of full global batches in an epoch of n samples: floor(n / global_batch). The last
// partial batch is dropped. Returns 0 when global_batch <= 0 or n <= 0.
int64_t StepsPerEpoch(int64_t n, int global_batch);

// Checks an allocation against a global batch: non-empty, every b_i >= 0, sum b_i == global_batch.
// Returns OK or InvalidArgument naming the offending entry. Use it on allocations that come from
// outside the process (coordinator, job file) before calling WorkerSlice.
absl::Status ValidateAllocation(const std::vector<int>& allocation, int global_batch);

// Returns the sample indices of worker `rank` at step `step_in_epoch`:
// perm[step*B + o_rank, step*B + o_rank + b_rank), B = global_batch, o_rank = sum_{j<rank} b_j.
// Concatenating the slices of ranks 0..N-1 gives exactly the step's global batch.
// Precondition violations (invalid allocation, rank out of range, step beyond
// StepsPerEpoch(perm.size(), B)) return an empty vector; callers validate external input first.
std::vector<int64_t> WorkerSlice(const std::vector<int64_t>& perm, int64_t step_in_epoch,
                                 int global_batch, const std::vector<int>& allocation, int rank);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_DATA_SAMPLER_H_
