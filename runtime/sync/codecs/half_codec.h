// HalfCodec: fp16 on the wire (2 bytes per element), optionally with error feedback.
#ifndef HPTRAIN_RUNTIME_SYNC_CODECS_HALF_CODEC_H_
#define HPTRAIN_RUNTIME_SYNC_CODECS_HALF_CODEC_H_

#include <vector>

#include "runtime/comm/chunk_codec.h"

namespace hptrain::sync {

class HalfCodec : public comm::ChunkCodec {
 public:
  // `residual_size` > 0 enables error feedback over that many elements.
  explicit HalfCodec(size_t residual_size = 0) : residual_(residual_size, 0.0f) {}

  size_t EncodedBytes(size_t count) const override { return 2 * count; }
  absl::Status Encode(const float* data, size_t count, size_t offset, uint64_t salt,
                      uint8_t* out) override;
  absl::Status Decode(const uint8_t* in, size_t bytes, size_t count, float* out) override;
  absl::Status DecodeAccumulate(const uint8_t* in, size_t bytes, size_t count,
                                float* acc) override;

  std::vector<float>& residual() { return residual_; }

 private:
  std::vector<float> residual_;
  std::vector<float> scratch_;
  std::vector<float> sent_;
  std::vector<uint16_t> halves_;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_CODECS_HALF_CODEC_H_
