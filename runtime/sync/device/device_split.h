// DeviceSplit: TensorSplit (tensor_split.h) for a bucket in device memory, for the strategies
// that reduce on a GPU (Strategy::reduces_on_device) and send their small tensors apart from the
// large ones: quantized with bits dynamic, topk and dgc. Split copies the bucket's large and small
// tensors into two device scratch buffers, Join copies them back, each piece one asynchronous
// device-to-device copy on the caller's stream (the device communicator's, so that the
// collectives in between need no synchronization).
//
// The scratch buffers are sized for the largest bucket and shared by all buckets: one bucket at a
// time, as the reducer's communication thread calls the strategy. A bucket without small tensors
// is not copied: large() is the bucket itself.
//
// In a build without CUDA (device_split_none.cc) Create returns Unimplemented.
#ifndef HPTRAIN_RUNTIME_SYNC_DEVICE_DEVICE_SPLIT_H_
#define HPTRAIN_RUNTIME_SYNC_DEVICE_DEVICE_SPLIT_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/sync/strategy.h"
#include "runtime/sync/tensor_split.h"

namespace hptrain::sync {

class DeviceSplit {
 public:
  // Tensors of fewer than `min_large` elements are small. Allocates the scratch buffers on the
  // current device.
  static absl::StatusOr<std::unique_ptr<DeviceSplit>> Create(const GradientLayout& layout,
                                                            size_t min_large);
  ~DeviceSplit();
  DeviceSplit(const DeviceSplit&) = delete;
  DeviceSplit& operator=(const DeviceSplit&) = delete;

  size_t large_count(int bucket) const { return split_.large_count(bucket); }
  size_t small_count(int bucket) const { return split_.small_count(bucket); }

  // Enqueues the copies of bucket `bucket` (device buffer `bucket_data`) into large() and small()
  // on `stream` (a cudaStream_t). Without small tensors large() becomes bucket_data itself.
  absl::Status Split(int bucket, float* bucket_data, void* stream);
  float* large() const { return large_view_; }
  float* small() const { return small_; }

  // Enqueues the copies of large() and small() back into the bucket given to Split, then waits
  // for `stream`: on return the bucket holds its result.
  absl::Status Join(int bucket, float* bucket_data, void* stream);

 private:
  explicit DeviceSplit(TensorSplit split) : split_(std::move(split)) {}

  TensorSplit split_;
  float* large_ = nullptr;  // device scratch, the largest bucket's large_count floats
  float* small_ = nullptr;  // device scratch, the largest bucket's small_count floats
  float* large_view_ = nullptr;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_DEVICE_DEVICE_SPLIT_H_
