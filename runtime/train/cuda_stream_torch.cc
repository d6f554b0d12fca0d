// cuda_stream.h with libtorch's CUDA build (c10_cuda).
#include <c10/cuda/CUDAStream.h>

#include "runtime/train/cuda_stream.h"

namespace hptrain::train {

void* CurrentCudaStream(const torch::Device& device) {
  return c10::cuda::getCurrentCUDAStream(device.has_index() ? device.index() : -1).stream();
}

}  // namespace hptrain::train
