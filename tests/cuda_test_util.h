// What the CUDA tests share: the reason the machine cannot run them (a test then skips, printing
// that reason), and for the kernel twins a device buffer that owns its memory.
#ifndef HPTRAIN_TESTS_CUDA_TEST_UTIL_H_
#define HPTRAIN_TESTS_CUDA_TEST_UTIL_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace hptrain::cuda_test {

// Why this machine cannot run the GPU tests, or "" if it can.
inline std::string NoCudaDeviceReason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(err) + " (" +
           cudaGetErrorString(err) + ")";
  }
  if (count == 0) return "cudaGetDeviceCount returned 0";
  return "";
}

// Skips the calling test, with the reason, unless a CUDA device is usable.
#define SKIP_WITHOUT_CUDA_DEVICE()                                            \
  do {                                                                        \
    const std::string no_device = ::hptrain::cuda_test::NoCudaDeviceReason(); \
    if (!no_device.empty()) GTEST_SKIP() << "no CUDA device: " << no_device;  \
  } while (0)

// A device buffer of n elements (zeroed, or a copy of a host vector), freed on scope exit.
// Download() waits for the device and copies the first `count` elements (default all) back.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(&ptr_, bytes()), cudaSuccess);
    EXPECT_EQ(cudaMemset(ptr_, 0, bytes()), cudaSuccess);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() { return ptr_; }
  std::vector<T> Download(size_t count) {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<T> host(count);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr_, count * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }
  std::vector<T> Download() { return Download(n_); }

 private:
  // cudaMalloc of 0 bytes returns no pointer to copy from; keep one element.
  size_t bytes() const { return (n_ == 0 ? 1 : n_) * sizeof(T); }
  size_t n_;
  T* ptr_ = nullptr;
};

}  // namespace hptrain::cuda_test

#endif  // HPTRAIN_TESTS_CUDA_TEST_UTIL_H_
