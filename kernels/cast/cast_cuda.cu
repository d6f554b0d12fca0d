// CUDA twin of cast_cpu.cc: grid-stride loops over the hardware conversions (__float2half_rn,
// __half2float, __float2bfloat16_rn, __bfloat162float). Those produce a canonical NaN (0x7fff),
// so NaNs are converted with cast_common.h's F16C rules instead, to give the CPU's bits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cast/cast.h"
#include "kernels/cast/cast_common.h"

namespace hptrain::kernels {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? (blocks < 1 ? 1 : blocks) : 65535);
}

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

__device__ __forceinline__ uint16_t DeviceFloatToHalf(float f) {
  if (f != f) return HalfNanFromFloatBits(__float_as_uint(f));
  return __half_as_ushort(__float2half_rn(f));
}

__device__ __forceinline__ float DeviceHalfToFloat(uint16_t h) {
  if (HalfBitsIsNan(h)) return __uint_as_float(FloatNanFromHalfBits(h));
  return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ uint16_t DeviceFloatToBfloat16(float f) {
  if (f != f) return static_cast<uint16_t>((__float_as_uint(f) >> 16) | 0x40u);
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

__device__ __forceinline__ float DeviceBfloat16ToFloat(uint16_t b) {
  return __bfloat162float(__ushort_as_bfloat16(b));
}

#define HPTRAIN_GRID_STRIDE(i, n)                                                        \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

__global__ void FloatToHalfKernel(const float* in, int64_t n, uint16_t* out) {
  HPTRAIN_GRID_STRIDE(i, n) out[i] = DeviceFloatToHalf(in[i]);
}

__global__ void HalfToFloatKernel(const uint16_t* in, int64_t n, float* out) {
  HPTRAIN_GRID_STRIDE(i, n) out[i] = DeviceHalfToFloat(in[i]);
}

__global__ void HalfAccumulateKernel(const uint16_t* in, int64_t n, float* acc) {
  HPTRAIN_GRID_STRIDE(i, n) acc[i] += DeviceHalfToFloat(in[i]);
}

__global__ void FloatToBfloat16Kernel(const float* in, int64_t n, uint16_t* out) {
  HPTRAIN_GRID_STRIDE(i, n) out[i] = DeviceFloatToBfloat16(in[i]);
}

__global__ void Bfloat16ToFloatKernel(const uint16_t* in, int64_t n, float* out) {
  HPTRAIN_GRID_STRIDE(i, n) out[i] = DeviceBfloat16ToFloat(in[i]);
}

__global__ void Bfloat16AccumulateKernel(const uint16_t* in, int64_t n, float* acc) {
  HPTRAIN_GRID_STRIDE(i, n) acc[i] += DeviceBfloat16ToFloat(in[i]);
}

__global__ void FloatToHalfWithErrorFeedbackKernel(const float* in, float* residual, int64_t n,
                                                  uint16_t* out, int* device_error) {
  HPTRAIN_GRID_STRIDE(i, n) {
    const float x = residual != nullptr ? in[i] + residual[i] : in[i];
    if (!isfinite(x)) *device_error = 1;
    const uint16_t h = DeviceFloatToHalf(x);
    out[i] = h;
    if (residual != nullptr) residual[i] = x - DeviceHalfToFloat(h);
  }
}

#undef HPTRAIN_GRID_STRIDE

}  // namespace

void FloatToHalfCuda(const float* in, int64_t n, uint16_t* out, void* stream) {
  if (n <= 0) return;
  FloatToHalfKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(in, n, out);
}

void HalfToFloatCuda(const uint16_t* in, int64_t n, float* out, void* stream) {
  if (n <= 0) return;
  HalfToFloatKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(in, n, out);
}

void HalfAccumulateCuda(const uint16_t* in, int64_t n, float* acc, void* stream) {
  if (n <= 0) return;
  HalfAccumulateKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(in, n, acc);
}

void FloatToBfloat16Cuda(const float* in, int64_t n, uint16_t* out, void* stream) {
  if (n <= 0) return;
  FloatToBfloat16Kernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(in, n, out);
}

void Bfloat16ToFloatCuda(const uint16_t* in, int64_t n, float* out, void* stream) {
  if (n <= 0) return;
  Bfloat16ToFloatKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(in, n, out);
}

void Bfloat16AccumulateCuda(const uint16_t* in, int64_t n, float* acc, void* stream) {
  if (n <= 0) return;
  Bfloat16AccumulateKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(in, n, acc);
}

void FloatToHalfWithErrorFeedbackCuda(const float* in, float* residual, int64_t n, uint16_t* out,
                                      int* device_error, void* stream) {
  if (n <= 0) return;
  FloatToHalfWithErrorFeedbackKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(
      in, residual, n, out, device_error);
}

}  // namespace hptrain::kernels
