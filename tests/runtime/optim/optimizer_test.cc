// The optimizer's host route: its state for checkpoints, the step in parts, the scaled weight
// decay, and the job spec's conversion. (Against torch.optim: optimizer_torch_test.cc; the device
// route against this one: device_optimizer_test.cc.)
#include "runtime/optim/optimizer.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/update/update.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/optimizer_options.h"
#include "runtime/optim/device_optimizer.h"

namespace hptrain::optim {
namespace {

std::vector<float> Normal(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  return x;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Optimizer, SgdMomentumStateIsExposedForCheckpoints) {
  OptimizerOptions spec;
  spec.momentum = 0.9;
  Optimizer opt(spec, 2);
  std::vector<float> p = {1.0f, 2.0f}, g = {1.0f, 1.0f};
  opt.Step(p.data(), g.data(), 0.1);
  opt.Step(p.data(), g.data(), 0.1);
  EXPECT_EQ(opt.steps(), 2);
  auto state = opt.state();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_NEAR((*state["momentum"])[0], 1.9f, 1e-6);
  EXPECT_NEAR(p[0], 1.0f - 0.1f - 0.19f, 1e-6);
}

TEST(Optimizer, AdamHasTwoMoments) {
  OptimizerOptions spec;
  spec.type = OptimizerType::kAdam;
  Optimizer opt(spec, 3);
  auto state = opt.state();
  EXPECT_EQ(state.size(), 2u);
  EXPECT_EQ(state.count("adam.m"), 1u);
  EXPECT_EQ(state["adam.v"]->size(), 3u);
  EXPECT_EQ(opt.StateVector("adam.v"), state["adam.v"]);
  EXPECT_EQ(opt.StateVector("momentum"), nullptr);
}

TEST(Optimizer, PlainSgdHasNoState) {
  Optimizer opt(OptimizerOptions{}, 4);
  EXPECT_TRUE(opt.state().empty());
  EXPECT_EQ(opt.StateVector("momentum"), nullptr);
}

// The scheduler's route: BeginStep, then ranges in any order, gives Step's bits.
TEST(Optimizer, StepInPartsIsStepBitForBit) {
  for (OptimizerType type : {OptimizerType::kSgd, OptimizerType::kAdam}) {
    OptimizerOptions options;
    options.type = type;
    options.momentum = type == OptimizerType::kSgd ? 0.9 : 0.0;
    options.nesterov = type == OptimizerType::kSgd;
    options.weight_decay = 1e-3;
    const size_t n = 1000;
    Optimizer whole(options, n), parts(options, n);
    std::vector<float> a = Normal(n, 1), b = a;
    for (int step = 0; step < 4; ++step) {
      const std::vector<float> g = Normal(n, 10 + step);
      whole.Step(a.data(), g.data(), 0.05);
      parts.BeginStep();
      parts.StepRange(b.data(), g.data(), 600, n, 0.05);
      parts.StepRange(b.data(), g.data(), 0, 250, 0.05);
      parts.StepRange(b.data(), g.data(), 250, 600, 0.05);
    }
    EXPECT_TRUE(SameBits(a, b)) << "type " << static_cast<int>(type);
    for (auto& [name, values] : whole.state()) {
      EXPECT_TRUE(SameBits(*values, *parts.StateVector(name))) << name;
    }
  }
}

// Exactly the kernel call the strategies made themselves before: SGD at weight decay
// scale·λ (rounded once from double), the momentum buffer started at the first step only.
TEST(Optimizer, IsTheUpdateKernelWithScaledWeightDecay) {
  OptimizerOptions options;
  options.momentum = 0.9;
  options.weight_decay = 1e-4;
  const size_t n = 257;
  Optimizer opt(options, n);
  std::vector<float> p = Normal(n, 2), expected = p, buf(n, 0.0f);
  for (int step = 1; step <= 3; ++step) {
    const std::vector<float> g = Normal(n, 20 + step);
    opt.BeginStep();
    opt.StepRange(p.data(), g.data(), 0, n, 0.1, 4);
    kernels::SgdParams k;
    k.lr = 0.1f;
    k.momentum = 0.9f;
    k.weight_decay = static_cast<float>(4.0 * 1e-4);
    k.first_step = step == 1;
    kernels::SgdStep(expected.data(), g.data(), buf.data(), n, k);
  }
  EXPECT_TRUE(SameBits(p, expected));
  EXPECT_TRUE(SameBits(*opt.StateVector("momentum"), buf));
}

// A restored step count continues the momentum buffer instead of starting it.
TEST(Optimizer, RestoredStepsContinueTheMomentumBuffer) {
  OptimizerOptions options;
  options.momentum = 0.5;
  Optimizer opt(options, 1);
  (*opt.StateVector("momentum"))[0] = 2.0f;
  opt.set_steps(3);
  std::vector<float> p = {0.0f}, g = {1.0f};
  opt.Step(p.data(), g.data(), 1.0);
  EXPECT_EQ((*opt.StateVector("momentum"))[0], 0.5f * 2.0f + 1.0f);
  EXPECT_EQ(p[0], -2.0f);
  EXPECT_EQ(opt.steps(), 4);
}

TEST(OptimizerOptionsFor, CarriesTheJobsOptimizer) {
  job::OptimizerSpec spec;
  spec.momentum = 0.9;
  spec.nesterov = true;
  spec.weight_decay = 5e-4;
  OptimizerOptions o = job::OptimizerOptionsFor(spec);
  EXPECT_EQ(o.type, OptimizerType::kSgd);
  EXPECT_EQ(o.momentum, 0.9);
  EXPECT_TRUE(o.nesterov);
  EXPECT_EQ(o.weight_decay, 5e-4);
  spec = job::OptimizerSpec();
  spec.type = "adam";
  spec.beta1 = 0.8;
  spec.beta2 = 0.99;
  spec.eps = 1e-6;
  o = job::OptimizerOptionsFor(spec);
  EXPECT_EQ(o.type, OptimizerType::kAdam);
  EXPECT_EQ(o.beta1, 0.8);
  EXPECT_EQ(o.beta2, 0.99);
  EXPECT_EQ(o.eps, 1e-6);
}

#ifndef HPTRAIN_HAVE_CUDA
TEST(DeviceOptimizer, CreateSaysTheBuildHasNoCuda) {
  auto created = DeviceOptimizer::Create(OptimizerOptions{}, 4);
  EXPECT_TRUE(absl::IsUnimplemented(created.status())) << created.status();
}
#endif

}  // namespace
}  // namespace hptrain::optim
