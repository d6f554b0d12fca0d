#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/chunk_codec.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/loopback_transport.h"
#include "tests/runtime/comm/gloo_and_loopback.h"
#include "tests/runtime/comm/spawn.h"

namespace hptrain::comm {
namespace {

// 4 bytes per float, bit for bit.
class IdentityCodec : public ChunkCodec {
 public:
  size_t EncodedBytes(size_t count) const override { return 4 * count; }
  absl::Status Encode(const float* data, size_t count, size_t, uint64_t, uint8_t* out) override {
    std::memcpy(out, data, 4 * count);
    return absl::OkStatus();
  }
  absl::Status Decode(const uint8_t* in, size_t, size_t count, float* out) override {
    std::memcpy(out, in, 4 * count);
    return absl::OkStatus();
  }
  absl::Status DecodeAccumulate(const uint8_t* in, size_t, size_t count, float* acc) override {
    for (size_t i = 0; i < count; ++i) {
      float v;
      std::memcpy(&v, in + 4 * i, 4);
      acc[i] += v;
    }
    return absl::OkStatus();
  }
};

// Keeps the upper 16 bits of each float (bfloat16 by truncation), with error feedback.
class TruncatingCodec : public IdentityCodec {
 public:
  explicit TruncatingCodec(size_t n) : residual_(n, 0.0f) {}
  size_t EncodedBytes(size_t count) const override { return 2 * count; }
  absl::Status Encode(const float* data, size_t count, size_t offset, uint64_t,
                      uint8_t* out) override {
    for (size_t i = 0; i < count; ++i) {
      float x = data[i] + residual_[offset + i];
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      uint16_t top = static_cast<uint16_t>(bits >> 16);
      std::memcpy(out + 2 * i, &top, 2);
      residual_[offset + i] = x - Widen(top);
    }
    return absl::OkStatus();
  }
  absl::Status Decode(const uint8_t* in, size_t, size_t count, float* out) override {
    for (size_t i = 0; i < count; ++i) out[i] = Widen(Read(in, i));
    return absl::OkStatus();
  }
  absl::Status DecodeAccumulate(const uint8_t* in, size_t, size_t count, float* acc) override {
    for (size_t i = 0; i < count; ++i) acc[i] += Widen(Read(in, i));
    return absl::OkStatus();
  }
  const std::vector<float>& residual() const { return residual_; }

 private:
  static uint16_t Read(const uint8_t* in, size_t i) {
    uint16_t v;
    std::memcpy(&v, in + 2 * i, 2);
    return v;
  }
  static float Widen(uint16_t top) {
    uint32_t bits = static_cast<uint32_t>(top) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  std::vector<float> residual_;
};

// IdentityCodec that refuses to encode NaN, as the quantizer does.
class NanRejectingCodec : public IdentityCodec {
 public:
  absl::Status Encode(const float* data, size_t count, size_t offset, uint64_t salt,
                      uint8_t* out) override {
    for (size_t i = 0; i < count; ++i) {
      if (std::isnan(data[i])) return absl::InvalidArgumentError("NaN in the input");
    }
    return IdentityCodec::Encode(data, count, offset, salt, out);
  }
};

std::vector<std::unique_ptr<Communicator>> MakeGroup(int size) {
  auto hub = std::make_shared<LoopbackHub>(size);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r) {
    comms.push_back(
        std::make_unique<TransportCommunicator>(std::make_unique<LoopbackTransport>(hub, r)));
  }
  return comms;
}

std::vector<std::vector<float>> Inputs(int size, size_t count) {
  std::vector<std::vector<float>> data(size, std::vector<float>(count));
  for (int r = 0; r < size; ++r) {
    for (size_t i = 0; i < count; ++i) data[r][i] = 0.1f * (r + 1) + 0.00037f * (i % 97) - 0.01f;
  }
  return data;
}

TEST(CompressedRingAllReduce, IdentityCodecIsBitwiseTheRingAllReduce) {
  for (int size : {1, 2, 3, 4}) {
    const size_t count = 1003;
    auto plain = Inputs(size, count);
    auto coded = plain;
    auto comms_a = MakeGroup(size);
    auto comms_b = MakeGroup(size);
    std::vector<IdentityCodec> codecs(size);
    testing::Spawn(size, [&](int r) {
      ASSERT_TRUE(comms_a[r]->AllReduceSum(plain[r].data(), count).ok());
      ASSERT_TRUE(comms_b[r]->AllReduceSumCompressed(coded[r].data(), count, codecs[r]).ok());
    });
    for (int r = 0; r < size; ++r) {
      ASSERT_EQ(std::memcmp(plain[r].data(), coded[r].data(), 4 * count), 0) << "size " << size;
    }
  }
}

TEST(CompressedRingAllReduce, LossyCodecAgreesOnAllRanksAndHalvesTheBytes) {
  const int size = 4;
  const size_t count = 4000;
  auto data = Inputs(size, count);
  auto comms = MakeGroup(size);
  std::vector<TruncatingCodec> codecs(size, TruncatingCodec(count));
  testing::Spawn(size, [&](int r) {
    ASSERT_TRUE(comms[r]->AllReduceSumCompressed(data[r].data(), count, codecs[r]).ok());
  });
  auto exact = Inputs(size, count);
  for (size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int r = 0; r < size; ++r) sum += exact[r][i];
    EXPECT_NEAR(data[0][i], sum, 0.02f * std::abs(sum) + 1e-3f) << i;
    for (int r = 1; r < size; ++r) ASSERT_EQ(data[r][i], data[0][i]) << "rank " << r;
  }
  // 2(N-1)/N of a 2-bytes-per-element buffer.
  const double expected = 2.0 * (size - 1) / size * 2.0 * count;
  for (int r = 0; r < size; ++r) EXPECT_EQ(comms[r]->bytes_sent(), expected);
}

// Over Gloo the two passes post every receive first, and the encoding of step s + 1 happens when
// step s's chunk arrives; the result must be the bits of the step-by-step path (loopback), error
// feedback included, over repeated calls.
TEST(CompressedRingAllReduce, OverGlooGivesTheBitsOfTheStepByStepPath) {
  const int size = 4;
  const std::vector<size_t> counts = {1, 3, 4, 5, 1000, 61706};
  size_t total = 0;
  for (size_t c : counts) total += c;
  testing::ResultsPerRank tcp(size), loop(size);
  testing::SpawnOverGlooAndLoopback(size, [&](int r, Communicator& gloo, Communicator& loopback) {
    TruncatingCodec gloo_codec(total), loop_codec(total);
    for (int round = 0; round < 3; ++round) {
      for (size_t count : counts) {
        std::vector<float> a(count);
        for (size_t i = 0; i < count; ++i) a[i] = 0.1f * (r + round + 1) + 0.0137f * (i % 101);
        std::vector<float> b = a;
        ASSERT_TRUE(gloo.AllReduceSumCompressed(a.data(), count, gloo_codec).ok());
        ASSERT_TRUE(loopback.AllReduceSumCompressed(b.data(), count, loop_codec).ok());
        tcp[r].push_back(std::move(a));
        loop[r].push_back(std::move(b));
      }
    }
    EXPECT_EQ(gloo_codec.residual(), loop_codec.residual()) << "rank " << r;
  });
  testing::ExpectSameBitsEverywhere(tcp, loop);
}

// A rank whose codec fails in the middle of the reduce-scatter returns the codec's error, naming
// the chunk and step, and sends nothing more; its peers fail on the missing steps instead of
// completing with a sum that lacks its chunk.
TEST(CompressedRingAllReduce, ACodecErrorEndsThePassAndEveryRankFails) {
  const int size = 4;
  const size_t count = 1000;  // chunk 1 is [250, 500)
  std::vector<absl::Status> results(size);
  testing::SpawnOverGloo(
      size,
      [&](int r, Communicator& comm) {
        std::vector<float> data(count, 1.0f);
        // Rank 2 encodes chunk (2 - 1) = 1 in its second reduce-scatter step.
        if (r == 2) data[300] = std::nanf("");
        NanRejectingCodec codec;
        results[r] = comm.AllReduceSumCompressed(data.data(), count, codec);
      },
      std::chrono::seconds(2));
  EXPECT_EQ(results[2].code(), absl::StatusCode::kInvalidArgument) << results[2];
  EXPECT_NE(results[2].message().find("encoding chunk 1 in reduce-scatter step 2"),
            std::string::npos)
      << results[2];
  for (int r = 0; r < size; ++r) EXPECT_FALSE(results[r].ok()) << "rank " << r;
}

}  // namespace
}  // namespace hptrain::comm
