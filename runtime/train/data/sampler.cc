#include "runtime/train/data/sampler.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/splitmix64.h"

namespace hptrain::train {
std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int epoch) {
  if (n <= 0) return {};
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
  // Derive the epoch's stream from (seed, epoch) through one mixing step so nearby seeds and
  // epochs give unrelated streams.
  SplitMix64 mixer(seed ^ (0xD1B54A32D192ED03ULL * (static_cast<uint64_t>(epoch) + 1)));
  SplitMix64 rng(mixer.Next());
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(i) + 1));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

int64_t StepsPerEpoch(int64_t n, int global_batch) {
  if (n <= 0 || global_batch <= 0) return 0;
  return n / global_batch;
}

absl::Status ValidateAllocation(const std::vector<int>& allocation, int global_batch) {
  if (allocation.empty()) return absl::InvalidArgumentError("allocation is empty");
  int64_t sum = 0;
  for (size_t i = 0; i < allocation.size(); ++i) {
    if (allocation[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("allocation[", i, "] = ", allocation[i], " is negative"));
    }
    sum += allocation[i];
  }
  if (sum != global_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("allocation sums to ", sum, ", global batch is ", global_batch));
  }
  return absl::OkStatus();
}

std::vector<int64_t> WorkerSlice(const std::vector<int64_t>& perm, int64_t step_in_epoch,
                                 int global_batch, const std::vector<int>& allocation, int rank) {
  if (!ValidateAllocation(allocation, global_batch).ok()) return {};
  if (rank < 0 || static_cast<size_t>(rank) >= allocation.size()) return {};
  const auto n = static_cast<int64_t>(perm.size());
  if (step_in_epoch < 0 || step_in_epoch >= StepsPerEpoch(n, global_batch)) return {};
  int64_t begin = step_in_epoch * global_batch;
  for (int j = 0; j < rank; ++j) begin += allocation[static_cast<size_t>(j)];
  const int64_t end = begin + allocation[static_cast<size_t>(rank)];
  return std::vector<int64_t>(perm.begin() + begin, perm.begin() + end);
}

}  // namespace hptrain::train
