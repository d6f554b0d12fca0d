// ScaleOnDevice: x *= factor for a buffer in device memory, enqueued on `stream` (a cudaStream_t
// of the buffer's device; null is that device's legacy default stream), without synchronising:
// the device twin of kernels::Scale, bit for bit (kernels/update). Any thread may call it: the
// kernel is launched on the buffer's device, and the thread's current device is left as it was.
// In a build without CUDA (device_scale_none.cc) it returns Unimplemented.
#ifndef HPTRAIN_RUNTIME_SYNC_DEVICE_DEVICE_SCALE_H_
#define HPTRAIN_RUNTIME_SYNC_DEVICE_DEVICE_SCALE_H_

#include <cstddef>

#include "absl/status/status.h"

namespace hptrain::sync {

absl::Status ScaleOnDevice(float* data, size_t count, float factor, void* stream);

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_DEVICE_DEVICE_SCALE_H_
