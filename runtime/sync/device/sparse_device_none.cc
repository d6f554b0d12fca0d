// sparse_device.h in a build without CUDA.
#include "runtime/sync/device/sparse_device.h"

namespace hptrain::sync {

absl::StatusOr<std::unique_ptr<DeviceSparseReducer>> DeviceSparseReducer::Create(
    const GradientLayout&, comm::Communicator*, const Options&) {
  return absl::UnimplementedError("sparse exchange on the GPU: this build of hptrain has no CUDA");
}

}  // namespace hptrain::sync
