// Pieces shared by topk_cpu.cc and topk_cuda.cu so that both make the same selections: the
// magnitude key, the DGC sample positions, the radix-select digit step, and the DGC threshold
// search itself (a host-side driver over back-end "ops" that count and select exactly).
#ifndef HPTRAIN_KERNELS_TOPK_TOPK_COMMON_H_
#define HPTRAIN_KERNELS_TOPK_TOPK_COMMON_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/topk/topk.h"
#include "kernels/common/host_device.h"

#ifdef __CUDACC__
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#endif

// Same definition as kernels/update/update_common.h (an identical redefinition is allowed).

namespace hptrain::kernels {

// |x| as an order key: the fp32 bits without the sign (see topk.h, "Ordering").
HPTRAIN_HOST_DEVICE uint32_t AbsKey(float x) { return FloatBits(x) & 0x7fffffffu; }

// The non-negative float whose AbsKey is `key`.
HPTRAIN_HOST_DEVICE float KeyToFloat(uint32_t key) { return BitsToFloat(key); }

// Key of a threshold: |x| >= thr  <=>  AbsKey(x) >= ThresholdKey(thr) for every non-NaN x.
// thr <= 0 and NaN give 0, which selects everything.
HPTRAIN_HOST_DEVICE uint32_t ThresholdKey(float thr) { return thr > 0.0f ? AbsKey(thr) : 0u; }

// The largest key a threshold may take: +Inf. Keys above it are NaNs, which a float threshold
// cannot name (ThresholdKey(NaN) is 0).
constexpr uint32_t kMaxThresholdKey = 0x7f800000u;

// SplitMix64's output function (runtime/base/splitmix64.h): a bijective 64-bit mix.
HPTRAIN_HOST_DEVICE uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Per-(seed, step) key of the DGC sample positions.
HPTRAIN_HOST_DEVICE uint64_t DgcSampleKey(uint64_t seed, uint64_t step) {
  return Mix64(seed ^ Mix64(step + 0x9e3779b97f4a7c15ull));
}

// Position of sample i: one element of stratum [i·stride, (i+1)·stride), picked by hash.
HPTRAIN_HOST_DEVICE int64_t DgcSampleIndex(int64_t i, int64_t stride, uint64_t sample_key) {
  const uint64_t offset =
      stride > 1 ? Mix64(sample_key + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull) %
                       static_cast<uint64_t>(stride)
                 : 0;
  return i * stride + static_cast<int64_t>(offset);
}

// Radix select over 31-bit keys, most significant digit first: 11, 10 and 10 bits.
constexpr int kRadixPasses = 3;
constexpr int kRadixMaxBins = 2048;

HPTRAIN_HOST_DEVICE int RadixShift(int pass) { return pass == 0 ? 20 : (pass == 1 ? 10 : 0); }
HPTRAIN_HOST_DEVICE int RadixBins(int pass) { return pass == 0 ? 2048 : 1024; }
HPTRAIN_HOST_DEVICE uint32_t RadixDigit(uint32_t key, int pass) {
  return (key >> RadixShift(pass)) & static_cast<uint32_t>(RadixBins(pass) - 1);
}

// State of a radix select for the k-th largest key, refined one digit per pass. Keys whose bits
// above the current digit equal `prefix` (under `mask`) are the remaining candidates, and the
// answer is the k_remaining-th largest of them.
struct RadixState {
  uint32_t prefix = 0;
  uint32_t mask = 0;
  int64_t k_remaining = 0;  // after the last pass: how many keys equal to `prefix` to take
  int64_t count_equal = 0;  // after the last pass: how many keys equal `prefix`
};

HPTRAIN_HOST_DEVICE bool RadixCandidate(uint32_t key, const RadixState& state) {
  return (key & state.mask) == state.prefix;
}

// One radix step: given the histogram of the candidates' digits for `pass`, picks the digit that
// holds the k_remaining-th largest candidate and narrows the state to it.
template <typename Count>
HPTRAIN_HOST_DEVICE void RadixPick(const Count* hist, int pass, RadixState* state) {
  int64_t above = 0;
  int digit = RadixBins(pass) - 1;
  for (; digit > 0; --digit) {
    if (above + static_cast<int64_t>(hist[digit]) >= state->k_remaining) break;
    above += static_cast<int64_t>(hist[digit]);
  }
  const int shift = RadixShift(pass);
  state->k_remaining -= above;
  state->prefix |= static_cast<uint32_t>(digit) << shift;
  state->mask |= static_cast<uint32_t>(RadixBins(pass) - 1) << shift;
  state->count_equal = static_cast<int64_t>(hist[digit]);
}

// The k-th largest key of a set and how the set splits around it.
struct KthLargest {
  uint32_t key = 0;
  int64_t count_greater = 0;  // < k
  int64_t count_equal = 0;    // count_greater + count_equal >= k
};

// DGC momentum correction for one element (dgc.h): u = m·u + g; v = v + u, each operation rounded
// separately. nvcc would contract m·u + g into an FMA, so the device spells the roundings out;
// the CPU library is built with -ffp-contract=off for the same reason.
HPTRAIN_HOST_DEVICE void DgcMomentumElement(float g, float momentum, float& u, float& v) {
#ifdef __CUDA_ARCH__
  u = __fadd_rn(__fmul_rn(momentum, u), g);
  v = __fadd_rn(v, u);
#else
  u = momentum * u + g;
  v = v + u;
#endif
}

// ClipToNorm's scale factor from the norm: torch.nn.utils.clip_grad_norm_'s formula; 1 (no change)
// when the norm is within max_norm or not finite.
HPTRAIN_HOST_DEVICE float ClipCoefficient(double norm, float max_norm) {
  const float norm_f = static_cast<float>(norm);
  if (!(norm_f <= 3.4e38f)) return 1.0f;  // Inf or NaN
  const float coef = max_norm / (norm_f + 1e-6f);
  return coef < 1.0f ? coef : 1.0f;
}

// DGC threshold search of topk.h's file comment, steps 1-5, over a back end `ops` with
//   bool ok() const;               // false after any back-end failure (results then unused)
//   void GatherSample(int64_t num_samples, int64_t stride, uint64_t sample_key);
//   uint32_t SampleKthLargest(int64_t k);            // k-th largest key of the gathered sample
//   int64_t CountAtLeast(uint32_t key, uint32_t* max_key);  // #{AbsKey(x) >= key}; max key
//   KthLargest KthLargestOfAll(int64_t k);           // over all of x
// All of them are exact, so every back end takes the same branches for the same data.
template <typename Ops>
ThresholdSelection SearchDgcThreshold(Ops& ops, int64_t n, const DgcThresholdOptions& options,
                                      uint64_t seed, uint64_t step) {
  using Method = ThresholdSelection::Method;
  ThresholdSelection sel;
  if (n <= 0) {
    sel.threshold = std::numeric_limits<float>::infinity();
    return sel;
  }
  // 1. Target and band.
  const int64_t k = DgcTargetCount(n, options.density);
  if (k >= n) {
    sel.count = n;
    return sel;
  }
  const double kd = static_cast<double>(k);
  int64_t lo = static_cast<int64_t>(std::ceil(options.lower_ratio * kd - 1e-9));
  int64_t hi = static_cast<int64_t>(std::floor(options.upper_ratio * kd + 1e-9));
  if (lo > k) lo = k;
  if (lo < 1) lo = 1;
  if (hi < k) hi = k;
  auto in_band = [&](int64_t count) { return count >= lo && count <= hi; };
  auto accept = [&](uint32_t key, int64_t count, Method method) {
    sel.threshold = KeyToFloat(key);
    sel.count = count;
    sel.method = method;
    return sel;
  };
  auto clamp_key = [](uint32_t key) { return key > kMaxThresholdKey ? kMaxThresholdKey : key; };

  // 2-3. Sampled threshold.
  const double ratio_samples = std::ceil(options.sample_ratio * static_cast<double>(n));
  int64_t s = ratio_samples > static_cast<double>(n) ? n : static_cast<int64_t>(ratio_samples);
  if (s < options.min_samples) s = options.min_samples;
  if (s > n) s = n;
  if (s < 1) s = 1;
  int64_t k_s = static_cast<int64_t>(std::ceil(options.density * static_cast<double>(s) - 1e-6));
  if (k_s < 1) k_s = 1;
  if (k_s > s) k_s = s;
  ops.GatherSample(s, n / s, DgcSampleKey(seed, step));
  const uint32_t key = clamp_key(ops.SampleKthLargest(k_s));
  uint32_t max_key = 0;
  const int64_t count = ops.CountAtLeast(key, &max_key);
  sel.count_passes = 1;
  if (!ops.ok()) return sel;
  if (in_band(count)) return accept(key, count, Method::kSampled);

  // 4. Adjustment. Invariant: count(low) > hi and count(high) < lo, so the band lies between.
  // The first probe is the sample order statistic expected (scaling by the count just seen) to
  // select hi·2 (threshold too high) or lo/2 (too low) elements, which usually brackets the band
  // tightly; bisection on keys follows.
  uint32_t low, high, probe;
  bool have_probe = false;
  if (count > hi) {
    low = key;
    high = max_key >= kMaxThresholdKey ? kMaxThresholdKey : max_key + 1;  // count 0 < lo
    const double rank = std::floor(static_cast<double>(k_s) * 0.5 * lo / count);
    if (rank >= 1.0) {
      probe = clamp_key(ops.SampleKthLargest(static_cast<int64_t>(rank)));
      have_probe = probe > low && probe < high;
    }
  } else {
    // Threshold 0 counts n >= k >= lo: either it is inside the band too, or count(0) > hi.
    if (n <= hi) return accept(0, n, Method::kAdjusted);
    low = 0;
    high = key;
    const double rank =
        std::ceil(static_cast<double>(k_s) * 2.0 * hi / static_cast<double>(count > 0 ? count : 1));
    probe = ops.SampleKthLargest(rank >= static_cast<double>(s) ? s : static_cast<int64_t>(rank));
    have_probe = probe > low && probe < high;
  }
  int adjustments = 0;
  while (adjustments < options.max_adjustments && high - low > 1) {
    const uint32_t mid = have_probe ? probe : low + (high - low) / 2;
    have_probe = false;
    const int64_t c = ops.CountAtLeast(mid, nullptr);
    ++adjustments;
    ++sel.count_passes;
    if (!ops.ok()) return sel;
    if (in_band(c)) return accept(mid, c, Method::kAdjusted);
    if (c > hi) {
      low = mid;
    } else {
      high = mid;
    }
  }

  // 5. Exact k-th largest, ties capped when they overflow the band.
  KthLargest kth = ops.KthLargestOfAll(k);
  if (!ops.ok()) return sel;
  if (kth.key > kMaxThresholdKey) {  // at least k NaNs: take every NaN and Inf
    return accept(kMaxThresholdKey, ops.CountAtLeast(kMaxThresholdKey, nullptr), Method::kExact);
  }
  if (kth.count_greater + kth.count_equal <= hi) {
    return accept(kth.key, kth.count_greater + kth.count_equal, Method::kExact);
  }
  sel.equal_limit = k - kth.count_greater;
  return accept(kth.key, k, Method::kExact);
}

#ifdef __CUDACC__
// cudaError_t -> Status for the topk/DGC twins, with runtime/comm/nccl/cuda_check.h's mapping
// (that header also needs nccl.h, which the kernels do not link).
inline absl::Status TopkCudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
      return absl::InvalidArgumentError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

// A device allocation from the stream-ordered pool, freed (in stream order) when it goes out of
// scope, so kernels already enqueued on the stream may still use it.
class StreamScratch {
 public:
  explicit StreamScratch(cudaStream_t stream) : stream_(stream) {}
  ~StreamScratch() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;

  absl::Status Allocate(size_t bytes, const char* what) {
    return TopkCudaStatus(cudaMallocAsync(&ptr_, bytes == 0 ? 1 : bytes, stream_), what);
  }
  // The allocation at `offset` bytes (callers keep offsets aligned to 256).
  template <typename T>
  T* At(size_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(ptr_) + offset);
  }

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

// Rounds a scratch offset up to 256 bytes.
constexpr size_t AlignScratch(size_t bytes) { return (bytes + 255) / 256 * 256; }
#endif  // __CUDACC__

}  // namespace hptrain::kernels

#endif  // HPTRAIN_KERNELS_TOPK_TOPK_COMMON_H_
