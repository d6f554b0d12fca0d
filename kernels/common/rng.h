// Counter-based random numbers for kernels: the value drawn for element i of a call is a pure
// function of (seed, step, i), so a CPU kernel, its CUDA twin and any split of the loop over
// threads or thread blocks draw exactly the same numbers, and a step can be replayed.
//
// Construction (all integer arithmetic, hence bit-identical on host and device):
//   key       = Mix64(Mix64(seed ^ kSeedSalt) ^ (step * kGolden))        once per call
//   block_key = Mix64(key + (i >> 32) * kGolden)                          once per 2^32 elements
//   bits(i)   = LowBias32(LowBias32((uint32)i ^ lo32(block_key)) ^ hi32(block_key))
//   u(i)      = (bits(i) >> 8) * 2^-24                                     uniform on [0, 1)
// Mix64 is the SplitMix64 finaliser (Steele et al. 2014) and LowBias32 is C. Wellons' 32-bit
// "lowbias32" integer hash. The per-element part uses 32-bit multiplies only, because those are
// single instructions in AVX2 (vpmulld) and on GPUs (IMAD) while 64-bit multiplies are not;
// the 64-bit key still separates every (seed, step) pair. u has 24 random bits and is exactly
// representable as a float, so host and device agree on it bit for bit.
//
// Header-only, no state: every function is thread-safe and usable in device code.
#ifndef HPTRAIN_KERNELS_COMMON_RNG_H_
#define HPTRAIN_KERNELS_COMMON_RNG_H_

#include <cstdint>

#include "kernels/common/host_device.h"

namespace hptrain::kernels {

inline constexpr uint64_t kRngGolden = 0x9E3779B97F4A7C15ULL;
inline constexpr uint64_t kRngSeedSalt = 0x5851F42D4C957F2DULL;

// SplitMix64 finaliser: a bijection on 64-bit integers with full avalanche.
HPTRAIN_HOST_DEVICE uint64_t RngMix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// lowbias32 (Wellons): a bijection on 32-bit integers, two multiplies.
HPTRAIN_HOST_DEVICE uint32_t RngLowBias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

// The per-call key of (seed, step).
HPTRAIN_HOST_DEVICE uint64_t RngKey(uint64_t seed, uint64_t step) {
  return RngMix64(RngMix64(seed ^ kRngSeedSalt) ^ (step * kRngGolden));
}

// The key of the elements whose index has high word `index_hi` (index >> 32).
HPTRAIN_HOST_DEVICE uint64_t RngBlockKey(uint64_t key, uint32_t index_hi) {
  return RngMix64(key + static_cast<uint64_t>(index_hi) * kRngGolden);
}

// 32 random bits for the element whose index has low word `index_lo`.
HPTRAIN_HOST_DEVICE uint32_t RngBits(uint64_t block_key, uint32_t index_lo) {
  const uint32_t h = RngLowBias32(index_lo ^ static_cast<uint32_t>(block_key));
  return RngLowBias32(h ^ static_cast<uint32_t>(block_key >> 32));
}

// The top 24 of `bits` as a float in [0, 1); exact (an integer below 2^24 times 2^-24).
HPTRAIN_HOST_DEVICE float RngUniform24(uint32_t bits) {
  return static_cast<float>(static_cast<int32_t>(bits >> 8)) * 5.9604644775390625e-08f;  // 2^-24
}

// u(i) of the (seed, step) stream in one call; loops should hoist RngKey/RngBlockKey instead.
HPTRAIN_HOST_DEVICE float RngUniform(uint64_t seed, uint64_t step, uint64_t index) {
  const uint64_t block_key = RngBlockKey(RngKey(seed, step), static_cast<uint32_t>(index >> 32));
  return RngUniform24(RngBits(block_key, static_cast<uint32_t>(index)));
}

}  // namespace hptrain::kernels

#endif  // HPTRAIN_KERNELS_COMMON_RNG_H_
