// cuda_stream.h with a libtorch built without CUDA.
#include "runtime/train/cuda_stream.h"

namespace hptrain::train {

void* CurrentCudaStream(const torch::Device&) { return nullptr; }

}  // namespace hptrain::train
