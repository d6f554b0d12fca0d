// device_split.h on a CUDA build.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>

#include "runtime/base/status.h"
#include "runtime/comm/nccl/cuda_check.h"
#include "runtime/sync/device/device_split.h"

namespace hptrain::sync {

absl::StatusOr<std::unique_ptr<DeviceSplit>> DeviceSplit::Create(const GradientLayout& layout,
                                                                 size_t min_large) {
  std::unique_ptr<DeviceSplit> split(new DeviceSplit(TensorSplit(layout, min_large)));
  size_t large = 0, small = 0;
  for (size_t k = 0; k < layout.buckets.size(); ++k) {
    const int b = static_cast<int>(k);
    if (split->small_count(b) == 0) continue;  // such a bucket is not copied
    large = std::max(large, split->large_count(b));
    small = std::max(small, split->small_count(b));
  }
  if (large > 0) HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&split->large_, large * sizeof(float)));
  if (small > 0) HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&split->small_, small * sizeof(float)));
  return split;
}

DeviceSplit::~DeviceSplit() {
  if (large_ != nullptr) cudaFree(large_);
  if (small_ != nullptr) cudaFree(small_);
}

absl::Status DeviceSplit::Split(int bucket, float* bucket_data, void* stream) {
  if (small_count(bucket) == 0) {
    large_view_ = bucket_data;
    return absl::OkStatus();
  }
  large_view_ = large_;
  auto copy = [stream](float* dst, const float* src, size_t count) {
    return HPTRAIN_CUDA_STATUS(cudaMemcpyAsync(dst, src, count * sizeof(float),
                                               cudaMemcpyDeviceToDevice,
                                               static_cast<cudaStream_t>(stream)),
                               "splitting a bucket on the GPU");
  };
  return split_.Gather(bucket, bucket_data, large_, small_, copy);
}

absl::Status DeviceSplit::Join(int bucket, float* bucket_data, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (small_count(bucket) > 0) {
    auto copy = [s](float* dst, const float* src, size_t count) {
      return HPTRAIN_CUDA_STATUS(
          cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, s),
          "joining a bucket on the GPU");
    };
    HPTRAIN_RETURN_IF_ERROR(split_.Scatter(bucket, large_, small_, bucket_data, copy));
  }
  return HPTRAIN_CUDA_STATUS(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

}  // namespace hptrain::sync
