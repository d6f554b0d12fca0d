// CUDA twin of dgc_cpu.cc. The element-wise update uses the same DgcMomentumElement as the CPU
// (roundings spelled out, no FMA), so it matches bit for bit. The clipping norm is reduced in a
// fixed tree (per-block cub::BlockReduce into partials, then one block over the partials): the
// same bits on every run and device for a given n, but a different summation order than the CPU.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cub/cub.cuh>

#include "absl/status/status.h"
#include "kernels/topk/dgc.h"
#include "kernels/topk/topk_common.h"

namespace hptrain::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kNormThreads = 1024;  // the final reduction: one block, one partial per thread
constexpr int64_t kMaxGrid = kNormThreads;

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

__global__ void MomentumKernel(const float* grad, int64_t n, float momentum, float* u, float* v) {
  for (int64_t i = ThreadIndex(); i < n; i += GridStride()) {
    DgcMomentumElement(grad[i], momentum, u[i], v[i]);
  }
}

__global__ void MaskKernel(const int32_t* indices, int64_t k, float* u, float* v) {
  for (int64_t i = ThreadIndex(); i < k; i += GridStride()) {
    if (u != nullptr) u[indices[i]] = 0.0f;
    v[indices[i]] = 0.0f;
  }
}

__global__ void NormPartialKernel(const float* g, int64_t n, double* partials) {
  double sum = 0.0;
  for (int64_t i = ThreadIndex(); i < n; i += GridStride()) {
    const double x = g[i];
    sum += x * x;
  }
  __shared__ typename cub::BlockReduce<double, kThreads>::TempStorage temp;
  sum = cub::BlockReduce<double, kThreads>(temp).Sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// One block of kNormThreads: norm = sqrt(sum of partials), stored in *norm (and *norm_out).
__global__ void NormFinalKernel(const double* partials, int num_partials, double* norm,
                                float* norm_out) {
  const double part = static_cast<int>(threadIdx.x) < num_partials ? partials[threadIdx.x] : 0.0;
  __shared__ typename cub::BlockReduce<double, kNormThreads>::TempStorage temp;
  const double sum = cub::BlockReduce<double, kNormThreads>(temp).Sum(part);
  if (threadIdx.x == 0) {
    *norm = sqrt(sum);
    if (norm_out != nullptr) *norm_out = static_cast<float>(*norm);
  }
}

__global__ void ClipScaleKernel(float* g, int64_t n, const double* norm, float max_norm) {
  const float coef = ClipCoefficient(*norm, max_norm);
  if (coef >= 1.0f) return;
  for (int64_t i = ThreadIndex(); i < n; i += GridStride()) g[i] *= coef;
}

}  // namespace

void DgcMomentumCorrectionCuda(const float* grad, int64_t n, float momentum, float* u, float* v,
                               void* stream) {
  if (n <= 0) return;
  MomentumKernel<<<GridFor(n), kThreads, 0, AsStream(stream)>>>(grad, n, momentum, u, v);
}

void DgcMaskSelectedCuda(const int32_t* indices, int64_t k, float* u, float* v, void* stream) {
  if (k <= 0) return;
  MaskKernel<<<GridFor(k), kThreads, 0, AsStream(stream)>>>(indices, k, u, v);
}

absl::Status ClipToNormCuda(float* g, int64_t n, float max_norm, float* norm_out, void* stream) {
  const cudaStream_t s = AsStream(stream);
  const int blocks = GridFor(n);
  StreamScratch scratch(s);
  absl::Status status =
      scratch.Allocate((blocks + 1) * sizeof(double), "clip scratch cudaMallocAsync");
  if (!status.ok()) return status;
  double* partials = scratch.At<double>(0);
  double* norm = partials + blocks;
  NormPartialKernel<<<blocks, kThreads, 0, s>>>(g, n, partials);
  NormFinalKernel<<<1, kNormThreads, 0, s>>>(partials, blocks, norm, norm_out);
  if (n > 0) ClipScaleKernel<<<blocks, kThreads, 0, s>>>(g, n, norm, max_norm);
  return TopkCudaStatus(cudaGetLastError(), "clip kernels launch");
}

}  // namespace hptrain::kernels
