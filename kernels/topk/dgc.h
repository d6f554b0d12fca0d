// The per-worker state updates of Deep Gradient Compression (Lin et al., ICLR 2018; docs/algorithms.md
// §6), on flat fp32 buffers holding a whole layer (or model):
//
//   1. ClipToNorm(g, DgcLocalClipNorm(clip, N))   local clipping, before accumulation
//   2. DgcMomentumCorrection(g, m, u, v)            u = m·u + g;  v = v + u
//   3. DgcSelect(v, density) + PackSelection(v)     topk.h: send (indices, values)
//   4. DgcMaskSelected(indices, u, v)               momentum factor masking: u[idx] = v[idx] = 0
//
// The receiver sums the sparse tensors (ScatterAdd), divides by N and applies plain SGD. Small
// layers are not sparsified (the strategies all-reduce them every step: runtime/sync/small_tensors.h). Top-k with error feedback is the same
// loop without the momentum (v = v + g) and without masking u.
//
// CPU functions keep no state, never allocate, and are thread-safe for disjoint buffers. The CUDA
// twins (dgc_cuda.cu) give the same bits for the element-wise updates and the masking; the norm
// of ClipToNormCuda is summed in a different order, so clipped values agree within fp32 rounding.
#ifndef HPTRAIN_KERNELS_TOPK_DGC_H_
#define HPTRAIN_KERNELS_TOPK_DGC_H_

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"

namespace hptrain::kernels {

// Momentum correction, fused: for every i, u[i] = momentum·u[i] + grad[i]; v[i] = v[i] + u[i]
// (each rounded to fp32 separately, no fused multiply-add, so CPU and GPU agree bit for bit).
void DgcMomentumCorrection(const float* grad, int64_t n, float momentum, float* u, float* v);

// Momentum factor masking after selection: u[indices[i]] = v[indices[i]] = 0 for i < k. Indices
// must lie in [0, n) of the buffers (they come from PackSelection, not from the network); u may be
// nullptr (Top-k with error feedback has no momentum buffer).
void DgcMaskSelected(const int32_t* indices, int64_t k, float* u, float* v);

// Scales g in place so that its L2 norm is at most max_norm, the way torch.nn.utils.
// clip_grad_norm_ does: if norm > max_norm, g *= max_norm / (norm + 1e-6). Returns the norm before
// clipping (summed in double, fixed order). A non-finite norm leaves g unchanged.
float ClipToNorm(float* g, int64_t n, float max_norm);

// DGC's local clipping threshold for N workers: the global threshold scaled by N^{-1/2}.
inline float DgcLocalClipNorm(float global_max_norm, int num_workers) {
  return num_workers > 0 ? global_max_norm / std::sqrt(static_cast<float>(num_workers))
                         : global_max_norm;
}

#ifdef HPTRAIN_HAVE_CUDA
// Device twins: device pointers, enqueued on `stream` (a cudaStream_t; nullptr = default stream),
// asynchronous. Launch errors surface at the next synchronising call.
void DgcMomentumCorrectionCuda(const float* grad, int64_t n, float momentum, float* u, float* v,
                               void* stream);
void DgcMaskSelectedCuda(const int32_t* indices, int64_t k, float* u, float* v, void* stream);

// ClipToNorm on the device without a host round trip: the norm is reduced into device memory and
// the scaling kernel reads it there. If norm_out (device memory) is not null it receives the norm
// before clipping. Allocates a small scratch buffer with cudaMallocAsync on `stream`; returns its
// failure as a Status (ResourceExhausted for out of memory), else OK without synchronising.
absl::Status ClipToNormCuda(float* g, int64_t n, float max_norm, float* norm_out, void* stream);
#endif  // HPTRAIN_HAVE_CUDA

}  // namespace hptrain::kernels

#endif  // HPTRAIN_KERNELS_TOPK_DGC_H_
