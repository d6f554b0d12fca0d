// CUDA twin of update_cpu.cc: one thread per element, grid-stride loops.
#include <cmath>

#include <cuda_runtime.h>

#include "kernels/update/update.h"
#include "kernels/update/update_common.h"

namespace hptrain::kernels {
namespace {

constexpr int kThreads = 256;

int Blocks(size_t n) {
  size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? (blocks == 0 ? 1 : blocks) : 65535);
}

__global__ void SgdKernel(float* params, const float* grads, float* momentum_buf, size_t n,
                          SgdParams p) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    float unused = 0.0f;
    float& buf = p.momentum != 0.0f ? momentum_buf[i] : unused;
    SgdElement(params[i], grads[i], buf, p.lr, p.momentum, p.weight_decay, p.nesterov,
               p.first_step);
  }
}

__global__ void AdamKernel(float* params, const float* grads, float* m, float* v, size_t n,
                           AdamParams p, float bc1, float bc2_sqrt) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    AdamElement(params[i], grads[i], m[i], v[i], p.lr, p.beta1, p.beta2, p.eps, p.weight_decay,
                bc1, bc2_sqrt);
  }
}

__global__ void ScaleKernel(float* data, size_t n, float factor) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    data[i] *= factor;
  }
}

__global__ void AddAndClearKernel(float* residual, float* x, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    x[i] += residual[i];
    residual[i] = 0.0f;
  }
}

}  // namespace

void SgdStepCuda(float* params, const float* grads, float* momentum_buf, size_t n,
                 const SgdParams& p, void* stream) {
  SgdKernel<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(params, grads,
                                                                           momentum_buf, n, p);
}

void AdamStepCuda(float* params, const float* grads, float* m, float* v, size_t n,
                  const AdamParams& p, void* stream) {
  const float bc1 = 1.0f - std::pow(p.beta1, static_cast<float>(p.step));
  const float bc2_sqrt = std::sqrt(1.0f - std::pow(p.beta2, static_cast<float>(p.step)));
  AdamKernel<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(params, grads, m, v,
                                                                            n, p, bc1, bc2_sqrt);
}

void ScaleCuda(float* data, size_t n, float factor, void* stream) {
  ScaleKernel<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(data, n, factor);
}

void AddAndClearCuda(float* residual, float* x, size_t n, void* stream) {
  if (n == 0) return;
  AddAndClearKernel<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(residual, x, n);
}

}  // namespace hptrain::kernels
