#include "runtime/sync/small_tensors.h"

#include "runtime/base/status.h"

namespace hptrain::sync {

void SmallTensorExchange::Init(const GradientLayout& layout, comm::Communicator* comm,
                               uint64_t seed, bool error_feedback) {
  comm_ = comm;
  split_ = TensorSplit(layout, kSmallTensorElements);
  codecs_.clear();
  for (size_t k = 0; k < layout.buckets.size(); ++k) {
    const size_t small = split_.small_count(static_cast<int>(k));
    codecs_.push_back(std::make_unique<QuantizeCodec>(
        kSmallTensorBits, 512, error_feedback ? small : 0, seed + k, comm->rank()));
  }
}

void SmallTensorExchange::Split(int bucket, absl::Span<float> gradients) {
  const size_t small = split_.small_count(bucket);
  small_.resize(small);
  if (small == 0) {
    large_view_ = gradients;
    return;
  }
  large_.resize(split_.large_count(bucket));
  split_.Gather(bucket, gradients, large_.data(), small_.data());
  large_view_ = absl::MakeSpan(large_);
}

absl::Status SmallTensorExchange::FinishSparse(int64_t step, int bucket,
                                               absl::Span<float> gradients, size_t large_wire,
                                               CompressionTally* tally) {
  size_t small_wire = 0;
  if (!small_.empty()) {
    QuantizeCodec& codec = *codecs_[bucket];
    codec.set_step(step);
    HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSumCompressed(small_.data(), small_.size(), codec),
                            "small tensors at ", kSmallTensorBits, " bits");
    small_wire = codec.EncodedBytes(small_.size());
  }
  Join(bucket, gradients);
  tally->Add(4.0 * gradients.size(), static_cast<double>(large_wire + small_wire));
  return absl::OkStatus();
}

absl::Status SmallTensorExchange::FinishDense(int bucket, absl::Span<float> gradients,
                                              CompressionTally* tally) {
  FoldResidual(codecs_[bucket]->residual(), absl::MakeSpan(small_));
  Join(bucket, gradients);
  tally->Add(4.0 * gradients.size(), 4.0 * gradients.size());
  return comm_->AllReduceSum(gradients.data(), gradients.size());
}

void SmallTensorExchange::Join(int bucket, absl::Span<float> gradients) {
  if (split_.small_count(bucket) == 0) return;
  split_.Scatter(bucket, large_.data(), small_.data(), gradients);
}

}  // namespace hptrain::sync
