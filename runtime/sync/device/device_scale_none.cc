// device_scale.h in a build without CUDA: there are no device buffers to scale.
#include "runtime/sync/device/device_scale.h"

namespace hptrain::sync {

absl::Status ScaleOnDevice(float*, size_t, float, void*) {
  return absl::UnimplementedError("scaling a device buffer: this build of hptrain has no CUDA");
}

}  // namespace hptrain::sync
