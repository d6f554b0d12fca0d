// SmallTensorExchange: how the sparsifying strategies (topk, dgc) send the small tensors of a
// bucket. Tensors of fewer than kSmallTensorElements elements (biases, small kernels, a final
// classifier layer) are not sparsified: at 1 % density they would get a handful of entries per
// step and starve, while they are only a few percent of the model. As DGC prescribes for small
// layers they are all-reduced every step, here quantized to kSmallTensorBits bits with error
// feedback through the compressed ring (compressed_ring_allreduce.cc), which keeps the byte
// budget of the sparse exchange. The large tensors of the bucket go to the strategy's sparse path
// as one contiguous buffer.
//
// Bytes per worker per step for S small elements (bucket size 512):
//   2(N-1)/N · (S·kSmallTensorBits/8 + 8·ceil(S/512))
// For LeNet-5 (S = 3,626 of 61,706) at 4 bits that is 0.7 % of ssgd's bytes.
#ifndef HPTRAIN_RUNTIME_SYNC_SMALL_TENSORS_H_
#define HPTRAIN_RUNTIME_SYNC_SMALL_TENSORS_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/comm/communicator.h"
#include "runtime/sync/codecs/quantize_codec.h"
#include "runtime/sync/strategy.h"
#include "runtime/sync/tensor_split.h"

namespace hptrain::sync {

inline constexpr int kSmallTensorBits = 4;

class SmallTensorExchange {
 public:
  // `error_feedback` keeps each codec's quantization error for the next step.
  void Init(const GradientLayout& layout, comm::Communicator* comm, uint64_t seed,
            bool error_feedback);

  size_t large_count(int bucket) const { return split_.large_count(bucket); }
  size_t small_count(int bucket) const { return split_.small_count(bucket); }

  // Separates `gradients` (one bucket) into large() and small(). Without small tensors large()
  // is `gradients` itself and nothing is copied.
  void Split(int bucket, absl::Span<float> gradients);
  absl::Span<float> large() { return large_view_; }
  absl::Span<float> small() { return absl::MakeSpan(small_); }

  // All-reduces small() (sum over workers) quantized; returns this worker's encoded bytes.
  absl::Status ExchangeSmall(int64_t step, int bucket, size_t* wire_bytes);

  // Writes large() and small() back into `gradients` (the span given to Split).
  void Join(int bucket, absl::Span<float> gradients);

  // Adds what error feedback still holds for the bucket's small tensors into small() and clears
  // it (before a dense all-reduce, so nothing owed is lost). After Split.
  void FoldResidual(int bucket);

 private:
  comm::Communicator* comm_ = nullptr;
  TensorSplit split_;
  std::vector<std::unique_ptr<QuantizeCodec>> codecs_;  // per bucket
  std::vector<float> large_, small_;
  absl::Span<float> large_view_;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_SMALL_TENSORS_H_
