// The MP² push schedule (schedule.h).
#include "runtime/ps/mp2/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "runtime/base/splitmix64.h"

namespace hptrain::ps::mp2 {
namespace {

// Keys a generator by (seed, shard, piece) so that every piece gets its own permutation.
uint64_t StreamSeed(uint64_t seed, int shard, int piece) {
  SplitMix64 mix(seed ^ 0x6D70325F73636865ULL);  // "mp2_sche"
  uint64_t key = mix.Next();
  key ^= static_cast<uint64_t>(shard) * 0x9E3779B97F4A7C15ULL;
  key ^= static_cast<uint64_t>(piece) * 0xC2B2AE3D27D4EB4FULL + 1;
  return SplitMix64(key).Next();
}

}  // namespace

int RoundsPerCycle(double push_ratio) {
  if (push_ratio >= 1.0) return 1;
  // ceil(1/ρ), guarding against 1/0.1 = 10.000000000000002.
  const double inverse = 1.0 / push_ratio;
  const double rounded = std::round(inverse);
  return static_cast<int>(std::abs(inverse - rounded) < 1e-9 ? rounded : std::ceil(inverse));
}

SubsetSchedule::SubsetSchedule(uint64_t seed, int shard, int piece, int64_t size, double push_ratio)
    : size_(size) {
  predicted_ = size > kMaxDenseElements && push_ratio < 1.0;
  slices_.resize(static_cast<size_t>(size));
  std::iota(slices_.begin(), slices_.end(), 0);
  if (!predicted_) {
    slice_ = size;
    return;
  }
  cycle_ = RoundsPerCycle(push_ratio);
  slice_ = static_cast<int64_t>(std::ceil(push_ratio * static_cast<double>(size) - 1e-9));
  slice_ = std::clamp<int64_t>(slice_, 1, size);
  // Fisher–Yates with SplitMix64: the same permutation in every process and on every platform.
  SplitMix64 rng(StreamSeed(seed, shard, piece));
  for (int64_t i = size - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(i + 1)));
    std::swap(slices_[i], slices_[j]);
  }
  for (int c = 0; c < cycle_; ++c) {
    const int64_t begin = std::min(size, c * slice_);
    const int64_t end = std::min(size, (c + 1) * slice_);
    std::sort(slices_.begin() + begin, slices_.begin() + end);
  }
}

absl::Span<const int32_t> SubsetSchedule::Subset(int64_t round) const {
  if (!predicted_) return absl::MakeConstSpan(slices_);
  const int64_t c = round % cycle_;
  const int64_t begin = std::min(size_, c * slice_);
  const int64_t end = std::min(size_, (c + 1) * slice_);
  return absl::MakeConstSpan(slices_.data() + begin, static_cast<size_t>(end - begin));
}

void SubsetSchedule::Gather(int64_t round, const float* values, float* out) const {
  if (!predicted_) {
    std::memcpy(out, values, static_cast<size_t>(size_) * sizeof(float));
    return;
  }
  for (int32_t index : Subset(round)) *out++ = values[index];
}

uint64_t ScheduleFingerprint(uint64_t seed, double push_ratio) {
  uint64_t bits = 0;
  static_assert(sizeof(bits) == sizeof(push_ratio));
  std::memcpy(&bits, &push_ratio, sizeof(bits));
  SplitMix64 mix(seed ^ (bits * 0x9E3779B97F4A7C15ULL));
  return mix.Next();
}

}  // namespace hptrain::ps::mp2
