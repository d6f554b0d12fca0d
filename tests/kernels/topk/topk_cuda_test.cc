// CUDA twins of topk.h and dgc.h against the CPU reference. Skips without a device.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/topk/dgc.h"
#include "kernels/topk/topk.h"
#include "tests/cuda_test_util.h"

namespace hptrain::kernels {
namespace {

using cuda_test::DeviceBuffer;

std::vector<float> Normal(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  return x;
}

std::vector<float> Cauchy(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::cauchy_distribution<float> cauchy(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = cauchy(rng);
  return x;
}

std::vector<float> FewValues(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = rng() % 10 == 0 ? static_cast<float>(1 + rng() % 3) : 0.0f;
  return x;
}

TEST(TopkCuda, DgcSelectMatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t n = 1000000;
  for (const std::vector<float>& x : {Normal(n, 1), Cauchy(n, 2), FewValues(n, 3)}) {
    DeviceBuffer<float> d_x(x);
    for (double density : {0.001, 0.01, 0.1}) {
      DgcThresholdOptions options;
      options.density = density;
      const ThresholdSelection cpu = DgcSelect(x.data(), n, options, 5, 6);
      const absl::StatusOr<ThresholdSelection> gpu =
          DgcSelectCuda(d_x.get(), n, options, 5, 6, nullptr);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      EXPECT_EQ(gpu->threshold, cpu.threshold) << density;
      EXPECT_EQ(gpu->count, cpu.count) << density;
      EXPECT_EQ(gpu->equal_limit, cpu.equal_limit) << density;
      EXPECT_EQ(gpu->method, cpu.method) << density;
      EXPECT_EQ(gpu->count_passes, cpu.count_passes) << density;

      // The packed pairs are the same too.
      std::vector<int32_t> cpu_idx(cpu.count);
      std::vector<float> cpu_val(cpu.count);
      ASSERT_EQ(PackSelection(x.data(), n, cpu, cpu_idx.data(), cpu_val.data(), cpu.count),
                cpu.count);
      DeviceBuffer<int32_t> d_idx(cpu.count);
      DeviceBuffer<float> d_val(cpu.count);
      const absl::StatusOr<int64_t> packed =
          PackSelectionCuda(d_x.get(), n, *gpu, d_idx.get(), d_val.get(), cpu.count, nullptr);
      ASSERT_TRUE(packed.ok()) << packed.status();
      ASSERT_EQ(*packed, cpu.count);
      EXPECT_EQ(d_idx.Download(), cpu_idx);
      EXPECT_EQ(d_val.Download(), cpu_val);
    }
  }
}

TEST(TopkCuda, TopKExactMatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const std::vector<float>& x : {Normal(300001, 4), FewValues(300001, 5)}) {
    const int64_t n = static_cast<int64_t>(x.size());
    DeviceBuffer<float> d_x(x);
    for (int64_t k : {1, 100, 3000, 29999, 300001}) {
      std::vector<int32_t> cpu_idx(k);
      std::vector<float> cpu_val(k);
      TopKExact(x.data(), n, k, cpu_idx.data(), cpu_val.data());
      DeviceBuffer<int32_t> d_idx(k);
      DeviceBuffer<float> d_val(k);
      const absl::Status status = TopKExactCuda(d_x.get(), n, k, d_idx.get(), d_val.get(), nullptr);
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(d_idx.Download(), cpu_idx) << k;
      EXPECT_EQ(d_val.Download(), cpu_val) << k;
    }
  }
}

TEST(TopkCuda, PackAboveThresholdHonoursCapacity) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<float> x = Normal(100000, 6);
  const int64_t total = CountAboveThreshold(x.data(), 100000, 2.0f);
  std::vector<int32_t> cpu_idx(total);
  std::vector<float> cpu_val(total);
  PackAboveThreshold(x.data(), 100000, 2.0f, cpu_idx.data(), cpu_val.data(), total);
  DeviceBuffer<float> d_x(x);
  DeviceBuffer<int32_t> d_idx(total);
  DeviceBuffer<float> d_val(total);
  absl::StatusOr<int64_t> packed =
      PackAboveThresholdCuda(d_x.get(), 100000, 2.0f, d_idx.get(), d_val.get(), total, nullptr);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(*packed, total);
  EXPECT_EQ(d_idx.Download(), cpu_idx);
  // Too small: -1, and only the first `capacity` entries are written.
  const int64_t capacity = total / 3;
  DeviceBuffer<int32_t> d_small(total);
  DeviceBuffer<float> d_small_val(total);
  packed = PackAboveThresholdCuda(d_x.get(), 100000, 2.0f, d_small.get(), d_small_val.get(),
                                  capacity, nullptr);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(*packed, -1);
  const std::vector<int32_t> small = d_small.Download();
  for (int64_t i = 0; i < total; ++i) ASSERT_EQ(small[i], i < capacity ? cpu_idx[i] : 0) << i;
}

TEST(TopkCuda, ScatterAddOfIntegerValuesMatchesCpuExactly) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // Integer-valued sums are exact in any order, so atomicAdd's order cannot show.
  const int64_t n = 5000, k = 200000;
  std::mt19937 rng(7);
  std::vector<int32_t> indices(k);
  std::vector<float> values(k);
  for (int64_t i = 0; i < k; ++i) {
    indices[i] = static_cast<int32_t>(rng() % n);
    values[i] = static_cast<float>(static_cast<int>(rng() % 21) - 10);
  }
  std::vector<float> cpu(n, 1.0f);
  ScatterAdd(indices.data(), values.data(), k, cpu.data(), n);
  DeviceBuffer<int32_t> d_idx(indices);
  DeviceBuffer<float> d_val(values);
  DeviceBuffer<float> d_dense(std::vector<float>(n, 1.0f));
  const absl::Status status =
      ScatterAddCheckedCuda(d_idx.get(), d_val.get(), k, d_dense.get(), n, nullptr);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(d_dense.Download(), cpu);
}

TEST(TopkCuda, ScatterAddCheckedRejectsBadIndices) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DeviceBuffer<int32_t> d_idx(std::vector<int32_t>{0, 3, 9, -1});
  DeviceBuffer<float> d_val(std::vector<float>{1, 1, 1, 1});
  DeviceBuffer<float> d_dense(std::vector<float>(9, 5.0f));
  const absl::Status status =
      ScatterAddCheckedCuda(d_idx.get(), d_val.get(), 4, d_dense.get(), 9, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("entry 2 of 4 has index 9"), absl::string_view::npos) << status;
  EXPECT_EQ(d_dense.Download(), std::vector<float>(9, 5.0f));
}

TEST(TopkCuda, DgcUpdatesMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t n = 123457;
  const std::vector<float> g = Normal(n, 8);
  std::vector<float> u = Normal(n, 9), v = Normal(n, 10);
  DeviceBuffer<float> d_g(g), d_u(u), d_v(v);
  DgcMomentumCorrection(g.data(), n, 0.9f, u.data(), v.data());
  DgcMomentumCorrectionCuda(d_g.get(), n, 0.9f, d_u.get(), d_v.get(), nullptr);
  std::vector<float> gpu_u = d_u.Download(), gpu_v = d_v.Download();
  ASSERT_EQ(std::memcmp(gpu_u.data(), u.data(), n * sizeof(float)), 0) << "no FMA contraction";
  ASSERT_EQ(std::memcmp(gpu_v.data(), v.data(), n * sizeof(float)), 0);

  std::vector<int32_t> idx = {0, 17, 5000, 123456};
  DeviceBuffer<int32_t> d_idx(idx);
  DgcMaskSelected(idx.data(), 4, u.data(), v.data());
  DgcMaskSelectedCuda(d_idx.get(), 4, d_u.get(), d_v.get(), nullptr);
  EXPECT_EQ(d_u.Download(), u);
  EXPECT_EQ(d_v.Download(), v);

  std::vector<float> clipped = g;
  const float cpu_norm = ClipToNorm(clipped.data(), n, 10.0f);
  DeviceBuffer<float> d_norm(1);
  ASSERT_TRUE(ClipToNormCuda(d_g.get(), n, 10.0f, d_norm.get(), nullptr).ok());
  EXPECT_NEAR(d_norm.Download()[0], cpu_norm, 1e-5f * cpu_norm);
  const std::vector<float> gpu_clipped = d_g.Download();
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(gpu_clipped[i], clipped[i], 1e-6f) << i;
}

}  // namespace
}  // namespace hptrain::kernels
