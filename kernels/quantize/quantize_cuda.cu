// CUDA twin of quantize_cpu.cc. Same two passes, same math (quantize_common.h):
//   1. Range: buckets of at most kPiece elements (the default 512 among them) get one warp
//      each (BucketRangeKernel), which reduces the bucket with 16-byte loads and writes its
//      (lo, delta) with BucketScale. Larger buckets are cut into pieces of kPiece elements, one
//      warp each (RangeKernel); the warp's min/max go into meta with atomicMax on
//      order-preserving integer encodings (meta doubles as the scratch, zeroed first; the min
//      slot holds the complement so that both slots use atomicMax), and FinalizeKernel then turns
//      each bucket's slots into (lo, delta). Either way a non-finite input sets bit
//      kQuantizeNonFinite of the error flag.
//   2. EncodeKernel: one thread per group of 32-bit code words (CodeGroup), its elements loaded
//      with 16-byte loads and its codes stored with 4-byte stores. It returns at once when the flag
//      is set, which is how codes (and the residual) stay untouched.
// Each pass reads the input once, so 9 bytes move per element at 8 bits (4 + 4 + 1) where a copy
// moves 8.
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

// Element index -> bucket: a shift when bucket_size is a power of two (the default 512), else a
// division, in 32 bits when everything fits (a 64-bit division is many instructions, a 32-bit one
// still about twenty).
struct BucketIndex {
  int64_t size;
  int shift;   // log2(size), or -1
  bool small;  // n and size fit in 32 bits

  __device__ __forceinline__ int64_t Of(int64_t i) const {
    if (shift >= 0) return i >> shift;
    return small ? static_cast<int64_t>(static_cast<uint32_t>(i) / static_cast<uint32_t>(size))
                 : i / size;
  }
};

// Folds v into a running minimum, maximum and largest exponent field (all ones: NaN or Inf).
__device__ __forceinline__ void RangeOf(float v, float& mn, float& mx, uint32_t& ex) {
  const uint32_t e = ExponentField(v);
  mn = v < mn ? v : mn;
  mx = v > mx ? v : mx;
  ex = e > ex ? e : ex;
}

// The same over the warp's 32 lanes: every lane ends with the warp's values.
__device__ __forceinline__ void WarpRange(float& mn, float& mx, uint32_t& ex) {
  for (int off = kWarpSize / 2; off > 0; off /= 2) {
    const float omn = __shfl_xor_sync(kFullMask, mn, off);
    const float omx = __shfl_xor_sync(kFullMask, mx, off);
    const uint32_t oex = __shfl_xor_sync(kFullMask, ex, off);
    mn = omn < mn ? omn : mn;
    mx = omx > mx ? omx : mx;
    ex = oex > ex ? oex : ex;
  }
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
      RangeOf(a.r != nullptr ? AddRn(a.g[i], a.r[i]) : a.g[i], mn, mx, ex);
    }
    WarpRange(mn, mx, ex);
    if (lane == 0) {
      if (ex == kFloatExponentMask) atomicOr(a.error, kQuantizeNonFinite);
      atomicMax(&a.slots[2 * b], ~OrderedBits(mn));
      atomicMax(&a.slots[2 * b + 1], OrderedBits(mx));
    }
  }
}

// Buckets of at most kPiece elements: one warp per bucket reduces it, with 16-byte loads when
// `vector` (g and r 16-byte aligned, bucket_size a multiple of 4), and its lane 0 writes the
// bucket's (lo, delta) directly: no zeroed scratch, no atomics, no FinalizeKernel.
struct BucketRangeKernelArgs {
  const float* g;
  const float* r;  // residual or nullptr
  int64_t n;
  int64_t bucket_size;
  int64_t buckets;
  bool vector;
  float levels;
  bool abs_max;
  float* meta;
  int* error;
};

__global__ void BucketRangeKernel(BucketRangeKernelArgs a) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) / kWarpSize;
  for (int64_t b = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
       b < a.buckets; b += warps) {
    const int64_t begin = b * a.bucket_size;
    const int64_t end = begin + a.bucket_size < a.n ? begin + a.bucket_size : a.n;
    float mn = __int_as_float(0x7F800000), mx = -mn;
    uint32_t ex = 0;
    int64_t scalar_begin = begin;
    if (a.vector) {
      const int64_t quads = (end - begin) / 4;
      const float4* g4 = reinterpret_cast<const float4*>(a.g + begin);
      const float4* r4 = reinterpret_cast<const float4*>(a.r + begin);
#pragma unroll 4
      for (int64_t j = lane; j < quads; j += kWarpSize) {
        float4 v = g4[j];
        if (a.r != nullptr) {
          const float4 rv = r4[j];
          v = make_float4(AddRn(v.x, rv.x), AddRn(v.y, rv.y), AddRn(v.z, rv.z), AddRn(v.w, rv.w));
        }
        RangeOf(v.x, mn, mx, ex);
        RangeOf(v.y, mn, mx, ex);
        RangeOf(v.z, mn, mx, ex);
        RangeOf(v.w, mn, mx, ex);
      }
      scalar_begin = begin + 4 * quads;
    }
    for (int64_t i = scalar_begin + lane; i < end; i += kWarpSize) {
      RangeOf(a.r != nullptr ? AddRn(a.g[i], a.r[i]) : a.g[i], mn, mx, ex);
    }
    WarpRange(mn, mx, ex);
    if (lane == 0) {
      float lo = 0.0f, delta = 0.0f;
      if (ex == kFloatExponentMask) {
        atomicOr(a.error, kQuantizeNonFinite);
      } else if (BucketScale(mn, mx, a.levels, a.abs_max, &lo, &delta) != 0) {
        atomicOr(a.error, kQuantizeRangeOverflow);
      }
      a.meta[2 * b] = lo;
      a.meta[2 * b + 1] = delta;
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

// Code groups: each thread of the encode and decode kernels owns kWords consecutive 32-bit words
// of the code stream (little-endian: word w is bytes 4w..4w+3, and element first + j sits at bit
// (j % (32 / kBits))·kBits of the group's word j / (32 / kBits)). At 8 bits a group is two words,
// so that each thread has 8 elements to amortise its per-group work over. A full group in one
// bucket, with aligned buffers (`vector`: floats 16-byte, codes 4-byte), takes the fast path:
// 16-byte loads, one (lo, delta), fully unrolled loops and 4-byte stores of codes. Other groups
// (the last one, groups a bucket boundary cuts, unaligned buffers) go element by element and byte
// by byte. kElements divides 2^32, so a group never straddles a change of the index's high 32
// bits: one RNG block key serves the whole group.
template <int kBits>
struct CodeGroup {
  static constexpr int kPerWord = 32 / kBits;
  static constexpr int kWords = kBits == 8 ? 2 : 1;
  static constexpr int kElements = kWords * kPerWord;
  static constexpr uint32_t kMask = (1u << kBits) - 1;
};

template <int kE>
__device__ __forceinline__ void LoadQuads(const float* p, float (&v)[kE]) {
#pragma unroll
  for (int j = 0; j < kE; j += 4) {
    const float4 f = *reinterpret_cast<const float4*>(p + j);
    v[j] = f.x;
    v[j + 1] = f.y;
    v[j + 2] = f.z;
    v[j + 3] = f.w;
  }
}

template <int kE>
__device__ __forceinline__ void StoreQuads(float* p, const float (&v)[kE]) {
#pragma unroll
  for (int j = 0; j < kE; j += 4) {
    *reinterpret_cast<float4*>(p + j) = make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
  }
}

// Where a thread's group lies: its first element and code byte, how many elements it has, the
// bucket of its first element and whether the fast path applies.
struct GroupSpan {
  int64_t first;
  int64_t first_byte;
  int count;
  int64_t bucket;
  bool fast;
};

template <int kBits>
__device__ __forceinline__ GroupSpan SpanOf(int64_t group, int64_t n, const BucketIndex& buckets,
                                            bool vector) {
  constexpr int kE = CodeGroup<kBits>::kElements;
  GroupSpan span;
  span.first = group * kE;
  span.first_byte = group * (4 * CodeGroup<kBits>::kWords);
  span.count = n - span.first < kE ? static_cast<int>(n - span.first) : kE;
  span.bucket = buckets.Of(span.first);
  span.fast = vector && span.count == kE && span.bucket == buckets.Of(span.first + kE - 1);
  return span;
}

struct EncodeKernelArgs {
  const float* g;
  float* r;  // residual or nullptr
  int64_t n;
  BucketIndex buckets;
  bool vector;  // g and r 16-byte aligned, codes 4-byte aligned
  float levels;
  uint64_t key;         // RngKey(seed, step)
  uint64_t block_key0;  // RngBlockKey(key, 0)
  const float* meta;
  uint8_t* codes;
  const int* error;
};

template <bool kStochastic>
__device__ __forceinline__ float RoundingOffset(uint64_t block_key, uint32_t index_lo) {
  return kStochastic ? RngUniform24(RngBits(block_key, index_lo)) : 0.5f;
}

template <int kBits, bool kStochastic, bool kFeedback>
__global__ void EncodeKernel(EncodeKernelArgs a) {
  if (*a.error != 0) return;  // the same for every thread: a whole-grid early exit
  using Group = CodeGroup<kBits>;
  constexpr int kE = Group::kElements;
  const int64_t groups = (a.n + kE - 1) / kE;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const GroupSpan span = SpanOf<kBits>(g, a.n, a.buckets, a.vector);
    const uint32_t hi = static_cast<uint32_t>(span.first >> 32);
    const uint64_t block_key = hi == 0 ? a.block_key0 : RngBlockKey(a.key, hi);
    const uint32_t first_lo = static_cast<uint32_t>(span.first);
    uint32_t words[Group::kWords] = {};
    if (span.fast) {
      const float lo = a.meta[2 * span.bucket], delta = a.meta[2 * span.bucket + 1];
      float x[kE];
      LoadQuads<kE>(a.g + span.first, x);
      if (kFeedback) {
        float r[kE];
        LoadQuads<kE>(a.r + span.first, r);
#pragma unroll
        for (int j = 0; j < kE; ++j) x[j] = AddRn(x[j], r[j]);
      }
      if (delta > 0.0f) {  // else a constant bucket: every code 0, and x decodes to lo
#pragma unroll
        for (int j = 0; j < kE; ++j) {
          const float u = RoundingOffset<kStochastic>(block_key, first_lo + j);
          const uint32_t q = QuantizeScaledElement(x[j], lo, delta, u, a.levels);
          words[j / Group::kPerWord] |= q << ((j % Group::kPerWord) * kBits);
          if (kFeedback) x[j] = SubRn(x[j], DequantizeElement(q, lo, delta));
        }
      } else if (kFeedback) {
#pragma unroll
        for (int j = 0; j < kE; ++j) x[j] = SubRn(x[j], DequantizeElement(0, lo, delta));
      }
#pragma unroll
      for (int k = 0; k < Group::kWords; ++k) {
        *reinterpret_cast<uint32_t*>(a.codes + span.first_byte + 4 * k) = words[k];
      }
      if (kFeedback) StoreQuads<kE>(a.r + span.first, x);
    } else {
      for (int j = 0; j < span.count; ++j) {
        const int64_t i = span.first + j;
        const int64_t b = a.buckets.Of(i);
        const float lo = a.meta[2 * b], delta = a.meta[2 * b + 1];
        const float x = kFeedback ? AddRn(a.g[i], a.r[i]) : a.g[i];
        const float u = RoundingOffset<kStochastic>(block_key, first_lo + j);
        const uint32_t q = QuantizeElement(x, lo, delta, u, a.levels);
        words[j / Group::kPerWord] |= q << ((j % Group::kPerWord) * kBits);
        if (kFeedback) a.r[i] = SubRn(x, DequantizeElement(q, lo, delta));
      }
      const int bytes = (span.count * kBits + 7) / 8;
      for (int k = 0; k < bytes; ++k) {
        a.codes[span.first_byte + k] = static_cast<uint8_t>(words[k / 4] >> (8 * (k % 4)));
      }
    }
  }
}

struct DecodeKernelArgs {
  const float* meta;
  const uint8_t* codes;
  int64_t n;
  BucketIndex buckets;
  bool vector;  // out 16-byte aligned, codes 4-byte aligned
  float* out;
};

template <int kBits, bool kAccumulate>
__global__ void DecodeKernel(DecodeKernelArgs a) {
  using Group = CodeGroup<kBits>;
  constexpr int kE = Group::kElements;
  const int64_t groups = (a.n + kE - 1) / kE;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const GroupSpan span = SpanOf<kBits>(g, a.n, a.buckets, a.vector);
    if (span.fast) {
      uint32_t words[Group::kWords];
#pragma unroll
      for (int k = 0; k < Group::kWords; ++k) {
        words[k] = *reinterpret_cast<const uint32_t*>(a.codes + span.first_byte + 4 * k);
      }
      const float lo = a.meta[2 * span.bucket], delta = a.meta[2 * span.bucket + 1];
      float v[kE];
      if (kAccumulate) LoadQuads<kE>(a.out + span.first, v);
#pragma unroll
      for (int j = 0; j < kE; ++j) {
        const uint32_t q =
            (words[j / Group::kPerWord] >> ((j % Group::kPerWord) * kBits)) & Group::kMask;
        const float d = DequantizeElement(q, lo, delta);
        v[j] = kAccumulate ? AddRn(v[j], d) : d;
      }
      StoreQuads<kE>(a.out + span.first, v);
    } else {
      for (int j = 0; j < span.count; ++j) {
        const int64_t i = span.first + j;
        const int64_t b = a.buckets.Of(i);
        const uint32_t q =
            (static_cast<uint32_t>(a.codes[span.first_byte + j * kBits / 8]) >> ((j * kBits) % 8)) &
            Group::kMask;
        const float d = DequantizeElement(q, a.meta[2 * b], a.meta[2 * b + 1]);
        a.out[i] = kAccumulate ? AddRn(a.out[i], d) : d;
      }
    }
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
  const int blocks = Blocks((a.n + CodeGroup<kBits>::kElements - 1) / CodeGroup<kBits>::kElements);
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
  const int blocks = Blocks((a.n + CodeGroup<kBits>::kElements - 1) / CodeGroup<kBits>::kElements);
  if (accumulate) {
    DecodeKernel<kBits, true><<<blocks, kThreads, 0, s>>>(a);
  } else {
    DecodeKernel<kBits, false><<<blocks, kThreads, 0, s>>>(a);
  }
}

// Whether p is a multiple of `bytes` (nullptr counts as aligned).
bool IsAligned(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

BucketIndex MakeBucketIndex(int64_t n, int64_t bucket_size) {
  BucketIndex index{bucket_size, -1,
                    n <= int64_t{0xFFFFFFFF} && bucket_size <= int64_t{0xFFFFFFFF}};
  if ((bucket_size & (bucket_size - 1)) == 0) {
    index.shift = 0;
    while ((int64_t{1} << index.shift) < bucket_size) ++index.shift;
  }
  return index;
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
  const bool abs_max = params.scale == QuantizeParams::kAbsMax;
  if (params.bucket_size <= kPiece) {
    BucketRangeKernelArgs range{};
    range.g = g;
    range.r = r;
    range.n = n;
    range.bucket_size = params.bucket_size;
    range.buckets = buckets;
    range.vector = IsAligned(g, 16) && IsAligned(r, 16) && params.bucket_size % 4 == 0;
    range.levels = levels;
    range.abs_max = abs_max;
    range.meta = meta;
    range.error = device_error;
    BucketRangeKernel<<<Blocks(buckets * kWarpSize), kThreads, 0, s>>>(range);
  } else {
    uint32_t* slots = reinterpret_cast<uint32_t*>(meta);
    if (absl::Status st =
            CudaStatus(cudaMemsetAsync(meta, 0, 2 * sizeof(float) * buckets, s), what);
        !st.ok()) {
      return st;
    }
    RangeKernelArgs range{g, r, n, params.bucket_size, 0, 0, slots, device_error};
    range.pieces_per_bucket = (std::min(params.bucket_size, n) + kPiece - 1) / kPiece;
    range.pieces = buckets * range.pieces_per_bucket;
    RangeKernel<<<Blocks(range.pieces * kWarpSize), kThreads, 0, s>>>(range);
    FinalizeKernel<<<Blocks(buckets), kThreads, 0, s>>>(slots, buckets, levels, abs_max,
                                                        device_error);
  }

  const uint64_t key = RngKey(params.seed, params.step);
  EncodeKernelArgs encode{};
  encode.g = g;
  encode.r = r;
  encode.n = n;
  encode.buckets = MakeBucketIndex(n, params.bucket_size);
  encode.vector = IsAligned(g, 16) && IsAligned(r, 16) && IsAligned(codes, 4);
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
  const DecodeKernelArgs a{meta,
                           codes,
                           n,
                           MakeBucketIndex(n, params.bucket_size),
                           IsAligned(out, 16) && IsAligned(codes, 4),
                           out};
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
