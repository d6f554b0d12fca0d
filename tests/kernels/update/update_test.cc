#include "kernels/update/update.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace hptrain::kernels {
namespace {

TEST(SgdStep, PlainSgdIsParamMinusLrTimesGrad) {
  std::vector<float> p = {1.0f, -2.0f};
  std::vector<float> g = {0.5f, 0.25f};
  SgdParams params;
  params.lr = 0.1f;
  SgdStep(p.data(), g.data(), nullptr, 2, params);
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], -2.025f);
}

TEST(SgdStep, MomentumAndWeightDecayFollowTorchOptim) {
  // torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01), two steps with grad 1.0:
  //   step 1: d = 1 + 0.01*1 = 1.01, buf = 1.01, p = 1 - 0.101 = 0.899
  //   step 2: d = 1 + 0.01*0.899 = 1.00899, buf = 0.9*1.01 + 1.00899 = 1.91799,
  //           p = 0.899 - 0.191799 = 0.707201
  std::vector<float> p = {1.0f}, g = {1.0f}, buf = {0.0f};
  SgdParams params;
  params.lr = 0.1f;
  params.momentum = 0.9f;
  params.weight_decay = 0.01f;
  params.first_step = true;
  SgdStep(p.data(), g.data(), buf.data(), 1, params);
  EXPECT_NEAR(p[0], 0.899f, 1e-6);
  params.first_step = false;
  SgdStep(p.data(), g.data(), buf.data(), 1, params);
  EXPECT_NEAR(buf[0], 1.91799f, 1e-5);
  EXPECT_NEAR(p[0], 0.707201f, 1e-6);
}

TEST(SgdStep, NesterovUsesLookahead) {
  std::vector<float> p = {0.0f}, g = {1.0f}, buf = {0.0f};
  SgdParams params;
  params.lr = 1.0f;
  params.momentum = 0.5f;
  params.nesterov = true;
  params.first_step = true;
  SgdStep(p.data(), g.data(), buf.data(), 1, params);
  // buf = 1; d = 1 + 0.5 * 1 = 1.5
  EXPECT_FLOAT_EQ(p[0], -1.5f);
}

TEST(AdamStep, FirstStepMovesByLrTimesSign) {
  // With bias correction the first Adam step is lr * g / (|g| + eps) ≈ lr * sign(g).
  std::vector<float> p = {1.0f, 1.0f}, g = {3.0f, -0.5f}, m = {0, 0}, v = {0, 0};
  AdamParams params;
  params.lr = 0.01f;
  AdamStep(p.data(), g.data(), m.data(), v.data(), 2, params);
  EXPECT_NEAR(p[0], 0.99f, 1e-6);
  EXPECT_NEAR(p[1], 1.01f, 1e-6);
  EXPECT_NEAR(m[0], 0.3f, 1e-6);
  EXPECT_FLOAT_EQ(v[0], (1.0f - 0.999f) * 9.0f);  // (1 - beta2) * g^2 in float
}

TEST(Scale, MultipliesEveryElement) {
  std::vector<float> x(1001, 2.0f);
  Scale(x.data(), x.size(), 0.25f);
  for (float v : x) ASSERT_EQ(v, 0.5f);
}

TEST(AddAndClear, AddsTheResidualAndZeroesIt) {
  std::vector<float> x = {1.0f, -2.0f, 0.5f};
  std::vector<float> r = {0.25f, 2.0f, -1.0f};
  AddAndClear(r.data(), x.data(), x.size());
  EXPECT_EQ(x, (std::vector<float>{1.25f, 0.0f, -0.5f}));
  EXPECT_EQ(r, (std::vector<float>{0.0f, 0.0f, 0.0f}));
}

}  // namespace
}  // namespace hptrain::kernels
