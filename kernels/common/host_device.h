// What the CPU kernels and their CUDA twins share at the lowest level: the HPTRAIN_HOST_DEVICE
// qualifier for scalar math compiled for both, and exact float <-> bit-pattern conversions.
#ifndef HPTRAIN_KERNELS_COMMON_HOST_DEVICE_H_
#define HPTRAIN_KERNELS_COMMON_HOST_DEVICE_H_

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define HPTRAIN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define HPTRAIN_HOST_DEVICE inline
#endif

namespace hptrain::kernels {

// The IEEE-754 bits of `f`, and the float with bits `u`.
HPTRAIN_HOST_DEVICE uint32_t FloatBits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

HPTRAIN_HOST_DEVICE float BitsToFloat(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

}  // namespace hptrain::kernels

#endif  // HPTRAIN_KERNELS_COMMON_HOST_DEVICE_H_
