// CUDA twin of topk_cpu.cc. Every decision is made from exact integer results (histograms of
// keys, counts), so selections equal the CPU's:
//   - radix select: per-pass digit histograms (shared-memory atomics, then global), the digit
//     picked on the device by the same RadixPick as the CPU; 3 passes of 11/10/10 bits;
//   - counting: per-block cub::BlockReduce, then one atomicAdd per block;
//   - packing: a stable compaction. Each tile of 2048 elements counts its "greater" and "equal"
//     elements (packed into one 64-bit word), an exclusive scan (cub::DeviceScan) gives every
//     tile its offsets, and each tile scans its threads' counts (cub::BlockScan) to place its
//     elements in index order. An element's position is (#greater before it) +
//     min(#equal before it, equal_limit), which also implements the tie cap.
#include <cuda_runtime.h>

#include <cstdint>
#include <cub/cub.cuh>
#include <limits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/topk/topk.h"
#include "kernels/topk/topk_common.h"

namespace hptrain::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kItemsPerThread = 8;
constexpr int64_t kTile = kThreads * kItemsPerThread;
constexpr int64_t kMaxGrid = 1024;  // grid-stride kernels: enough blocks to fill an H100

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

int GridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > kMaxGrid ? kMaxGrid : blocks));
}

__device__ __forceinline__ int64_t ThreadIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridStride() {
  return static_cast<int64_t>(blockDim.x) * gridDim.x;
}

struct MaxOp {
  __device__ __forceinline__ unsigned int operator()(unsigned int a, unsigned int b) const {
    return a > b ? a : b;
  }
};

// Key sources for the radix select: |x| of a float buffer, or precomputed keys.
struct AbsKeysOf {
  const float* x;
  __device__ __forceinline__ uint32_t operator()(int64_t i) const { return AbsKey(x[i]); }
};
struct KeysOf {
  const uint32_t* keys;
  __device__ __forceinline__ uint32_t operator()(int64_t i) const { return keys[i]; }
};

__global__ void InitRadixStateKernel(RadixState* state, int64_t k) {
  *state = RadixState();
  state->k_remaining = k;
}

template <typename Keys>
__global__ void RadixHistogramKernel(Keys keys, int64_t n, const RadixState* state, int pass,
                                     unsigned int* hist) {
  __shared__ unsigned int local[kRadixMaxBins];
  const int bins = RadixBins(pass);
  for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const RadixState st = *state;
  for (int64_t i = ThreadIndex(); i < n; i += GridStride()) {
    const uint32_t key = keys(i);
    if (RadixCandidate(key, st)) atomicAdd(&local[RadixDigit(key, pass)], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) {
    if (local[b] != 0) atomicAdd(&hist[b], local[b]);
  }
}

__global__ void RadixPickKernel(const unsigned int* hist, int pass, RadixState* state) {
  RadixPick(hist, pass, state);
}

struct CountResult {
  unsigned long long count;
  unsigned int max_key;
};

__global__ void CountAtLeastKernel(const float* x, int64_t n, uint32_t key, CountResult* out) {
  unsigned long long count = 0;
  unsigned int max = 0;
  for (int64_t i = ThreadIndex(); i < n; i += GridStride()) {
    const uint32_t k = AbsKey(x[i]);
    count += k >= key ? 1u : 0u;
    max = k > max ? k : max;
  }
  __shared__ typename cub::BlockReduce<unsigned long long, kThreads>::TempStorage count_temp;
  __shared__ typename cub::BlockReduce<unsigned int, kThreads>::TempStorage max_temp;
  count = cub::BlockReduce<unsigned long long, kThreads>(count_temp).Sum(count);
  max = cub::BlockReduce<unsigned int, kThreads>(max_temp).Reduce(max, MaxOp());
  if (threadIdx.x == 0) {
    atomicAdd(&out->count, count);
    atomicMax(&out->max_key, max);
  }
}

__global__ void GatherSampleKeysKernel(const float* x, int64_t num_samples, int64_t stride,
                                       uint64_t sample_key, uint32_t* keys) {
  for (int64_t i = ThreadIndex(); i < num_samples; i += GridStride()) {
    keys[i] = AbsKey(x[DgcSampleIndex(i, stride, sample_key)]);
  }
}

// Per tile: (#key > threshold_key) << 32 | #key == threshold_key.
__global__ void TileCountKernel(const float* x, int64_t n, uint32_t threshold_key,
                                unsigned long long* tile_counts) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kTile;
  unsigned int greater = 0, equal = 0;
  for (int j = 0; j < kItemsPerThread; ++j) {
    const int64_t i = base + j * kThreads + threadIdx.x;
    if (i < n) {
      const uint32_t key = AbsKey(x[i]);
      greater += key > threshold_key ? 1u : 0u;
      equal += key == threshold_key ? 1u : 0u;
    }
  }
  using Reduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename Reduce::TempStorage temp;
  const unsigned long long total =
      Reduce(temp).Sum((static_cast<unsigned long long>(greater) << 32) | equal);
  if (threadIdx.x == 0) tile_counts[blockIdx.x] = total;
}

__global__ void TileScatterKernel(const float* x, int64_t n, uint32_t threshold_key,
                                  int64_t equal_limit, const unsigned long long* tile_offsets,
                                  int32_t* indices, float* values, int64_t capacity) {
  using Load = cub::BlockLoad<float, kThreads, kItemsPerThread, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using Scan = cub::BlockScan<unsigned long long, kThreads>;
  __shared__ union {
    typename Load::TempStorage load;
    typename Scan::TempStorage scan;
  } temp;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kTile;
  const int valid = static_cast<int>(n - base < kTile ? n - base : kTile);
  float items[kItemsPerThread];  // blocked: items[j] is x[base + threadIdx.x * 8 + j]
  Load(temp.load).Load(x + base, items, valid, 0.0f);
  __syncthreads();
  unsigned int greater = 0, equal = 0;
  for (int j = 0; j < kItemsPerThread; ++j) {
    if (static_cast<int>(threadIdx.x) * kItemsPerThread + j < valid) {
      const uint32_t key = AbsKey(items[j]);
      greater += key > threshold_key ? 1u : 0u;
      equal += key == threshold_key ? 1u : 0u;
    }
  }
  unsigned long long prefix;
  Scan(temp.scan).ExclusiveSum((static_cast<unsigned long long>(greater) << 32) | equal, prefix);
  const unsigned long long tile = tile_offsets[blockIdx.x];
  int64_t greater_before = static_cast<int64_t>((tile >> 32) + (prefix >> 32));
  int64_t equal_before = static_cast<int64_t>((tile & 0xffffffffull) + (prefix & 0xffffffffull));
  for (int j = 0; j < kItemsPerThread; ++j) {
    const int local = static_cast<int>(threadIdx.x) * kItemsPerThread + j;
    if (local >= valid) break;
    const uint32_t key = AbsKey(items[j]);
    int64_t position = -1;
    if (key > threshold_key) {
      position = greater_before + (equal_before < equal_limit ? equal_before : equal_limit);
      ++greater_before;
    } else if (key == threshold_key) {
      if (equal_before < equal_limit) position = greater_before + equal_before;
      ++equal_before;
    }
    if (position >= 0 && position < capacity) {
      indices[position] = static_cast<int32_t>(base + local);
      values[position] = items[j];
    }
  }
}

__global__ void ScatterAddKernel(const int32_t* indices, const float* values, int64_t k,
                                 float* dense) {
  for (int64_t i = ThreadIndex(); i < k; i += GridStride()) {
    atomicAdd(&dense[indices[i]], values[i]);
  }
}

__global__ void FirstBadIndexKernel(const int32_t* indices, int64_t k, int64_t n,
                                    unsigned long long* first_bad) {
  for (int64_t i = ThreadIndex(); i < k; i += GridStride()) {
    if (indices[i] < 0 || indices[i] >= n) atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
}

// Synchronises `stream` and folds launch and execution errors into a Status.
absl::Status SyncStatus(cudaStream_t stream, const char* what) {
  absl::Status launch = TopkCudaStatus(cudaGetLastError(), what);
  if (!launch.ok()) return launch;
  return TopkCudaStatus(cudaStreamSynchronize(stream), what);
}

// Exact k-th largest key of keys(0..n-1), 1 <= k <= n. `state` and `hist` are device scratch.
template <typename Keys>
absl::Status RadixSelect(Keys keys, int64_t n, int64_t k, RadixState* state, unsigned int* hist,
                         cudaStream_t stream, KthLargest* out) {
  InitRadixStateKernel<<<1, 1, 0, stream>>>(state, k);
  for (int pass = 0; pass < kRadixPasses; ++pass) {
    absl::Status s = TopkCudaStatus(
        cudaMemsetAsync(hist, 0, RadixBins(pass) * sizeof(unsigned int), stream), "radix memset");
    if (!s.ok()) return s;
    RadixHistogramKernel<<<GridFor(n), kThreads, 0, stream>>>(keys, n, state, pass, hist);
    RadixPickKernel<<<1, 1, 0, stream>>>(hist, pass, state);
  }
  RadixState result;
  absl::Status s = TopkCudaStatus(
      cudaMemcpyAsync(&result, state, sizeof(result), cudaMemcpyDeviceToHost, stream),
      "radix select result copy");
  if (!s.ok()) return s;
  s = SyncStatus(stream, "radix select");
  if (!s.ok()) return s;
  out->key = result.prefix;
  out->count_greater = k - result.k_remaining;
  out->count_equal = result.count_equal;
  return absl::OkStatus();
}

// Fixed device scratch of the selection functions: radix state, histogram, count result.
constexpr size_t kStateOffset = 0;
constexpr size_t kHistOffset = AlignScratch(sizeof(RadixState));
constexpr size_t kCountOffset = kHistOffset + AlignScratch(kRadixMaxBins * sizeof(unsigned int));
constexpr size_t kFixedScratch = kCountOffset + AlignScratch(sizeof(CountResult));

// DGC search back end (topk_common.h). The first failure is kept and ends the search.
class CudaOps {
 public:
  CudaOps(const float* x, int64_t n, cudaStream_t stream)
      : x_(x), n_(n), stream_(stream), scratch_(stream), samples_(stream) {
    status_ = scratch_.Allocate(kFixedScratch, "DGC scratch cudaMallocAsync");
  }

  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }

  void GatherSample(int64_t num_samples, int64_t stride, uint64_t sample_key) {
    if (!ok()) return;
    status_ = samples_.Allocate(num_samples * sizeof(uint32_t), "DGC sample cudaMallocAsync");
    if (!ok()) return;
    num_samples_ = num_samples;
    GatherSampleKeysKernel<<<GridFor(num_samples), kThreads, 0, stream_>>>(
        x_, num_samples, stride, sample_key, samples_.At<uint32_t>(0));
  }

  uint32_t SampleKthLargest(int64_t k) {
    KthLargest kth;
    if (ok()) {
      status_ = RadixSelect(KeysOf{samples_.At<uint32_t>(0)}, num_samples_, k, State(), Hist(),
                            stream_, &kth);
    }
    return kth.key;
  }

  int64_t CountAtLeast(uint32_t key, uint32_t* max_key) {
    if (!ok()) return 0;
    CountResult* d_result = scratch_.At<CountResult>(kCountOffset);
    status_ = TopkCudaStatus(cudaMemsetAsync(d_result, 0, sizeof(CountResult), stream_),
                             "DGC count memset");
    if (!ok()) return 0;
    CountAtLeastKernel<<<GridFor(n_), kThreads, 0, stream_>>>(x_, n_, key, d_result);
    CountResult result{};
    status_ = TopkCudaStatus(
        cudaMemcpyAsync(&result, d_result, sizeof(result), cudaMemcpyDeviceToHost, stream_),
        "DGC count copy");
    if (ok()) status_ = SyncStatus(stream_, "DGC count");
    if (max_key != nullptr) *max_key = result.max_key;
    return static_cast<int64_t>(result.count);
  }

  KthLargest KthLargestOfAll(int64_t k) {
    KthLargest kth;
    if (ok()) status_ = RadixSelect(AbsKeysOf{x_}, n_, k, State(), Hist(), stream_, &kth);
    return kth;
  }

  RadixState* State() const { return scratch_.At<RadixState>(kStateOffset); }
  unsigned int* Hist() const { return scratch_.At<unsigned int>(kHistOffset); }

 private:
  const float* x_;
  int64_t n_;
  cudaStream_t stream_;
  StreamScratch scratch_;
  StreamScratch samples_;
  int64_t num_samples_ = 0;
  absl::Status status_;
};

// The stable compaction of the file comment. Returns the count, or -1 with the first `capacity`
// entries written.
absl::StatusOr<int64_t> PackKeys(const float* x, int64_t n, uint32_t threshold_key,
                                 int64_t equal_limit, int32_t* indices, float* values,
                                 int64_t capacity, cudaStream_t stream) {
  if (n <= 0) return 0;
  const int64_t limit = equal_limit < 0 ? std::numeric_limits<int64_t>::max() : equal_limit;
  const int64_t tiles = (n + kTile - 1) / kTile;
  const size_t words = static_cast<size_t>(tiles + 1);  // +1: the scan's last entry is the total
  size_t scan_bytes = 0;
  absl::Status s = TopkCudaStatus(
      cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<unsigned long long*>(nullptr),
                                    static_cast<unsigned long long*>(nullptr),
                                    static_cast<int64_t>(words), stream),
      "pack scan size query");
  if (!s.ok()) return s;
  const size_t counts_offset = 0;
  const size_t offsets_offset = AlignScratch(words * sizeof(unsigned long long));
  const size_t scan_offset = offsets_offset + AlignScratch(words * sizeof(unsigned long long));
  StreamScratch scratch(stream);
  s = scratch.Allocate(scan_offset + scan_bytes, "pack scratch cudaMallocAsync");
  if (!s.ok()) return s;
  unsigned long long* counts = scratch.At<unsigned long long>(counts_offset);
  unsigned long long* offsets = scratch.At<unsigned long long>(offsets_offset);
  s = TopkCudaStatus(cudaMemsetAsync(counts + tiles, 0, sizeof(unsigned long long), stream),
                     "pack memset");
  if (!s.ok()) return s;
  TileCountKernel<<<static_cast<unsigned int>(tiles), kThreads, 0, stream>>>(x, n, threshold_key,
                                                                             counts);
  s = TopkCudaStatus(
      cub::DeviceScan::ExclusiveSum(scratch.At<void>(scan_offset), scan_bytes, counts, offsets,
                                    static_cast<int64_t>(words), stream),
      "pack scan");
  if (!s.ok()) return s;
  unsigned long long totals = 0;
  s = TopkCudaStatus(
      cudaMemcpyAsync(&totals, offsets + tiles, sizeof(totals), cudaMemcpyDeviceToHost, stream),
      "pack total copy");
  if (!s.ok()) return s;
  s = SyncStatus(stream, "pack count");
  if (!s.ok()) return s;
  const int64_t greater = static_cast<int64_t>(totals >> 32);
  const int64_t equal = static_cast<int64_t>(totals & 0xffffffffull);
  const int64_t count = greater + (equal < limit ? equal : limit);
  if (capacity > 0 && count > 0) {
    TileScatterKernel<<<static_cast<unsigned int>(tiles), kThreads, 0, stream>>>(
        x, n, threshold_key, limit, offsets, indices, values, capacity);
    s = TopkCudaStatus(cudaGetLastError(), "pack scatter launch");
    if (!s.ok()) return s;
  }
  return count > capacity ? -1 : count;
}

}  // namespace

absl::StatusOr<ThresholdSelection> DgcSelectCuda(const float* x, int64_t n,
                                                 const DgcThresholdOptions& options, uint64_t seed,
                                                 uint64_t step, void* stream) {
  CudaOps ops(x, n, AsStream(stream));
  const ThresholdSelection selection = SearchDgcThreshold(ops, n, options, seed, step);
  if (!ops.ok()) return ops.status();
  return selection;
}

absl::Status TopKExactCuda(const float* x, int64_t n, int64_t k, int32_t* indices, float* values,
                           void* stream) {
  if (k > n) k = n;
  if (k <= 0) return absl::OkStatus();
  const cudaStream_t s = AsStream(stream);
  StreamScratch scratch(s);
  absl::Status status = scratch.Allocate(kFixedScratch, "top-k scratch cudaMallocAsync");
  if (!status.ok()) return status;
  KthLargest kth;
  status = RadixSelect(AbsKeysOf{x}, n, k, scratch.At<RadixState>(kStateOffset),
                       scratch.At<unsigned int>(kHistOffset), s, &kth);
  if (!status.ok()) return status;
  absl::StatusOr<int64_t> packed =
      PackKeys(x, n, kth.key, k - kth.count_greater, indices, values, k, s);
  if (!packed.ok()) return packed.status();
  if (*packed != k) {
    return absl::InternalError(absl::StrCat("top-k packed ", *packed, " of ", k, " elements"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PackAboveThresholdCuda(const float* x, int64_t n, float thr,
                                               int32_t* indices, float* values, int64_t capacity,
                                               void* stream) {
  return PackKeys(x, n, ThresholdKey(thr), -1, indices, values, capacity, AsStream(stream));
}

absl::StatusOr<int64_t> PackSelectionCuda(const float* x, int64_t n,
                                          const ThresholdSelection& selection, int32_t* indices,
                                          float* values, int64_t capacity, void* stream) {
  return PackKeys(x, n, ThresholdKey(selection.threshold), selection.equal_limit, indices, values,
                  capacity, AsStream(stream));
}

void ScatterAddCuda(const int32_t* indices, const float* values, int64_t k, float* dense,
                    int64_t /*n*/, void* stream) {
  if (k <= 0) return;
  ScatterAddKernel<<<GridFor(k), kThreads, 0, AsStream(stream)>>>(indices, values, k, dense);
}

absl::Status ScatterAddCheckedCuda(const int32_t* indices, const float* values, int64_t k,
                                   float* dense, int64_t n, void* stream) {
  if (k < 0) return absl::InvalidArgumentError(absl::StrCat("ScatterAdd: negative count ", k));
  if (k == 0) return absl::OkStatus();
  const cudaStream_t s = AsStream(stream);
  StreamScratch scratch(s);
  absl::Status status = scratch.Allocate(sizeof(unsigned long long), "ScatterAdd cudaMallocAsync");
  if (!status.ok()) return status;
  unsigned long long* first_bad = scratch.At<unsigned long long>(0);
  status = TopkCudaStatus(cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), s),
                          "ScatterAdd memset");
  if (!status.ok()) return status;
  FirstBadIndexKernel<<<GridFor(k), kThreads, 0, s>>>(indices, k, n, first_bad);
  unsigned long long bad = 0;
  status = TopkCudaStatus(cudaMemcpyAsync(&bad, first_bad, sizeof(bad), cudaMemcpyDeviceToHost, s),
                          "ScatterAdd check copy");
  if (!status.ok()) return status;
  status = SyncStatus(s, "ScatterAdd index check");
  if (!status.ok()) return status;
  if (bad < static_cast<unsigned long long>(k)) {
    int32_t index = 0;
    status =
        TopkCudaStatus(cudaMemcpy(&index, indices + bad, sizeof(index), cudaMemcpyDeviceToHost),
                       "ScatterAdd bad index copy");
    if (!status.ok()) return status;
    return absl::InvalidArgumentError(absl::StrCat("ScatterAdd: entry ", bad, " of ", k,
                                                   " has index ", index, " outside [0, ", n, ")"));
  }
  ScatterAddCuda(indices, values, k, dense, n, stream);
  return TopkCudaStatus(cudaGetLastError(), "ScatterAdd launch");
}

}  // namespace hptrain::kernels
