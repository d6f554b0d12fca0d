// The CUDA stream libtorch runs its work on, for the kernels of our own that must follow it (the
// device optimizer's update after backward and the gradient division).
#ifndef HPTRAIN_RUNTIME_TRAIN_CUDA_STREAM_H_
#define HPTRAIN_RUNTIME_TRAIN_CUDA_STREAM_H_

#include <torch/types.h>

namespace hptrain::train {

// libtorch's current stream on `device` (a CUDA device; no index: the current one) for the
// calling thread, as a cudaStream_t. Null (the legacy default stream, libtorch's default) where
// libtorch is built without CUDA (no c10_cuda): no CUDA tensor exists in such a process.
void* CurrentCudaStream(const torch::Device& device);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_CUDA_STREAM_H_
