#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "kernels/update/update.h"
#include "runtime/sync/device/device_scale.h"

namespace hptrain::sync {
namespace {

absl::Status CudaError(cudaError_t error, const char* what) {
  return absl::InternalError(
      absl::StrCat("scaling a device buffer: ", what, ": ", cudaGetErrorString(error)));
}

}  // namespace

absl::Status ScaleOnDevice(float* data, size_t count, float factor, void* stream) {
  if (count == 0) return absl::OkStatus();
  // The calling thread's current device need not be the buffer's (the bucketed reducer's thread
  // never selects one): the kernel runs on the buffer's device, whose stream `stream` is.
  cudaPointerAttributes attributes;
  cudaError_t error = cudaPointerGetAttributes(&attributes, data);
  if (error != cudaSuccess) return CudaError(error, "cudaPointerGetAttributes");
  int previous = 0;
  error = cudaGetDevice(&previous);
  if (error != cudaSuccess) return CudaError(error, "cudaGetDevice");
  const bool switch_device = attributes.device != previous;
  if (switch_device) {
    error = cudaSetDevice(attributes.device);
    if (error != cudaSuccess) return CudaError(error, "cudaSetDevice");
  }
  kernels::ScaleCuda(data, count, factor, stream);
  error = cudaGetLastError();
  if (switch_device) cudaSetDevice(previous);
  if (error != cudaSuccess) return CudaError(error, "the kernel launch");
  return absl::OkStatus();
}

}  // namespace hptrain::sync
