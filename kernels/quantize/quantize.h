// Bucketed uniform quantization (H-PS flexible quantization, docs/algorithms.md §5b (3)).
//
// A flat fp32 buffer of n elements is cut into buckets of `bucket_size` consecutive elements (the
// last one may be shorter). Each bucket b gets its own grid of L + 1 = 2^bits levels
// lo_b + q·delta_b, q = 0..L, and each element is replaced by the bits-bit code q of a level:
// stochastically rounded (unbiased, for gradients) or rounded to the nearest level (for the PS's
// parameter deltas, whose error the mirrors carry forward).
//
// Raw layout (shared with the wire format; it must not change):
//   meta:  float[2·NumBuckets(n, bucket_size)]: meta[2b] = lo_b, meta[2b+1] = delta_b
//   codes: uint8_t[QuantizedCodeBytes(n, bits)] = ceil(n·bits / 8) bytes; element i's code is
//          bits [i·bits, (i+1)·bits) of a little-endian bit stream (stream bit k is bit k % 8 of
//          byte k / 8), so with bits in {1, 2, 4, 8} no code straddles a byte. Bits of the last
//          byte past the n-th code are 0.
//   scale kMinMax: lo = min_b, delta = (max_b − min_b) / L
//   scale kAbsMax: lo = −absmax_b, delta = 2·absmax_b / L
//   A constant bucket (max == min, or absmax == 0) has delta 0 and all codes 0; it decodes to lo,
//   exactly. delta is never 0 otherwise: a non-zero range too small for (range / L) to be a
//   non-zero float gets the smallest subnormal. A zero lo is always +0.
//   decoded value of code q in bucket b: lo_b + q·delta_b (in float, no fused multiply-add)
// Rounding: q = floor((x − lo) / delta + u), clamped to [0, L], with u = 0.5 for kNearest and
// u uniform in [0, 1) for kStochastic, drawn from kernels/common/rng.h keyed by
// (seed, step, index of the element in this buffer). The exact float operations are in
// quantize_common.h, shared by the CPU kernels and their CUDA twins, so both produce the same
// bytes.
//
// Error feedback (1-bit SGD / EF-SGD): QuantizeWithErrorFeedback quantizes x = grad + residual and
// leaves residual = x − Dequantize(Quantize(x)), so what is not sent this step is sent later.
// UpdateResidual is the same last step for any compressor (top-k, casts); the fused version is
// the fast path for this one.
//
// Ownership and threading: no function allocates host memory or keeps state; every buffer is
// owned by the caller and must not overlap another argument unless stated. Calls on disjoint
// buffers may run concurrently. The CPU functions block until done and split buffers of more
// than about 256K elements over KernelThreads() threads (kernels/common/parallel.h); the result
// is bit-identical whatever the thread count.
#ifndef HPTRAIN_KERNELS_QUANTIZE_QUANTIZE_H_
#define HPTRAIN_KERNELS_QUANTIZE_QUANTIZE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace hptrain::kernels {

struct QuantizeParams {
  enum Scale { kMinMax, kAbsMax };
  enum Rounding { kStochastic, kNearest };

  int bits = 8;               // bits per code: 1, 2, 4 or 8
  int64_t bucket_size = 512;  // elements per bucket, > 0
  Scale scale = kMinMax;
  Rounding rounding = kStochastic;
  uint64_t seed = 0;  // stochastic rounding: (seed, step) select the random stream, so that
  uint64_t step = 0;  // every worker and step draws differently and a step can be replayed
};

// ceil(n·bits / 8): the size of the codes buffer. n >= 0, bits in {1, 2, 4, 8}.
size_t QuantizedCodeBytes(int64_t n, int bits);

// ceil(n / bucket_size): buckets of a buffer of n elements; the meta buffer holds twice as many
// floats. n >= 0, bucket_size > 0.
int64_t NumBuckets(int64_t n, int64_t bucket_size);

// OK if `params` can be used, else InvalidArgument naming the bad field (bits not in
// {1, 2, 4, 8}, bucket_size <= 0, an unknown scale or rounding). Decoders call it on parameters
// read from the wire before calling Dequantize.
absl::Status ValidateQuantizeParams(const QuantizeParams& params);

// Quantizes x[0, n) into meta[2·NumBuckets] and codes[QuantizedCodeBytes].
// Errors (all InvalidArgument): invalid params, n < 0 or a null buffer; a NaN or ±Inf in x (the
// message names the first such element); a bucket whose range max − min (or 2·absmax) overflows
// float. On an error `codes` is untouched and `meta` holds unspecified values. n == 0 writes
// nothing.
absl::Status Quantize(const float* x, int64_t n, const QuantizeParams& params, float* meta,
                      uint8_t* codes);

// out[i] = decoded value of element i, for buffers written by Quantize with the same n and the
// same bits, bucket_size (other params fields are not used). `params` must pass
// ValidateQuantizeParams (a programmer error otherwise: debug builds assert, release builds
// write nothing).
void Dequantize(const float* meta, const uint8_t* codes, int64_t n, const QuantizeParams& params,
                float* out);

// accumulator[i] += decoded value of element i (one pass; the PS sums workers' pushes with it and
// the mirrors w̃ += deQ(...) use it). Same preconditions as Dequantize.
void DequantizeAccumulate(const float* meta, const uint8_t* codes, int64_t n,
                          const QuantizeParams& params, float* accumulator);

// Quantizes x = grad + residual (element-wise, in float) like Quantize, and sets
// residual = x − decoded value. One pass computes the buckets' ranges, a second writes codes and
// residual. Same errors as Quantize (a non-finite x includes grad + residual overflowing); on an
// error `codes` and `residual` are untouched. `grad` and `residual` must not overlap.
absl::Status QuantizeWithErrorFeedback(const float* grad, float* residual, int64_t n,
                                       const QuantizeParams& params, float* meta, uint8_t* codes);

// residual[i] = x[i] − decoded[i]: error feedback for any compressor (x the compressor's input,
// decoded what the receiver will reconstruct). `residual` may alias `x` or `decoded`.
void UpdateResidual(const float* x, const float* decoded, float* residual, int64_t n);

// The CPU kernels are compiled three times, for the x86-64 baseline (SSE2), AVX2 and AVX-512
// (F, BW, VL, DQ), and use the widest build the CPU supports. All three give identical results.
enum class QuantizeIsa { kPortable, kAvx2, kAvx512 };

// The widest build this CPU can run (kPortable off x86-64).
QuantizeIsa QuantizeIsaSupported();

// "portable", "avx2" or "avx512".
const char* QuantizeIsaName(QuantizeIsa isa);

// Testing only: the kernels use min(QuantizeIsaSupported(), limit). Changing it while kernels run
// is harmless (every build gives the same result).
void SetQuantizeIsaLimitForTesting(QuantizeIsa limit);

#ifdef HPTRAIN_HAVE_CUDA
// Device twins: all pointers are device pointers and `stream` is a cudaStream_t (nullptr for the
// legacy default stream). Results are bit-identical to the CPU functions on the same input.

// Enqueues Quantize on `stream` and returns without waiting. `*device_error` (device memory) is
// set to 0 and then to a non-zero value if x holds a NaN/Inf (bit 1) or a bucket's range
// overflows (bit 2); in that case the kernel that writes codes does not run its body and `codes`
// stays untouched. Returns InvalidArgument for invalid params or n < 0 (nothing is enqueued) and
// an error if a launch fails.
absl::Status QuantizeCudaAsync(const float* x, int64_t n, const QuantizeParams& params, float* meta,
                               uint8_t* codes, int* device_error, void* stream);

// Quantize on the device, with the same result and errors as the CPU version (except that the
// NaN/Inf message does not name the element). Blocks: it allocates the 4-byte error flag with
// cudaMallocAsync on `stream`, enqueues QuantizeCudaAsync, copies the flag back and synchronizes
// the stream. CUDA failures come back as Internal/ResourceExhausted/... statuses.
absl::Status QuantizeCuda(const float* x, int64_t n, const QuantizeParams& params, float* meta,
                          uint8_t* codes, void* stream);

// QuantizeWithErrorFeedback on the device, enqueued like QuantizeCudaAsync (same flag); when the
// flag is set, `codes` and `residual` stay untouched.
absl::Status QuantizeWithErrorFeedbackCudaAsync(const float* grad, float* residual, int64_t n,
                                                const QuantizeParams& params, float* meta,
                                                uint8_t* codes, int* device_error, void* stream);

// Same as QuantizeWithErrorFeedback, blocking like QuantizeCuda; on an error `codes` and
// `residual` are untouched.
absl::Status QuantizeWithErrorFeedbackCuda(const float* grad, float* residual, int64_t n,
                                           const QuantizeParams& params, float* meta,
                                           uint8_t* codes, void* stream);

// Enqueue on `stream` and return without synchronising; preconditions as the CPU versions.
void DequantizeCuda(const float* meta, const uint8_t* codes, int64_t n,
                    const QuantizeParams& params, float* out, void* stream);
void DequantizeAccumulateCuda(const float* meta, const uint8_t* codes, int64_t n,
                              const QuantizeParams& params, float* accumulator, void* stream);
void UpdateResidualCuda(const float* x, const float* decoded, float* residual, int64_t n,
                        void* stream);
#endif

}  // namespace hptrain::kernels

#endif  // HPTRAIN_KERNELS_QUANTIZE_QUANTIZE_H_
