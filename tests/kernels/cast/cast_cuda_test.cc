// CUDA twins of the casts against the CPU implementation, bit for bit. Skips without a device.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cast/cast.h"
#include "tests/cuda_test_util.h"

namespace hptrain::kernels {
namespace {

using cuda_test::DeviceBuffer;

std::vector<uint16_t> AllPatterns() {
  std::vector<uint16_t> v(65536);
  for (uint32_t i = 0; i < 65536; ++i) v[i] = static_cast<uint16_t>(i);
  return v;
}

std::vector<float> SweepFloats() {
  std::vector<float> v;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 4093) {
    const uint32_t bits = static_cast<uint32_t>(u);
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    v.push_back(f);
  }
  return v;
}

TEST(CastCuda, HalfToFloatMatchesCpuOnAllHalves) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<uint16_t> h = AllPatterns();
  std::vector<float> cpu(h.size());
  HalfToFloat(h.data(), 65536, cpu.data());
  DeviceBuffer<uint16_t> d_in(h);
  DeviceBuffer<float> d_out(h.size());
  HalfToFloatCuda(d_in.get(), 65536, d_out.get(), nullptr);
  const std::vector<float> gpu = d_out.Download();
  ASSERT_EQ(std::memcmp(cpu.data(), gpu.data(), cpu.size() * sizeof(float)), 0);
}

TEST(CastCuda, FloatToHalfAndBfloat16MatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<float> f = SweepFloats();
  const int64_t n = static_cast<int64_t>(f.size());
  std::vector<uint16_t> cpu_half(n), cpu_bf16(n);
  FloatToHalf(f.data(), n, cpu_half.data());
  FloatToBfloat16(f.data(), n, cpu_bf16.data());
  DeviceBuffer<float> d_in(f);
  DeviceBuffer<uint16_t> d_half(n), d_bf16(n);
  FloatToHalfCuda(d_in.get(), n, d_half.get(), nullptr);
  FloatToBfloat16Cuda(d_in.get(), n, d_bf16.get(), nullptr);
  const std::vector<uint16_t> gpu_half = d_half.Download(), gpu_bf16 = d_bf16.Download();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(gpu_half[i], cpu_half[i]) << i;
    ASSERT_EQ(gpu_bf16[i], cpu_bf16[i]) << i;
  }
}

TEST(CastCuda, AccumulateAndBfloat16WideningMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<uint16_t> h = AllPatterns();
  std::mt19937 rng(5);
  std::vector<float> acc(h.size());
  for (auto& a : acc) a = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 64.0f;
  std::vector<float> cpu_half = acc, cpu_bf16 = acc, cpu_widen(h.size());
  HalfAccumulate(h.data(), 65536, cpu_half.data());
  Bfloat16Accumulate(h.data(), 65536, cpu_bf16.data());
  Bfloat16ToFloat(h.data(), 65536, cpu_widen.data());
  DeviceBuffer<uint16_t> d_in(h);
  DeviceBuffer<float> d_half(acc), d_bf16(acc), d_widen(h.size());
  HalfAccumulateCuda(d_in.get(), 65536, d_half.get(), nullptr);
  Bfloat16AccumulateCuda(d_in.get(), 65536, d_bf16.get(), nullptr);
  Bfloat16ToFloatCuda(d_in.get(), 65536, d_widen.get(), nullptr);
  const std::vector<float> gpu_half = d_half.Download(), gpu_bf16 = d_bf16.Download(),
                           gpu_widen = d_widen.Download();
  // NaN + x keeps an operand's payload on both, but which one is not specified: compare NaN-ness.
  for (size_t i = 0; i < h.size(); ++i) {
    if (std::isnan(cpu_half[i])) {
      ASSERT_TRUE(std::isnan(gpu_half[i])) << i;
    } else {
      ASSERT_EQ(std::memcmp(&cpu_half[i], &gpu_half[i], sizeof(float)), 0) << i;
    }
    if (std::isnan(cpu_bf16[i])) {
      ASSERT_TRUE(std::isnan(gpu_bf16[i])) << i;
    } else {
      ASSERT_EQ(std::memcmp(&cpu_bf16[i], &gpu_bf16[i], sizeof(float)), 0) << i;
    }
    ASSERT_EQ(std::memcmp(&cpu_widen[i], &gpu_widen[i], sizeof(float)), 0) << i;
  }
}

TEST(CastCuda, ErrorFeedbackEncodingMatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  const int64_t n = 100003;
  std::vector<float> in(n), residual(n);
  for (int64_t i = 0; i < n; ++i) {
    in[i] = normal(rng);
    residual[i] = normal(rng) * 1e-2f;
  }
  DeviceBuffer<float> d_in(in), d_residual(residual);
  DeviceBuffer<uint16_t> d_out(n);
  DeviceBuffer<int> d_error(1);
  std::vector<uint16_t> out(n);
  ASSERT_EQ(FloatToHalfWithErrorFeedback(in.data(), residual.data(), n, out.data()), -1);
  FloatToHalfWithErrorFeedbackCuda(d_in.get(), d_residual.get(), n, d_out.get(), d_error.get(),
                                   nullptr);
  EXPECT_EQ(d_out.Download(), out);
  EXPECT_EQ(d_residual.Download(), residual);
  EXPECT_EQ(d_error.Download()[0], 0);
  in[n / 2] = std::nanf("");
  DeviceBuffer<float> d_bad(in);
  FloatToHalfWithErrorFeedbackCuda(d_bad.get(), nullptr, n, d_out.get(), d_error.get(), nullptr);
  EXPECT_EQ(d_error.Download()[0], 1);
}

}  // namespace
}  // namespace hptrain::kernels
