#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "kernels/update/update.h"
#include "runtime/sync/device/device_scale.h"

namespace hptrain::sync {

absl::Status ScaleOnDevice(float* data, size_t count, float factor, void* stream) {
  if (count == 0) return absl::OkStatus();
  kernels::ScaleCuda(data, count, factor, stream);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    return absl::InternalError(
        absl::StrCat("scaling a device buffer: ", cudaGetErrorString(error)));
  }
  return absl::OkStatus();
}

}  // namespace hptrain::sync
