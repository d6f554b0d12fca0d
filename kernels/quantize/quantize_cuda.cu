// CUDA twin of quantize_cpu.cc. Same two passes, same math (quantize_common.h):
//   1. RangeKernel: one warp per piece of at most kPiece elements of a bucket; the warp's min/max
//      go into meta with atomicMax on order-preserving integer encodings (meta doubles as the
//      scratch, zeroed first; the min slot holds the complement so that both slots use
//      atomicMax), and a non-finite input sets bit kQuantizeNonFinite of the error flag.
//      FinalizeKernel then turns each bucket's slots into (lo, delta) with BucketScale.
//   2. EncodeKernel: one thread per element, warp-aligned so that the 8/bits lanes sharing a
//      code byte OR their codes together with shuffles and one lane stores the byte. It returns
//      at once when the flag is set, which is how codes (and the residual) stay untouched.
// Min and max do not depend on the order of the reduction once ±0 are canonicalized, and every
// element's code depends only on its value, its bucket's (lo, delta) and its index, so the bytes
// equal the CPU's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/rng.h"
#include "kernels/quantize/quantize.h"
#include "kernels/quantize/quantize_common.h"

namespace hptrain::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpSize = 32;
constexpr int64_t kPiece = 4096;  // elements one warp reduces in pass 1
constexpr unsigned kFullMask = 0xFFFFFFFFu;

int Blocks(int64_t threads) {
  const int64_t blocks = (threads + kThreads - 1) / kThreads;
  return static_cast<int>(std::clamp<int64_t>(blocks, 1, 65535));
}

// Like runtime/comm/nccl/cuda_check.h's CudaStatus, which needs NCCL's headers.
absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  if (err == cudaErrorInvalidValue || err == cudaErrorInvalidDevicePointer) {
    return absl::InvalidArgumentError(message);
  }
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    return absl::FailedPreconditionError(message);
  }
  return absl::InternalError(message);
}

// A float's bits mapped so that unsigned order is float order (−0 below +0; NaN never stored).
__device__ __forceinline__ uint32_t OrderedBits(float v) {
  const uint32_t b = __float_as_uint(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float FromOrderedBits(uint32_t o) {
  return __uint_as_float((o & 0x80000000u) ? (o & 0x7FFFFFFFu) : ~o);
}

// i / bucket_size, in 32 bits when everything fits (a 64-bit division is many instructions).
__device__ __forceinline__ int64_t BucketOf(int64_t i, int64_t bucket_size, bool small) {
  return small ? static_cast<int64_t>(static_cast<uint32_t>(i) / static_cast<uint32_t>(bucket_size))
               : i / bucket_size;
}

struct RangeKernelArgs {
  const float* g;
  const float* r;  // residual or nullptr
  int64_t n;
  int64_t bucket_size;
  int64_t pieces_per_bucket;
  int64_t pieces;
  uint32_t* slots;  // meta as 2 uint32 per bucket: ~ordered(min), ordered(max)
  int* error;
};

__global__ void RangeKernel(RangeKernelArgs a) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) / kWarpSize;
  for (int64_t p = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
       p < a.pieces; p += warps) {
    const int64_t b = p / a.pieces_per_bucket;
    const int64_t begin = b * a.bucket_size + (p % a.pieces_per_bucket) * kPiece;
    const int64_t bucket_end = (b + 1) * a.bucket_size < a.n ? (b + 1) * a.bucket_size : a.n;
    const int64_t end = begin + kPiece < bucket_end ? begin + kPiece : bucket_end;
    float mn = __int_as_float(0x7F800000), mx = -mn;
    uint32_t ex = 0;
    for (int64_t i = begin + lane; i < end; i += kWarpSize) {
      const float v = a.r != nullptr ? AddRn(a.g[i], a.r[i]) : a.g[i];
      const uint32_t e = ExponentField(v);
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
      ex = e > ex ? e : ex;
    }
    for (int off = kWarpSize / 2; off > 0; off /= 2) {
      const float omn = __shfl_xor_sync(kFullMask, mn, off);
      const float omx = __shfl_xor_sync(kFullMask, mx, off);
      const uint32_t oex = __shfl_xor_sync(kFullMask, ex, off);
      mn = omn < mn ? omn : mn;
      mx = omx > mx ? omx : mx;
      ex = oex > ex ? oex : ex;
    }
    if (lane == 0) {
      if (ex == kFloatExponentMask) atomicOr(a.error, kQuantizeNonFinite);
      atomicMax(&a.slots[2 * b], ~OrderedBits(mn));
      atomicMax(&a.slots[2 * b + 1], OrderedBits(mx));
    }
  }
}

__global__ void FinalizeKernel(uint32_t* slots, int64_t buckets, float levels, bool abs_max,
                               int* error) {
  float* meta = reinterpret_cast<float*>(slots);
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < buckets;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float mn = FromOrderedBits(~slots[2 * b]);
    const float mx = FromOrderedBits(slots[2 * b + 1]);
    float lo = 0.0f, delta = 0.0f;
    if (BucketScale(mn, mx, levels, abs_max, &lo, &delta) != 0) {
      atomicOr(error, kQuantizeRangeOverflow);
    }
    meta[2 * b] = lo;
    meta[2 * b + 1] = delta;
  }
}

struct EncodeKernelArgs {
  const float* g;
  float* r;  // residual or nullptr
  int64_t n;
  int64_t bucket_size;
  bool small;  // n and bucket_size fit in 32 bits
  float levels;
  uint64_t key;         // RngKey(seed, step)
  uint64_t block_key0;  // RngBlockKey(key, 0)
  const float* meta;
  uint8_t* codes;
  const int* error;
};

template <int kBits, bool kStochastic, bool kFeedback>
__global__ void EncodeKernel(EncodeKernelArgs a) {
  if (*a.error != 0) return;  // the same for every thread: a whole-grid early exit
  constexpr int kPer = 8 / kBits;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t first =
      (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) - lane;  // warp's first thread
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  // Every lane runs every iteration (the shuffles need the whole warp); lanes past n add 0.
  for (int64_t base = first; base < a.n; base += stride) {
    const int64_t i = base + lane;
    uint32_t q = 0;
    if (i < a.n) {
      const int64_t b = BucketOf(i, a.bucket_size, a.small);
      const float lo = a.meta[2 * b];
      const float delta = a.meta[2 * b + 1];
      const float x = kFeedback ? AddRn(a.g[i], a.r[i]) : a.g[i];
      float u = 0.5f;
      if (kStochastic) {
        const uint32_t hi = static_cast<uint32_t>(i >> 32);
        const uint64_t block_key = hi == 0 ? a.block_key0 : RngBlockKey(a.key, hi);
        u = RngUniform24(RngBits(block_key, static_cast<uint32_t>(i)));
      }
      q = QuantizeElement(x, lo, delta, u, a.levels);
      if (kFeedback) a.r[i] = SubRn(x, DequantizeElement(q, lo, delta));
    }
    uint32_t v = q << ((lane % kPer) * kBits);
    for (int off = 1; off < kPer; off *= 2) v |= __shfl_xor_sync(kFullMask, v, off);
    if (lane % kPer == 0 && i < a.n) a.codes[i / kPer] = static_cast<uint8_t>(v);
  }
}

struct DecodeKernelArgs {
  const float* meta;
  const uint8_t* codes;
  int64_t n;
  int64_t bucket_size;
  bool small;
  float* out;
};

template <int kBits, bool kAccumulate>
__global__ void DecodeKernel(DecodeKernelArgs a) {
  constexpr int kPer = 8 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = BucketOf(i, a.bucket_size, a.small);
    const uint32_t q = (static_cast<uint32_t>(a.codes[i / kPer]) >> ((i % kPer) * kBits)) & kMask;
    const float v = DequantizeElement(q, a.meta[2 * b], a.meta[2 * b + 1]);
    a.out[i] = kAccumulate ? AddRn(a.out[i], v) : v;
  }
}

__global__ void ResidualKernel(const float* x, const float* decoded, float* residual, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    residual[i] = SubRn(x[i], decoded[i]);
  }
}

template <int kBits>
void LaunchEncode(bool stochastic, bool feedback, const EncodeKernelArgs& a, cudaStream_t s) {
  const int blocks = Blocks(a.n);
  if (stochastic) {
    if (feedback) {
      EncodeKernel<kBits, true, true><<<blocks, kThreads, 0, s>>>(a);
    } else {
      EncodeKernel<kBits, true, false><<<blocks, kThreads, 0, s>>>(a);
    }
  } else if (feedback) {
    EncodeKernel<kBits, false, true><<<blocks, kThreads, 0, s>>>(a);
  } else {
    EncodeKernel<kBits, false, false><<<blocks, kThreads, 0, s>>>(a);
  }
}

template <int kBits>
void LaunchDecode(bool accumulate, const DecodeKernelArgs& a, cudaStream_t s) {
  if (accumulate) {
    DecodeKernel<kBits, true><<<Blocks(a.n), kThreads, 0, s>>>(a);
  } else {
    DecodeKernel<kBits, false><<<Blocks(a.n), kThreads, 0, s>>>(a);
  }
}

bool Fits32(int64_t n, int64_t bucket_size) {
  return n <= int64_t{0xFFFFFFFF} && bucket_size <= int64_t{0xFFFFFFFF};
}

absl::Status CheckArgs(const QuantizeParams& params, int64_t n, const char* what) {
  if (absl::Status st = ValidateQuantizeParams(params); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", st.message()));
  }
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": n = ", n, " < 0"));
  return absl::OkStatus();
}

absl::Status QuantizeAsyncImpl(const float* g, float* r, int64_t n, const QuantizeParams& params,
                               float* meta, uint8_t* codes, int* device_error, cudaStream_t s,
                               const char* what) {
  if (absl::Status st = CheckArgs(params, n, what); !st.ok()) return st;
  if (device_error == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": null error flag"));
  }
  if (absl::Status st = CudaStatus(cudaMemsetAsync(device_error, 0, sizeof(int), s), what);
      !st.ok()) {
    return st;
  }
  if (n == 0) return absl::OkStatus();
  if (g == nullptr || meta == nullptr || codes == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": null buffer"));
  }
  const int64_t buckets = NumBuckets(n, params.bucket_size);
  const float levels = static_cast<float>((1 << params.bits) - 1);
  uint32_t* slots = reinterpret_cast<uint32_t*>(meta);
  if (absl::Status st = CudaStatus(cudaMemsetAsync(meta, 0, 2 * sizeof(float) * buckets, s), what);
      !st.ok()) {
    return st;
  }

  RangeKernelArgs range{g, r, n, params.bucket_size, 0, 0, slots, device_error};
  range.pieces_per_bucket = (std::min(params.bucket_size, n) + kPiece - 1) / kPiece;
  range.pieces = buckets * range.pieces_per_bucket;
  RangeKernel<<<Blocks(range.pieces * kWarpSize), kThreads, 0, s>>>(range);
  FinalizeKernel<<<Blocks(buckets), kThreads, 0, s>>>(
      slots, buckets, levels, params.scale == QuantizeParams::kAbsMax, device_error);

  const uint64_t key = RngKey(params.seed, params.step);
  EncodeKernelArgs encode{};
  encode.g = g;
  encode.r = r;
  encode.n = n;
  encode.bucket_size = params.bucket_size;
  encode.small = Fits32(n, params.bucket_size);
  encode.levels = levels;
  encode.key = key;
  encode.block_key0 = RngBlockKey(key, 0);
  encode.meta = meta;
  encode.codes = codes;
  encode.error = device_error;
  const bool stochastic = params.rounding == QuantizeParams::kStochastic;
  switch (params.bits) {
    case 1:
      LaunchEncode<1>(stochastic, r != nullptr, encode, s);
      break;
    case 2:
      LaunchEncode<2>(stochastic, r != nullptr, encode, s);
      break;
    case 4:
      LaunchEncode<4>(stochastic, r != nullptr, encode, s);
      break;
    default:
      LaunchEncode<8>(stochastic, r != nullptr, encode, s);
      break;
  }
  return CudaStatus(cudaGetLastError(), what);
}

// Allocates the flag, runs the async version, reads the flag back and turns it into a Status.
absl::Status QuantizeBlocking(const float* g, float* r, int64_t n, const QuantizeParams& params,
                              float* meta, uint8_t* codes, cudaStream_t s, const char* what) {
  if (absl::Status st = CheckArgs(params, n, what); !st.ok() || n == 0) return st;
  int* flag = nullptr;
  if (absl::Status st = CudaStatus(cudaMallocAsync(&flag, sizeof(int), s), what); !st.ok()) {
    return st;
  }
  int host_flag = 0;
  const absl::Status launched = QuantizeAsyncImpl(g, r, n, params, meta, codes, flag, s, what);
  const cudaError_t copy_err =
      launched.ok() ? cudaMemcpyAsync(&host_flag, flag, sizeof(int), cudaMemcpyDeviceToHost, s)
                    : cudaSuccess;
  const cudaError_t free_err = cudaFreeAsync(flag, s);
  const cudaError_t sync_err = cudaStreamSynchronize(s);
  if (!launched.ok()) return launched;
  for (const cudaError_t err : {copy_err, free_err, sync_err}) {
    if (absl::Status st = CudaStatus(err, what); !st.ok()) return st;
  }
  if (host_flag & kQuantizeNonFinite) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the input holds a NaN or Inf",
                                                   r != nullptr ? " (grad + residual)" : "",
                                                   "; only finite values can be quantized"));
  }
  if (host_flag & kQuantizeRangeOverflow) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a bucket spans a range wider than the largest float"));
  }
  return absl::OkStatus();
}

void DequantizeCudaImpl(const float* meta, const uint8_t* codes, int64_t n,
                        const QuantizeParams& params, float* out, bool accumulate, void* stream) {
  if (!ValidateQuantizeParams(params).ok() || n <= 0) return;  // see quantize.h
  const DecodeKernelArgs a{meta, codes, n, params.bucket_size, Fits32(n, params.bucket_size), out};
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (params.bits) {
    case 1:
      LaunchDecode<1>(accumulate, a, s);
      break;
    case 2:
      LaunchDecode<2>(accumulate, a, s);
      break;
    case 4:
      LaunchDecode<4>(accumulate, a, s);
      break;
    default:
      LaunchDecode<8>(accumulate, a, s);
      break;
  }
}

}  // namespace

absl::Status QuantizeCudaAsync(const float* x, int64_t n, const QuantizeParams& params, float* meta,
                               uint8_t* codes, int* device_error, void* stream) {
  return QuantizeAsyncImpl(x, nullptr, n, params, meta, codes, device_error,
                           static_cast<cudaStream_t>(stream), "QuantizeCudaAsync");
}

absl::Status QuantizeCuda(const float* x, int64_t n, const QuantizeParams& params, float* meta,
                          uint8_t* codes, void* stream) {
  return QuantizeBlocking(x, nullptr, n, params, meta, codes, static_cast<cudaStream_t>(stream),
                          "QuantizeCuda");
}

absl::Status QuantizeWithErrorFeedbackCudaAsync(const float* grad, float* residual, int64_t n,
                                                const QuantizeParams& params, float* meta,
                                                uint8_t* codes, int* device_error, void* stream) {
  if (n > 0 && residual == nullptr) {
    return absl::InvalidArgumentError("QuantizeWithErrorFeedbackCudaAsync: null residual");
  }
  return QuantizeAsyncImpl(grad, residual, n, params, meta, codes, device_error,
                           static_cast<cudaStream_t>(stream), "QuantizeWithErrorFeedbackCudaAsync");
}

absl::Status QuantizeWithErrorFeedbackCuda(const float* grad, float* residual, int64_t n,
                                           const QuantizeParams& params, float* meta,
                                           uint8_t* codes, void* stream) {
  if (n > 0 && residual == nullptr) {
    return absl::InvalidArgumentError("QuantizeWithErrorFeedbackCuda: null residual");
  }
  return QuantizeBlocking(grad, residual, n, params, meta, codes, static_cast<cudaStream_t>(stream),
                          "QuantizeWithErrorFeedbackCuda");
}

void DequantizeCuda(const float* meta, const uint8_t* codes, int64_t n,
                    const QuantizeParams& params, float* out, void* stream) {
  DequantizeCudaImpl(meta, codes, n, params, out, /*accumulate=*/false, stream);
}

void DequantizeAccumulateCuda(const float* meta, const uint8_t* codes, int64_t n,
                              const QuantizeParams& params, float* accumulator, void* stream) {
  DequantizeCudaImpl(meta, codes, n, params, accumulator, /*accumulate=*/true, stream);
}

void UpdateResidualCuda(const float* x, const float* decoded, float* residual, int64_t n,
                        void* stream) {
  if (n <= 0) return;
  ResidualKernel<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, decoded,
                                                                                residual, n);
}

}  // namespace hptrain::kernels
