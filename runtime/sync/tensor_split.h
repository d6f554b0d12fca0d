// TensorSplit: separates each gradient bucket into the tensors a compressing strategy encodes and
// the small ones it sends dense (biases, norms: fewer than kSmallTensorElements elements, where
// compression saves little and costs accuracy). Gather copies a bucket's large and small tensors
// into two contiguous scratch buffers; Scatter copies them back.
#ifndef HPTRAIN_RUNTIME_SYNC_TENSOR_SPLIT_H_
#define HPTRAIN_RUNTIME_SYNC_TENSOR_SPLIT_H_

#include <cstddef>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/sync/strategy.h"

namespace hptrain::sync {

inline constexpr size_t kSmallTensorElements = 4096;

// The tensors of each bucket as [begin, end) element ranges relative to the bucket's start, for
// strategies that work tensor by tensor (layer-wise top-k).
std::vector<std::vector<GradientLayout::Range>> TensorsPerBucket(const GradientLayout& layout);

class TensorSplit {
 public:
  TensorSplit() = default;
  // `min_large` = 0 treats every tensor as large.
  TensorSplit(const GradientLayout& layout, size_t min_large = kSmallTensorElements);

  size_t large_count(int bucket) const { return buckets_[bucket].large_count; }
  size_t small_count(int bucket) const { return buckets_[bucket].small_count; }
  size_t total_large() const;

  // `bucket_data` is the bucket's span of the flat gradient buffer.
  void Gather(int bucket, absl::Span<const float> bucket_data, float* large, float* small) const;
  void Scatter(int bucket, const float* large, const float* small,
               absl::Span<float> bucket_data) const;

  // Gather and Scatter for buffers that memcpy cannot reach (device memory): every piece is one
  // call of `copy(dst, src, count)`, in bucket order; the first error stops and is returned.
  using CopyFn = absl::FunctionRef<absl::Status(float* dst, const float* src, size_t count)>;
  absl::Status Gather(int bucket, const float* bucket_data, float* large, float* small,
                      CopyFn copy) const;
  absl::Status Scatter(int bucket, const float* large, const float* small, float* bucket_data,
                       CopyFn copy) const;

 private:
  struct Piece {
    size_t begin;  // offset inside the bucket
    size_t size;
    bool large;
  };
  struct Bucket {
    std::vector<Piece> pieces;
    size_t large_count = 0;
    size_t small_count = 0;
  };
  std::vector<Bucket> buckets_;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_TENSOR_SPLIT_H_
