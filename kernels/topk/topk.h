// Magnitude selection for sparse gradient communication (Top-k and DGC, docs/algorithms.md §6): pick
// the elements of a flat fp32 buffer with the largest |x|, move them into an (indices, values)
// pair, and add such pairs back into a dense buffer on the receiving side.
//
// Ordering. "Largest" always means largest |x|, compared through AbsKey() (topk_common.h): the
// fp32 bits with the sign cleared. For numbers this is the order of |x| (-0 == +0); a NaN ranks
// above +Inf, so a NaN gradient is selected and sent (and shows up at the receiver) instead of
// staying in the residual forever. Equal magnitudes are broken by the lower index.
//
// Threshold selection. A selection is a threshold plus an optional cap on ties: it takes every
// element with |x| > threshold, and of the elements with |x| == threshold either all
// (equal_limit < 0) or only the first equal_limit in index order. The cap is what lets an exact
// top-k, or DGC on data with many equal values, select exactly the count it wants.
//
// DGC threshold search (DgcSelect), one numbered narrative:
//   1. k = DgcTargetCount(n, density) (ceil, at least 1); the accepted band is
//      [ceil(0.8·k), floor(1.3·k)]. If k >= n everything is selected (method kAll).
//   2. Sample s = min(n, max(ceil(sample_ratio·n), min_samples)) elements, stratified: split
//      [0, s·stride) into s strata of stride = floor(n/s) elements and take one element per
//      stratum at an offset hashed from (seed, step, stratum). Same seed and step give the same
//      positions on every rank and on CPU and GPU.
//   3. threshold = the k_s-th largest sampled |x|, k_s = ceil(density·s). Count the elements it
//      selects; inside the band: done (kSampled).
//   4. Otherwise adjust, at most max_adjustments counts, keeping a bracket of one threshold
//      known to select too many and one known to select too few (initially the sample threshold
//      and either 0 or just above max|x|). The first probe is the sample order statistic that,
//      scaled by the count just seen, should select 2·hi (or lo/2) elements; later probes bisect
//      the bracket on the threshold's bit pattern (which orders like |x|: a bisection in
//      log-magnitude, suited to heavy tails). The first threshold inside the band wins
//      (kAdjusted).
//   5. Last resort (kExact): the exact k-th largest |x| (radix select). If the elements equal to
//      it push the count above the band, cap the ties (equal_limit) so that exactly k are taken.
// Every step is exact integer arithmetic on keys and counts, so the CPU and the CUDA twin return
// identical selections for identical data.
//
// CPU functions are single-threaded, keep no state and are thread-safe; buffers are owned by the
// caller. n must be < 2^31 (indices are int32). CUDA twins take device pointers; the ones that
// must return a host-side number block on their stream and allocate scratch with cudaMallocAsync
// on it (stream-ordered, from the device's default pool).
#ifndef HPTRAIN_KERNELS_TOPK_TOPK_H_
#define HPTRAIN_KERNELS_TOPK_TOPK_H_

#include <cstdint>

#include "absl/status/status.h"
#ifdef HPTRAIN_HAVE_CUDA
#include "absl/status/statusor.h"
#endif

namespace hptrain::kernels {

// A threshold selection (see the file comment) and how it was found.
struct ThresholdSelection {
  enum class Method {
    kAll,       // k >= n: every element (threshold 0)
    kSampled,   // the sample's threshold was inside the band
    kAdjusted,  // an adjustment step (step 4) was inside the band
    kExact,     // exact k-th largest, ties capped if needed
  };

  float threshold = 0.0f;    // select |x| >= threshold (>= 0)
  int64_t equal_limit = -1;  // < 0: every |x| == threshold; else only the first equal_limit of them
  int64_t count = 0;         // number of elements the selection takes (exact)
  Method method = Method::kAll;
  int count_passes = 0;  // full passes over x spent counting (1 + adjustment steps)
};

struct DgcThresholdOptions {
  double density = 0.001;      // fraction to select, in (0, 1]; k = DgcTargetCount(n, density)
  double sample_ratio = 0.01;  // fraction of elements sampled (DGC's public code: 1 %)
  int64_t min_samples = 2048;  // lower bound on the sample size (all of x when n is smaller)
  double lower_ratio = 0.8;    // accepted band [lower_ratio·k, upper_ratio·k]
  double upper_ratio = 1.3;
  int max_adjustments = 10;  // counting passes allowed in step 4
};

// k = ceil(density·n) clamped to [1, n] (0 when n == 0). An excess below 1e-6 is ignored so that
// a decimal density like 0.001 of 10^6 gives 1000, not 1001.
int64_t DgcTargetCount(int64_t n, double density);

// Writes the k elements with the largest |x| (ties: lower index first) to indices/values in
// ascending index order; values[i] = x[indices[i]] (sign kept). k is clamped to [0, n], so
// exactly min(max(k, 0), n) entries are written. Deterministic. O(n): radix select of the k-th
// largest key (3 histogram passes) and one packing pass; no allocation.
void TopKExact(const float* x, int64_t n, int64_t k, int32_t* indices, float* values);

// The DGC threshold search (file comment) for options.density. Returns the selection; its count
// is exact and within [ceil(lower_ratio·k), floor(upper_ratio·k)] unless n == 0 (count 0,
// threshold +Inf) or, only when more than upper_ratio·k elements are ±Inf or NaN, all of those.
// Allocates the sample (s keys).
ThresholdSelection DgcSelect(const float* x, int64_t n, const DgcThresholdOptions& options,
                             uint64_t seed, uint64_t step);

// DgcSelect(...).threshold with the other options at their defaults. Caution: a threshold alone
// cannot express a tie cap; when DgcSelect needed one (method kExact with equal_limit >= 0),
// PackAboveThreshold with this threshold selects more than 1.3·k elements. Use DgcSelect and
// PackSelection to get the count in the band in every case.
float DgcThreshold(const float* x, int64_t n, double density, double sample_ratio, uint64_t seed,
                   uint64_t step);

// Number of elements with |x| >= thr. thr <= 0 or NaN counts every element.
int64_t CountAboveThreshold(const float* x, int64_t n, float thr);

// Writes every element with |x| >= thr (thr <= 0 or NaN: every element) to indices/values in
// ascending index order and returns how many. Never writes past `capacity` entries: if more
// elements qualify, returns -1 with the first `capacity` of them written (retry with a capacity
// from CountAboveThreshold). Entries between the returned count and `capacity` may be
// overwritten (scratch of the branch-free packing loop).
int64_t PackAboveThreshold(const float* x, int64_t n, float thr, int32_t* indices, float* values,
                           int64_t capacity);

// As PackAboveThreshold for a ThresholdSelection (honours equal_limit). With capacity >=
// selection.count it returns selection.count.
int64_t PackSelection(const float* x, int64_t n, const ThresholdSelection& selection,
                      int32_t* indices, float* values, int64_t capacity);

// dense[indices[i]] += values[i] for i < k, in order (duplicates add up). The indices must lie
// in [0, n); they are not checked (use ScatterAddChecked for data from the network).
void ScatterAdd(const int32_t* indices, const float* values, int64_t k, float* dense, int64_t n);

// ScatterAdd for untrusted input. Returns InvalidArgument naming the first entry whose index is
// outside [0, n) (or k < 0), and then leaves `dense` untouched; OK after adding.
absl::Status ScatterAddChecked(const int32_t* indices, const float* values, int64_t k, float* dense,
                               int64_t n);

#ifdef HPTRAIN_HAVE_CUDA
// Device twins. Pointers are device memory, `stream` a cudaStream_t (nullptr: default stream).
// Errors: CUDA failures map to a Status as in runtime/comm/nccl/cuda_check.h (out of memory ->
// ResourceExhausted, others mostly Internal), with the failing call named.

// Same selection as DgcSelect for the same data, seed and step. Blocks on `stream` (a few small
// device-to-host copies per count pass).
absl::StatusOr<ThresholdSelection> DgcSelectCuda(const float* x, int64_t n,
                                                 const DgcThresholdOptions& options, uint64_t seed,
                                                 uint64_t step, void* stream);

// Same output as TopKExact. Blocks until the k-th largest key is known; the outputs are written
// asynchronously on `stream` after that.
absl::Status TopKExactCuda(const float* x, int64_t n, int64_t k, int32_t* indices, float* values,
                           void* stream);

// Same results as PackAboveThreshold / PackSelection (order and the -1 rule included), by a
// stable compaction (per-tile counts, an exclusive scan, a per-tile scatter). Blocks until the
// count is known; the outputs are written asynchronously on `stream` after that.
absl::StatusOr<int64_t> PackAboveThresholdCuda(const float* x, int64_t n, float thr,
                                               int32_t* indices, float* values, int64_t capacity,
                                               void* stream);
absl::StatusOr<int64_t> PackSelectionCuda(const float* x, int64_t n,
                                          const ThresholdSelection& selection, int32_t* indices,
                                          float* values, int64_t capacity, void* stream);

// ScatterAdd with atomicAdd: duplicate indices are added in an unspecified order, so sums agree
// with the CPU bit for bit only when every partial sum is exact (e.g. integer-valued data);
// otherwise within fp32 rounding. Asynchronous, unchecked.
void ScatterAddCuda(const int32_t* indices, const float* values, int64_t k, float* dense, int64_t n,
                    void* stream);

// ScatterAddChecked on the device: validates all indices first (blocks for the verdict), then
// enqueues the scatter. InvalidArgument names the first bad entry; `dense` is then untouched.
absl::Status ScatterAddCheckedCuda(const int32_t* indices, const float* values, int64_t k,
                                   float* dense, int64_t n, void* stream);
#endif  // HPTRAIN_HAVE_CUDA

}  // namespace hptrain::kernels

#endif  // HPTRAIN_KERNELS_TOPK_TOPK_H_
