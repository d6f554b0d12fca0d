// The CUDA quantization kernels against the CPU reference: the same codes and scales for the same
// seed and step, decoded values within 1 ulp (they are expected to be equal), the same residuals,
// and the same rejection of non-finite input. Every test skips itself, printing why, on a machine
// without a usable CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/quantize/quantize.h"
#include "tests/cuda_test_util.h"

namespace hptrain::kernels {
namespace {

using Params = QuantizeParams;

using cuda_test::DeviceBuffer;

Params MakeParams(int bits, int64_t bucket_size, Params::Scale scale, Params::Rounding rounding) {
  Params p;
  p.bits = bits;
  p.bucket_size = bucket_size;
  p.scale = scale;
  p.rounding = rounding;
  p.seed = 1234;
  p.step = 77;
  return p;
}

std::vector<float> RandomValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng) * 3.0f + 0.5f;
  for (int64_t i = 0; i < n; i += 977) x[i] = 0.0f;  // some exact zeros, some −0
  for (int64_t i = 1; i < n; i += 1303) x[i] = -0.0f;
  return x;
}

// Distance in units in the last place between two finite floats of the same sign (or zeros).
int64_t UlpDistance(float a, float b) {
  if (a == b) return 0;
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if ((ia < 0) != (ib < 0)) return std::numeric_limits<int64_t>::max();
  return std::abs(static_cast<int64_t>(ia) - static_cast<int64_t>(ib));
}

struct CpuResult {
  std::vector<float> meta, decoded, residual;
  std::vector<uint8_t> codes;
};

CpuResult RunCpu(const std::vector<float>& x, const std::vector<float>* residual, const Params& p) {
  const int64_t n = static_cast<int64_t>(x.size());
  CpuResult r;
  r.meta.assign(2 * NumBuckets(n, p.bucket_size), 0.0f);
  r.codes.assign(QuantizedCodeBytes(n, p.bits), 0);
  r.decoded.assign(x.size(), 0.0f);
  absl::Status s;
  if (residual != nullptr) {
    r.residual = *residual;
    s = QuantizeWithErrorFeedback(x.data(), r.residual.data(), n, p, r.meta.data(), r.codes.data());
  } else {
    s = Quantize(x.data(), n, p, r.meta.data(), r.codes.data());
  }
  EXPECT_TRUE(s.ok()) << s;
  Dequantize(r.meta.data(), r.codes.data(), n, p, r.decoded.data());
  return r;
}

// v with `offset` zero elements in front, so that a device copy can be read at an offset.
template <typename T>
std::vector<T> Padded(const std::vector<T>& v, int offset) {
  std::vector<T> padded(static_cast<size_t>(offset), T{});
  padded.insert(padded.end(), v.begin(), v.end());
  return padded;
}

// The device buffers start `offset` elements (floats) or bytes (codes) into their allocations:
// offset 1 leaves them unaligned, which takes the kernels' element-by-element path.
void ExpectCudaMatchesCpu(const std::vector<float>& x, const Params& p, bool feedback,
                          int offset = 0) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> residual_init(x.size());
  for (size_t i = 0; i < x.size(); ++i) residual_init[i] = 0.001f * static_cast<float>(i % 7);
  const CpuResult cpu = RunCpu(x, feedback ? &residual_init : nullptr, p);

  DeviceBuffer<float> d_x(Padded(x, offset)), d_residual(Padded(residual_init, offset));
  DeviceBuffer<float> d_out(x.size() + offset), d_meta(cpu.meta.size());
  DeviceBuffer<uint8_t> d_codes(cpu.codes.size() + offset);
  float* x_at = d_x.get() + offset;
  float* residual_at = d_residual.get() + offset;
  uint8_t* codes_at = d_codes.get() + offset;
  const absl::Status s = feedback ? QuantizeWithErrorFeedbackCuda(x_at, residual_at, n, p,
                                                                  d_meta.get(), codes_at, nullptr)
                                  : QuantizeCuda(x_at, n, p, d_meta.get(), codes_at, nullptr);
  ASSERT_TRUE(s.ok()) << s;
  const std::vector<float> meta = d_meta.Download();
  ASSERT_EQ(std::memcmp(meta.data(), cpu.meta.data(), meta.size() * sizeof(float)), 0);
  ASSERT_EQ(d_codes.Download(), Padded(cpu.codes, offset));
  if (feedback) {
    const std::vector<float> residual = d_residual.Download();
    ASSERT_EQ(std::memcmp(residual.data() + offset, cpu.residual.data(), n * sizeof(float)), 0);
  }

  DequantizeCuda(d_meta.get(), codes_at, n, p, d_out.get() + offset, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> decoded = d_out.Download();
  if (offset > 0) ASSERT_EQ(decoded[0], 0.0f);  // nothing written before the buffer
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_LE(UlpDistance(decoded[i + offset], cpu.decoded[i]), 1) << i;
  }

  // Accumulate onto x: compare with x + CPU decode.
  DequantizeAccumulateCuda(d_meta.get(), codes_at, n, p, x_at, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> acc = d_x.Download();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_LE(UlpDistance(acc[i + offset], x[i] + cpu.decoded[i]), 1) << i;
  }
}

TEST(QuantizeCuda, SameCodesAndScalesAsCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<float> x = RandomValues(100003, 1);
  // 3 and 1000 are not multiples of 8 (buckets share bytes and code words; 3 is also no multiple
  // of 4, so ranges are read element by element); 10000 spans several warps' pieces; 100003 is
  // one bucket for the whole buffer.
  for (int64_t bucket_size :
       {int64_t{3}, int64_t{512}, int64_t{1000}, int64_t{10000}, int64_t{100003}}) {
    for (int bits : {1, 2, 4, 8}) {
      for (Params::Scale scale : {Params::kMinMax, Params::kAbsMax}) {
        for (Params::Rounding rounding : {Params::kStochastic, Params::kNearest}) {
          SCOPED_TRACE(testing::Message() << "bucket " << bucket_size << " bits " << bits
                                          << " scale " << scale << " rounding " << rounding);
          ExpectCudaMatchesCpu(x, MakeParams(bits, bucket_size, scale, rounding), false);
        }
      }
    }
  }
}

TEST(QuantizeCuda, ErrorFeedbackMatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<float> x = RandomValues(50001, 2);
  for (int bits : {1, 2, 4, 8}) {
    SCOPED_TRACE(bits);
    ExpectCudaMatchesCpu(x, MakeParams(bits, 512, Params::kMinMax, Params::kStochastic), true);
  }
}

TEST(QuantizeCuda, UnalignedBuffersMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<float> x = RandomValues(20011, 5);
  for (int bits : {1, 2, 4, 8}) {
    for (int offset : {1, 2, 3}) {
      SCOPED_TRACE(testing::Message() << "bits " << bits << " offset " << offset);
      ExpectCudaMatchesCpu(x, MakeParams(bits, 512, Params::kMinMax, Params::kStochastic),
                           /*feedback=*/true, offset);
    }
  }
}

TEST(QuantizeCuda, LargeBufferMatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<float> x = RandomValues((int64_t{4} << 20) + 5, 3);
  ExpectCudaMatchesCpu(x, MakeParams(2, 512, Params::kMinMax, Params::kStochastic), false);
}

TEST(QuantizeCuda, RejectsNanAndInfLeavingCodesUntouched) {
  SKIP_WITHOUT_CUDA_DEVICE();
  constexpr int64_t kN = 5000;
  const Params p = MakeParams(4, 512, Params::kMinMax, Params::kStochastic);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (int64_t pos : {int64_t{0}, int64_t{2600}, kN - 1}) {
      SCOPED_TRACE(testing::Message() << bad << " at " << pos);
      std::vector<float> x = RandomValues(kN, 4);
      x[pos] = bad;
      const std::vector<uint8_t> sentinel(QuantizedCodeBytes(kN, p.bits), 0xA5);
      const std::vector<float> residual_init(kN, 0.25f);
      DeviceBuffer<float> d_x(x), d_residual(residual_init);
      DeviceBuffer<float> d_meta(std::vector<float>(2 * NumBuckets(kN, p.bucket_size)));
      DeviceBuffer<uint8_t> d_codes(sentinel);
      absl::Status s = QuantizeCuda(d_x.get(), kN, p, d_meta.get(), d_codes.get(), nullptr);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_EQ(d_codes.Download(), sentinel);
      s = QuantizeWithErrorFeedbackCuda(d_x.get(), d_residual.get(), kN, p, d_meta.get(),
                                        d_codes.get(), nullptr);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_EQ(d_codes.Download(), sentinel);
      EXPECT_EQ(d_residual.Download(), residual_init);

      // The async form reports through the device flag.
      DeviceBuffer<int> d_flag(std::vector<int>{0});
      ASSERT_TRUE(
          QuantizeCudaAsync(d_x.get(), kN, p, d_meta.get(), d_codes.get(), d_flag.get(), nullptr)
              .ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_NE(d_flag.Download()[0], 0);
      EXPECT_EQ(d_codes.Download(), sentinel);
    }
  }
}

TEST(QuantizeCuda, RejectsOverflowingRangeAndBadParams) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<float> x = {-3e38f, 3e38f};
  const Params p = MakeParams(8, 512, Params::kMinMax, Params::kNearest);
  DeviceBuffer<float> d_x(x), d_meta(std::vector<float>(2));
  DeviceBuffer<uint8_t> d_codes(std::vector<uint8_t>(2, 7));
  EXPECT_EQ(QuantizeCuda(d_x.get(), 2, p, d_meta.get(), d_codes.get(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d_codes.Download(), (std::vector<uint8_t>{7, 7}));
  Params bad = p;
  bad.bits = 3;
  EXPECT_EQ(QuantizeCuda(d_x.get(), 2, bad, d_meta.get(), d_codes.get(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(QuantizeCuda, UpdateResidualMatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<float> x = RandomValues(1001, 5), decoded = RandomValues(1001, 6);
  std::vector<float> expected(x.size());
  UpdateResidual(x.data(), decoded.data(), expected.data(), 1001);
  DeviceBuffer<float> d_x(x), d_decoded(decoded), d_residual(std::vector<float>(x.size()));
  UpdateResidualCuda(d_x.get(), d_decoded.get(), d_residual.get(), 1001, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(d_residual.Download(), expected);
}

}  // namespace
}  // namespace hptrain::kernels
