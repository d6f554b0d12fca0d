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

absl::Status SmallTensorExchange::ExchangeSmall(int64_t step, int bucket, size_t* wire_bytes) {
  *wire_bytes = 0;
  if (small_.empty()) return absl::OkStatus();
  QuantizeCodec& codec = *codecs_[bucket];
  codec.set_step(step);
  HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSumCompressed(small_.data(), small_.size(), codec),
                          "small tensors at ", kSmallTensorBits, " bits");
  *wire_bytes = codec.EncodedBytes(small_.size());
  return absl::OkStatus();
}

void SmallTensorExchange::Join(int bucket, absl::Span<float> gradients) {
  if (split_.small_count(bucket) == 0) return;
  split_.Scatter(bucket, large_.data(), small_.data(), gradients);
}

void SmallTensorExchange::FoldResidual(int bucket) {
  std::vector<float>& residual = codecs_[bucket]->residual();
  for (size_t i = 0; i < residual.size(); ++i) {
    small_[i] += residual[i];
    residual[i] = 0.0f;
  }
}

}  // namespace hptrain::sync
