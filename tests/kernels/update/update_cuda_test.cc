// CUDA twins of the optimizer updates against the CPU reference: the same parameters and state
// after several steps. Both sides compute update_common.h with no fused multiply-adds (the CPU
// library with -ffp-contract=off, the CUDA one with -fmad=false) and IEEE sqrt and division, so
// SGD, Adam and Scale agree bit for bit. Skips without a device.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/update/update.h"
#include "tests/cuda_test_util.h"

namespace hptrain::kernels {
namespace {

using cuda_test::DeviceBuffer;

constexpr size_t kN = (1 << 20) + 3;  // not a multiple of any block size
constexpr int kSteps = 5;

std::vector<float> Normal(size_t n, float stddev, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  return x;
}

// Index of the first element whose bits differ, or -1.
int64_t FirstBitDifference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

void ExpectSameBits(const std::vector<float>& cuda, const std::vector<float>& cpu,
                    const char* what) {
  const int64_t i = FirstBitDifference(cuda, cpu);
  EXPECT_EQ(i, -1) << what << "[" << i << "]: CUDA " << (i >= 0 ? cuda[i] : 0.0f) << ", CPU "
                   << (i >= 0 ? cpu[i] : 0.0f);
}

class SgdCuda : public ::testing::TestWithParam<std::tuple<float, bool>> {};

TEST_P(SgdCuda, MatchesCpuBitForBitOverSteps) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const auto [momentum, nesterov] = GetParam();
  std::vector<float> params = Normal(kN, 1.0f, 1), buf(kN, 0.0f);
  DeviceBuffer<float> d_params(params), d_grads(kN), d_buf(kN);
  SgdParams p;
  p.lr = 0.05f;
  p.momentum = momentum;
  p.weight_decay = 1e-4f;
  p.nesterov = nesterov;
  for (int step = 0; step < kSteps; ++step) {
    const std::vector<float> grads = Normal(kN, 0.1f, 100 + step);
    ASSERT_EQ(cudaMemcpy(d_grads.get(), grads.data(), kN * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    p.first_step = step == 0;
    SgdStep(params.data(), grads.data(), buf.data(), kN, p);
    SgdStepCuda(d_params.get(), d_grads.get(), d_buf.get(), kN, p, nullptr);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  }
  ExpectSameBits(d_params.Download(), params, "params");
  if (momentum != 0.0f) ExpectSameBits(d_buf.Download(), buf, "momentum buffer");
}

INSTANTIATE_TEST_SUITE_P(Variants, SgdCuda,
                         ::testing::Values(std::make_tuple(0.0f, false),
                                           std::make_tuple(0.9f, false),
                                           std::make_tuple(0.9f, true)));

TEST(AdamCuda, MatchesCpuBitForBitOverSteps) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<float> params = Normal(kN, 1.0f, 2), m(kN, 0.0f), v(kN, 0.0f);
  DeviceBuffer<float> d_params(params), d_grads(kN), d_m(kN), d_v(kN);
  AdamParams p;
  p.lr = 1e-3f;
  p.weight_decay = 1e-4f;
  for (int step = 1; step <= kSteps; ++step) {
    const std::vector<float> grads = Normal(kN, 0.1f, 200 + step);
    ASSERT_EQ(cudaMemcpy(d_grads.get(), grads.data(), kN * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    p.step = step;
    AdamStep(params.data(), grads.data(), m.data(), v.data(), kN, p);
    AdamStepCuda(d_params.get(), d_grads.get(), d_m.get(), d_v.get(), kN, p, nullptr);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  }
  ExpectSameBits(d_params.Download(), params, "params");
  ExpectSameBits(d_m.Download(), m, "first moment");
  ExpectSameBits(d_v.Download(), v, "second moment");
}

TEST(ScaleCuda, MatchesCpuBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<float> x = Normal(kN, 3.0f, 3);
  DeviceBuffer<float> d_x(x);
  Scale(x.data(), kN, 0.25f / 3.0f);
  ScaleCuda(d_x.get(), kN, 0.25f / 3.0f, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ExpectSameBits(d_x.Download(), x, "x");
}

TEST(AddAndClearCuda, MatchesCpuBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<float> x = Normal(kN, 3.0f, 4);
  std::vector<float> r = Normal(kN, 0.5f, 5);
  DeviceBuffer<float> d_x(x), d_r(r);
  AddAndClear(r.data(), x.data(), kN);
  AddAndClearCuda(d_r.get(), d_x.get(), kN, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ExpectSameBits(d_x.Download(), x, "x");
  ExpectSameBits(d_r.Download(), r, "residual");
}

}  // namespace
}  // namespace hptrain::kernels
