// CPU reference of topk.h; the oracle the CUDA twin is tested against.
//
// Vectorisation (GCC 12, -O3, checked with -fopt-info-vec-optimized): CountBlock (the count/max
// pass behind DGC's search, CountAboveThreshold and the empty-block skip of the pack) and the
// index min/max check of ScatterAddChecked are vectorised. The radix histograms, the pack's
// compaction and ScatterAdd are data-dependent scatters and stay scalar; the pack only visits
// blocks that CountBlock found non-empty.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/topk/topk.h"
#include "kernels/topk/topk_common.h"

namespace hptrain::kernels {
namespace {

// Block length for counting: short enough for a 32-bit per-block count, long enough to amortise.
constexpr int64_t kBlock = 4096;

// #{i < n : AbsKey(x[i]) >= key} for n <= kBlock; raises *max_key to the block's largest key.
uint32_t CountBlock(const float* x, int64_t n, uint32_t key, uint32_t* max_key) {
  uint32_t count = 0;
  uint32_t max = *max_key;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t k = AbsKey(x[i]);
    count += k >= key ? 1u : 0u;
    max = k > max ? k : max;
  }
  *max_key = max;
  return count;
}

int64_t CountAtLeast(const float* x, int64_t n, uint32_t key, uint32_t* max_key) {
  int64_t count = 0;
  uint32_t max = 0;
  for (int64_t start = 0; start < n; start += kBlock) {
    count += CountBlock(x + start, std::min(kBlock, n - start), key, &max);
  }
  if (max_key != nullptr) *max_key = max;
  return count;
}

// Exact k-th largest AbsKey of x[0, n), 1 <= k <= n: three histogram passes (topk_common.h).
KthLargest RadixSelectAbs(const float* x, int64_t n, int64_t k) {
  RadixState state;
  state.k_remaining = k;
  uint32_t hist[kRadixMaxBins];
  for (int pass = 0; pass < kRadixPasses; ++pass) {
    std::memset(hist, 0, sizeof(hist));
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t key = AbsKey(x[i]);
      if (RadixCandidate(key, state)) ++hist[RadixDigit(key, pass)];
    }
    RadixPick(hist, pass, &state);
  }
  KthLargest kth;
  kth.key = state.prefix;
  kth.count_greater = k - state.k_remaining;
  kth.count_equal = state.count_equal;
  return kth;
}

// Packs elements with key > threshold_key, and the first equal_limit (all if < 0) with key ==
// threshold_key, in index order. Returns the count, or -1 after writing `capacity` entries.
// Blocks of kPackBlock are counted first (vectorised) and skipped when empty. A block whose
// entries fit with one slot to spare is packed branch-free: every element is written at the
// current end and the end advances only for selected ones (the selection pattern is random, so
// branches would mispredict); the spare slot absorbs the last unselected write. Slots past the
// returned count may therefore be overwritten, never slots past `capacity`.
int64_t Pack(const float* x, int64_t n, uint32_t threshold_key, int64_t equal_limit,
             int32_t* indices, float* values, int64_t capacity) {
  constexpr int64_t kPackBlock = 256;
  const int64_t limit = equal_limit < 0 ? std::numeric_limits<int64_t>::max() : equal_limit;
  int64_t count = 0;
  int64_t equal_taken = 0;
  for (int64_t start = 0; start < n; start += kPackBlock) {
    const int64_t end = std::min(n, start + kPackBlock);
    uint32_t unused_max = 0;
    const int64_t in_block = CountBlock(x + start, end - start, threshold_key, &unused_max);
    if (in_block == 0) continue;
    if (count + in_block < capacity && equal_limit < 0) {
      for (int64_t i = start; i < end; ++i) {
        indices[count] = static_cast<int32_t>(i);
        values[count] = x[i];
        count += AbsKey(x[i]) >= threshold_key ? 1 : 0;
      }
      continue;
    }
    if (count + in_block < capacity) {
      for (int64_t i = start; i < end; ++i) {
        const uint32_t key = AbsKey(x[i]);
        // Bitwise, not ||: GCC turns the short-circuit back into a branch.
        const int64_t equal = key == threshold_key;
        const int64_t take = static_cast<int64_t>(key > threshold_key) |
                             (equal & static_cast<int64_t>(equal_taken < limit));
        equal_taken += equal;
        indices[count] = static_cast<int32_t>(i);
        values[count] = x[i];
        count += take;
      }
      continue;
    }
    for (int64_t i = start; i < end; ++i) {  // near capacity: exact bookkeeping
      const uint32_t key = AbsKey(x[i]);
      if (key < threshold_key) continue;
      if (key == threshold_key) {
        if (equal_taken >= limit) continue;
        ++equal_taken;
      }
      if (count == capacity) return -1;
      indices[count] = static_cast<int32_t>(i);
      values[count] = x[i];
      ++count;
    }
  }
  return count;
}

// DGC search back end (topk_common.h): plain loops over x.
class CpuOps {
 public:
  CpuOps(const float* x, int64_t n) : x_(x), n_(n) {}

  bool ok() const { return true; }

  void GatherSample(int64_t num_samples, int64_t stride, uint64_t sample_key) {
    sample_.resize(static_cast<size_t>(num_samples));
    for (int64_t i = 0; i < num_samples; ++i) {
      sample_[i] = AbsKey(x_[DgcSampleIndex(i, stride, sample_key)]);
    }
  }

  // nth_element only permutes the sample, so repeated calls see the same multiset.
  uint32_t SampleKthLargest(int64_t k) {
    std::nth_element(sample_.begin(), sample_.begin() + (k - 1), sample_.end(),
                     std::greater<uint32_t>());
    return sample_[k - 1];
  }

  int64_t CountAtLeast(uint32_t key, uint32_t* max_key) {
    return kernels::CountAtLeast(x_, n_, key, max_key);
  }

  KthLargest KthLargestOfAll(int64_t k) { return RadixSelectAbs(x_, n_, k); }

 private:
  const float* x_;
  int64_t n_;
  std::vector<uint32_t> sample_;
};

}  // namespace

int64_t DgcTargetCount(int64_t n, double density) {
  if (n <= 0) return 0;
  const double k = std::ceil(density * static_cast<double>(n) - 1e-6);
  if (!(k >= 1.0)) return 1;  // also catches NaN density
  return k >= static_cast<double>(n) ? n : static_cast<int64_t>(k);
}

void TopKExact(const float* x, int64_t n, int64_t k, int32_t* indices, float* values) {
  if (k > n) k = n;
  if (k <= 0) return;
  const KthLargest kth = RadixSelectAbs(x, n, k);
  Pack(x, n, kth.key, k - kth.count_greater, indices, values, k);
}

ThresholdSelection DgcSelect(const float* x, int64_t n, const DgcThresholdOptions& options,
                             uint64_t seed, uint64_t step) {
  CpuOps ops(x, n);
  return SearchDgcThreshold(ops, n, options, seed, step);
}

float DgcThreshold(const float* x, int64_t n, double density, double sample_ratio, uint64_t seed,
                   uint64_t step) {
  DgcThresholdOptions options;
  options.density = density;
  options.sample_ratio = sample_ratio;
  return DgcSelect(x, n, options, seed, step).threshold;
}

int64_t CountAboveThreshold(const float* x, int64_t n, float thr) {
  return CountAtLeast(x, n, ThresholdKey(thr), nullptr);
}

int64_t PackAboveThreshold(const float* x, int64_t n, float thr, int32_t* indices, float* values,
                           int64_t capacity) {
  return Pack(x, n, ThresholdKey(thr), -1, indices, values, capacity);
}

int64_t PackSelection(const float* x, int64_t n, const ThresholdSelection& selection,
                      int32_t* indices, float* values, int64_t capacity) {
  return Pack(x, n, ThresholdKey(selection.threshold), selection.equal_limit, indices, values,
              capacity);
}

void ScatterAdd(const int32_t* indices, const float* values, int64_t k, float* dense,
                int64_t /*n*/) {
  for (int64_t i = 0; i < k; ++i) dense[indices[i]] += values[i];
}

absl::Status ScatterAddChecked(const int32_t* indices, const float* values, int64_t k, float* dense,
                               int64_t n) {
  if (k < 0) return absl::InvalidArgumentError(absl::StrCat("ScatterAdd: negative count ", k));
  int32_t min = std::numeric_limits<int32_t>::max();
  int32_t max = std::numeric_limits<int32_t>::min();
  for (int64_t i = 0; i < k; ++i) {
    min = std::min(min, indices[i]);
    max = std::max(max, indices[i]);
  }
  if (k > 0 && (min < 0 || static_cast<int64_t>(max) >= n)) {
    for (int64_t i = 0; i < k; ++i) {
      if (indices[i] < 0 || indices[i] >= n) {
        return absl::InvalidArgumentError(absl::StrCat("ScatterAdd: entry ", i, " of ", k,
                                                       " has index ", indices[i], " outside [0, ",
                                                       n, ")"));
      }
    }
  }
  ScatterAdd(indices, values, k, dense, n);
  return absl::OkStatus();
}

}  // namespace hptrain::kernels
