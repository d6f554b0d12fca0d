// device_split.h in a build without CUDA: no DeviceSplit can be made, so none of the other members
// is ever reached.
#include "runtime/sync/device/device_split.h"

namespace hptrain::sync {

absl::StatusOr<std::unique_ptr<DeviceSplit>> DeviceSplit::Create(const GradientLayout&, size_t) {
  return absl::UnimplementedError("device split: this build of hptrain has no CUDA");
}
DeviceSplit::~DeviceSplit() = default;
absl::Status DeviceSplit::Split(int, float*, void*) {
  return absl::UnimplementedError("device split: this build of hptrain has no CUDA");
}
absl::Status DeviceSplit::Join(int, float*, void*) {
  return absl::UnimplementedError("device split: this build of hptrain has no CUDA");
}

}  // namespace hptrain::sync
