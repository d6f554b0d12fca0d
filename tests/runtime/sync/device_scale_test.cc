// ScaleOnDevice (runtime/sync/device/device_scale.h), the division by the global batch of a device
// bucket: bit for bit kernels::Scale, on every visible GPU, called from a thread that never
// selected that GPU (as the bucketed reducer's thread), which keeps its current device.
#include "runtime/sync/device/device_scale.h"

#include <cuda_runtime.h>

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/update/update.h"
#include "tests/cuda_test_util.h"

namespace hptrain::sync {
namespace {

using cuda_test::DeviceBuffer;

TEST(DeviceScale, MatchesTheHostScaleOnEveryGpuFromAnyThread) {
  SKIP_WITHOUT_CUDA_DEVICE();
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  std::vector<float> host(10007);
  for (size_t i = 0; i < host.size(); ++i) host[i] = 0.37f * static_cast<float>(i % 101) - 9.0f;
  const float factor = 1.0f / 48.0f;
  std::vector<float> expected = host;
  kernels::Scale(expected.data(), expected.size(), factor);
  for (int d = 0; d < devices; ++d) {
    ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
    DeviceBuffer<float> buffer(host);
    absl::Status status;
    int current_after = -1;
    std::thread other([&] {
      status = ScaleOnDevice(buffer.get(), host.size(), factor, /*stream=*/nullptr);
      cudaGetDevice(&current_after);
    });
    other.join();
    ASSERT_TRUE(status.ok()) << "device " << d << ": " << status;
    EXPECT_EQ(current_after, 0) << "the thread's current device changed";
    ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
    EXPECT_EQ(buffer.Download(), expected) << "device " << d;
  }
  EXPECT_TRUE(ScaleOnDevice(nullptr, 0, factor, nullptr).ok());  // nothing to scale
}

}  // namespace
}  // namespace hptrain::sync
