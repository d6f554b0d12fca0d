// SplitMix64 (Steele, Lea, Flood 2014): a tiny random generator with a fully specified output, so
// everything derived from it (data order, synthetic data) is bit-identical across compilers,
// standard libraries and processes.
#ifndef HPTRAIN_RUNTIME_BASE_SPLITMIX64_H_
#define HPTRAIN_RUNTIME_BASE_SPLITMIX64_H_

#include <cstdint>

namespace hptrain {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // Uniform integer in [0, bound), bound > 0, unbiased by rejection.
  uint64_t Below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
    for (;;) {
      const uint64_t r = Next();
      if (r >= threshold) return r % bound;
    }
  }

  // Uniform in [-1, 1), from the top 53 bits.
  double Symmetric() { return static_cast<double>(Next() >> 11) * 0x1.0p-52 - 1.0; }

 private:
  uint64_t state_;
};

}  // namespace hptrain

#endif  // HPTRAIN_RUNTIME_BASE_SPLITMIX64_H_
