// The optimizer's device route against its host route: the same steps on device buffers give
// the same parameters and state bit for bit (the same kernel parameters into kernels/update's
// CUDA twins, which compute update_common.h without fused multiply-adds, as the CPU kernels
// do), and the state travels to and from host vectors for checkpoints. Skips, printing why,
// without a CUDA device.
#include "runtime/optim/device_optimizer.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/optim/optimizer.h"
#include "tests/cuda_test_util.h"

namespace hptrain::optim {
namespace {

using cuda_test::DeviceBuffer;

constexpr size_t kN = (1 << 18) + 5;  // not a multiple of any block size
constexpr int kSteps = 5;

std::vector<float> Normal(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  return x;
}

void ExpectSameBits(const std::vector<float>& device, const std::vector<float>& host,
                    const std::string& what) {
  ASSERT_EQ(device.size(), host.size()) << what;
  for (size_t i = 0; i < host.size(); ++i) {
    if (std::memcmp(&device[i], &host[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << "[" << i << "]: device " << device[i] << ", host " << host[i];
      return;
    }
  }
}

struct Case {
  const char* name;
  OptimizerOptions options;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class DeviceRoute : public ::testing::TestWithParam<Case> {};

TEST_P(DeviceRoute, MatchesTheHostRouteBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const OptimizerOptions& o = GetParam().options;
  auto created = DeviceOptimizer::Create(o, kN);
  ASSERT_TRUE(created.ok()) << created.status();
  DeviceOptimizer& device = **created;
  Optimizer host(o, kN);
  std::vector<float> params = Normal(kN, 1);
  DeviceBuffer<float> d_params(params);
  DeviceBuffer<float> d_grads(kN);
  for (int step = 0; step < kSteps; ++step) {
    const std::vector<float> grads = Normal(kN, 100 + step);
    ASSERT_EQ(cudaMemcpy(d_grads.get(), grads.data(), kN * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    const double lr = 0.01 * (step + 1);
    ASSERT_TRUE(device.Step(d_params.get(), d_grads.get(), lr, nullptr).ok());
    host.Step(params.data(), grads.data(), lr);
  }
  ExpectSameBits(d_params.Download(), params, "params");
  EXPECT_EQ(device.steps(), kSteps);

  // The state to host vectors (a checkpoint), by name, with the step count.
  Optimizer saved(o, kN);
  ASSERT_TRUE(device.CopyStateTo(saved, nullptr).ok());
  EXPECT_EQ(saved.steps(), kSteps);
  for (auto& [name, values] : host.state()) ExpectSameBits(*saved.StateVector(name), *values, name);
}

// A resumed run: the state restored from host vectors continues exactly as the host route does.
TEST_P(DeviceRoute, RestoredStateContinuesAsTheHostRoute) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const OptimizerOptions& o = GetParam().options;
  Optimizer host(o, kN);
  std::vector<float> params = Normal(kN, 2);
  for (int step = 0; step < 2; ++step) {
    host.Step(params.data(), Normal(kN, 200 + step).data(), 0.02);
  }
  auto created = DeviceOptimizer::Create(o, kN);
  ASSERT_TRUE(created.ok()) << created.status();
  DeviceOptimizer& device = **created;
  ASSERT_TRUE(device.CopyStateFrom(host, nullptr).ok());
  EXPECT_EQ(device.steps(), 2);
  DeviceBuffer<float> d_params(params);
  const std::vector<float> grads = Normal(kN, 300);
  DeviceBuffer<float> d_grads(grads);
  ASSERT_TRUE(device.Step(d_params.get(), d_grads.get(), 0.03, nullptr).ok());
  host.Step(params.data(), grads.data(), 0.03);
  ExpectSameBits(d_params.Download(), params, "params");
  Optimizer saved(o, kN);
  ASSERT_TRUE(device.CopyStateTo(saved, nullptr).ok());
  for (auto& [name, values] : host.state()) ExpectSameBits(*saved.StateVector(name), *values, name);
}

// A host optimizer of another size is refused, not overrun.
TEST(DeviceOptimizer, StateOfAnotherSizeIsInternal) {
  SKIP_WITHOUT_CUDA_DEVICE();
  OptimizerOptions o;
  o.momentum = 0.9;
  auto created = DeviceOptimizer::Create(o, 16);
  ASSERT_TRUE(created.ok()) << created.status();
  Optimizer other(o, 8);
  EXPECT_TRUE(absl::IsInternal((*created)->CopyStateTo(other, nullptr)));
  EXPECT_TRUE(absl::IsInternal((*created)->CopyStateFrom(other, nullptr)));
}

constexpr auto Sgd = OptimizerOptions::Sgd;
constexpr auto Adam = OptimizerOptions::Adam;

INSTANTIATE_TEST_SUITE_P(
    Optimizers, DeviceRoute,
    ::testing::Values(Case{"SgdPlain", Sgd(0, false, 0)}, Case{"SgdMomentum", Sgd(0.9, false, 0)},
                      Case{"SgdNesterovWeightDecay", Sgd(0.9, true, 5e-4)}, Case{"Adam", Adam(0)},
                      Case{"AdamWeightDecay", Adam(1e-2)}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace hptrain::optim
