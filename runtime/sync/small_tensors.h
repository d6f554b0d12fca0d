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
// For LeNet-5 (S = 3,626 of 61,706) at 4 bits: 2,815 bytes, 0.8 % of ssgd's 370,236.
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

  // The two ways a strategy's step ends, after Split and after the strategy worked on large():
  //
  // Sparse: all-reduces small() quantized, joins, and tallies `large_wire` (the bytes of the
  // large tensors' exchange) plus the small tensors' bytes against the bucket's fp32 size.
  absl::Status FinishSparse(int64_t step, int bucket, absl::Span<float> gradients,
                            size_t large_wire, CompressionTally* tally);
  // Dense (density >= 0.5): folds what error feedback still holds for the small tensors into
  // small() (nothing owed is lost), joins, and all-reduces the whole bucket in fp32 as ssgd does.
  absl::Status FinishDense(int bucket, absl::Span<float> gradients, CompressionTally* tally);

 private:
  // Writes large() and small() back into `gradients` (the span given to Split).
  void Join(int bucket, absl::Span<float> gradients);

  comm::Communicator* comm_ = nullptr;
  TensorSplit split_;
  std::vector<std::unique_ptr<QuantizeCodec>> codecs_;  // per bucket
  std::vector<float> large_, small_;
  absl::Span<float> large_view_;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_SMALL_TENSORS_H_
