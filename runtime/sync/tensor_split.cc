#include "runtime/sync/tensor_split.h"

#include <cstring>

namespace hptrain::sync {

std::vector<std::vector<GradientLayout::Range>> TensorsPerBucket(const GradientLayout& layout) {
  std::vector<std::vector<GradientLayout::Range>> result(layout.buckets.size());
  for (size_t k = 0; k < layout.buckets.size(); ++k) {
    const auto& range = layout.buckets[k];
    for (const auto& t : layout.tensors) {
      if (t.begin >= range.begin && t.end <= range.end) {
        result[k].push_back({t.begin - range.begin, t.end - range.begin});
      }
    }
  }
  return result;
}

TensorSplit::TensorSplit(const GradientLayout& layout, size_t min_large) {
  buckets_.resize(layout.buckets.size());
  for (size_t k = 0; k < layout.buckets.size(); ++k) {
    const auto& range = layout.buckets[k];
    for (const auto& t : layout.tensors) {
      if (t.begin < range.begin || t.end > range.end) continue;
      const size_t size = t.end - t.begin;
      const bool large = size >= min_large;
      buckets_[k].pieces.push_back({t.begin - range.begin, size, large});
      (large ? buckets_[k].large_count : buckets_[k].small_count) += size;
    }
  }
}

size_t TensorSplit::total_large() const {
  size_t total = 0;
  for (const auto& b : buckets_) total += b.large_count;
  return total;
}

void TensorSplit::Gather(int bucket, absl::Span<const float> data, float* large,
                         float* small) const {
  for (const Piece& p : buckets_[bucket].pieces) {
    float*& dst = p.large ? large : small;
    std::memcpy(dst, data.data() + p.begin, p.size * sizeof(float));
    dst += p.size;
  }
}

void TensorSplit::Scatter(int bucket, const float* large, const float* small,
                          absl::Span<float> data) const {
  for (const Piece& p : buckets_[bucket].pieces) {
    const float*& src = p.large ? large : small;
    std::memcpy(data.data() + p.begin, src, p.size * sizeof(float));
    src += p.size;
  }
}

absl::Status TensorSplit::Gather(int bucket, const float* data, float* large, float* small,
                                 CopyFn copy) const {
  for (const Piece& p : buckets_[bucket].pieces) {
    float*& dst = p.large ? large : small;
    if (absl::Status s = copy(dst, data + p.begin, p.size); !s.ok()) return s;
    dst += p.size;
  }
  return absl::OkStatus();
}

absl::Status TensorSplit::Scatter(int bucket, const float* large, const float* small, float* data,
                                  CopyFn copy) const {
  for (const Piece& p : buckets_[bucket].pieces) {
    const float*& src = p.large ? large : small;
    if (absl::Status s = copy(data + p.begin, src, p.size); !s.ok()) return s;
    src += p.size;
  }
  return absl::OkStatus();
}

}  // namespace hptrain::sync
