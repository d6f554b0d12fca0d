// Precision casts for gradient compression: fp32 <-> fp16 (IEEE binary16) and fp32 <-> bfloat16
// on flat buffers, plus fused "decode and accumulate" for the receive side of a half-precision
// all-reduce or all-gather (acc += decode(x)), which saves one pass and one fp32 buffer.
//
// Rounding is round-to-nearest-even everywhere. fp32 -> fp16: |x| >= 65520 becomes ±Inf,
// results below 2^-14 become correctly rounded subnormals, NaN stays NaN. fp32 -> bf16: the upper
// 16 bits rounded to nearest-even, overflow to ±Inf, NaN stays NaN (quieted). Widening is exact.
// The exact NaN bit patterns are those of x86 F16C and are listed in cast_common.h.
//
// The CPU functions (cast_cpu.cc) pick at run time between F16C instructions (8 values per
// instruction) and a portable branch-free implementation that GCC vectorises; both produce the
// same bits for every input (tested over all 65536 halves and a sweep of fp32 inputs). The CUDA
// twins (cast_cuda.cu, *Cuda names) produce the same bits as well.
//
// Buffers are owned by the caller; nothing allocates; `in` and `out` must not overlap. The
// functions keep no state and are thread-safe. n <= 0 does nothing.
#ifndef HPTRAIN_KERNELS_CAST_CAST_H_
#define HPTRAIN_KERNELS_CAST_CAST_H_

#include <cstdint>

namespace hptrain::kernels {

// The largest finite fp16 value; senders clamp to ±kHalfMax so that no value becomes infinite.
inline constexpr float kHalfMax = 65504.0f;

// Which CPU implementation to run. kAuto (what the functions without this argument use) picks
// kF16c when the CPU and OS support AVX + F16C, else kPortable. Exposed for tests and benchmarks.
enum class CastImpl { kAuto, kPortable, kF16c };

// True if `impl` can run on this machine (kAuto and kPortable always can). Asking a function for
// an unsupported kF16c runs kPortable instead, which gives the same bits.
bool CastImplSupported(CastImpl impl);

// The implementation kAuto resolves to on this machine (kF16c or kPortable).
CastImpl ResolvedCastImpl();

// out[i] = fp16 bits of in[i].
void FloatToHalf(const float* in, int64_t n, uint16_t* out);
void FloatToHalf(const float* in, int64_t n, uint16_t* out, CastImpl impl);

// out[i] = the fp32 value of the fp16 bits in[i].
void HalfToFloat(const uint16_t* in, int64_t n, float* out);
void HalfToFloat(const uint16_t* in, int64_t n, float* out, CastImpl impl);

// acc[i] += the fp32 value of the fp16 bits in[i] (one fp32 addition per element).
void HalfAccumulate(const uint16_t* in, int64_t n, float* acc);
void HalfAccumulate(const uint16_t* in, int64_t n, float* acc, CastImpl impl);

// out[i] = bf16 bits of in[i]. (One implementation: the portable loop vectorises well.)
void FloatToBfloat16(const float* in, int64_t n, uint16_t* out);

// out[i] = the fp32 value of the bf16 bits in[i].
void Bfloat16ToFloat(const uint16_t* in, int64_t n, float* out);

// acc[i] += the fp32 value of the bf16 bits in[i].
void Bfloat16Accumulate(const uint16_t* in, int64_t n, float* acc);

// The fp16 codec's send side with error feedback (EF-SGD): x = in[i] + residual[i] (a float sum;
// with a null `residual`, x = in[i]); out[i] = fp16 bits of x; residual[i] = x − fp32 value of
// out[i], the rounding error carried into the next step. Returns -1, or the index of the first
// element whose x is not finite, in which case nothing is written. `residual` may be null but
// must not overlap `in` or `out`.
int64_t FloatToHalfWithErrorFeedback(const float* in, float* residual, int64_t n, uint16_t* out);

#ifdef HPTRAIN_HAVE_CUDA
// Device twins: pointers are device memory; enqueue on `stream` (a cudaStream_t, nullptr = the
// default stream) and return without synchronising. Same bits as the CPU functions. Launch errors
// surface at the next synchronising CUDA call, as for any kernel.
void FloatToHalfCuda(const float* in, int64_t n, uint16_t* out, void* stream);
void HalfToFloatCuda(const uint16_t* in, int64_t n, float* out, void* stream);
void HalfAccumulateCuda(const uint16_t* in, int64_t n, float* acc, void* stream);
void FloatToBfloat16Cuda(const float* in, int64_t n, uint16_t* out, void* stream);
void Bfloat16ToFloatCuda(const uint16_t* in, int64_t n, float* out, void* stream);
void Bfloat16AccumulateCuda(const uint16_t* in, int64_t n, float* acc, void* stream);
// FloatToHalfWithErrorFeedback in one pass: the same bits for finite inputs. A non-finite x sets
// *device_error (device memory) to 1, and `out` and `residual` then hold unspecified values; the
// flag is never cleared here (the caller zeroes it).
void FloatToHalfWithErrorFeedbackCuda(const float* in, float* residual, int64_t n, uint16_t* out,
                                      int* device_error, void* stream);
#endif

}  // namespace hptrain::kernels

#endif  // HPTRAIN_KERNELS_CAST_CAST_H_
