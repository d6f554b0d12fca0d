// Optimizer update kernels on flat fp32 buffers: the parameters, gradients and optimizer state of a
// whole model live in one contiguous buffer each (runtime/train keeps them that way), so one
// kernel call updates the model.
//
// CPU versions (update_cpu.cc) always exist; the CUDA twins (update_cuda.cu, *Cuda names) take
// device pointers and a stream and are built when nvcc is found. Both use update_common.h, so they
// agree element for element. No function allocates; all buffers are owned by the caller.
#ifndef HPTRAIN_KERNELS_UPDATE_UPDATE_H_
#define HPTRAIN_KERNELS_UPDATE_UPDATE_H_

#include <cstddef>
#include <cstdint>

namespace hptrain::kernels {

struct SgdParams {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
  bool first_step = false;  // momentum buffer is initialised with the first gradient
};

struct AdamParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  int64_t step = 1;  // 1-based step count, for bias correction
};

// params -= SGD update from grads; `momentum_buf` is used when momentum != 0.
void SgdStep(float* params, const float* grads, float* momentum_buf, size_t n,
             const SgdParams& p);
void AdamStep(float* params, const float* grads, float* m, float* v, size_t n,
              const AdamParams& p);
// data *= factor
void Scale(float* data, size_t n, float factor);

// Error feedback folded back in: x[i] += residual[i], then residual[i] = 0.
void AddAndClear(float* residual, float* x, size_t n);

#ifdef HPTRAIN_HAVE_CUDA
// Device twins; enqueue on `stream` (a cudaStream_t) and return without synchronising.
void SgdStepCuda(float* params, const float* grads, float* momentum_buf, size_t n,
                 const SgdParams& p, void* stream);
void AdamStepCuda(float* params, const float* grads, float* m, float* v, size_t n,
                  const AdamParams& p, void* stream);
void ScaleCuda(float* data, size_t n, float factor, void* stream);
void AddAndClearCuda(float* residual, float* x, size_t n, void* stream);
#endif

}  // namespace hptrain::kernels

#endif  // HPTRAIN_KERNELS_UPDATE_UPDATE_H_
