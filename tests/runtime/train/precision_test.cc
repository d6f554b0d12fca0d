// Mixed precision (runtime/train/precision.h): the loss scaler's state machine, the autocast
// guard on the CPU, and what spec.precision makes of a worker.
#include "runtime/train/precision.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/job/job_spec.h"

namespace hptrain::train {
namespace {

TEST(LossScaler, StartsAtGradScalersDefaults) {
  LossScaler scaler;
  EXPECT_EQ(scaler.scale(), 65536.0f);
  EXPECT_EQ(scaler.inverse_scale(), 1.0f / 65536.0f);
  EXPECT_EQ(scaler.skipped_steps(), 0);
  EXPECT_EQ(scaler.good_steps(), 0);
}

TEST(LossScaler, InfOrNanSkipsTheStepAndBacksOff) {
  LossScaler scaler;
  EXPECT_TRUE(scaler.Update(false));
  EXPECT_EQ(scaler.good_steps(), 1);
  EXPECT_FALSE(scaler.Update(true));
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.scale(), 32768.0f);
  EXPECT_EQ(scaler.good_steps(), 0);
  EXPECT_FALSE(scaler.Update(true));
  EXPECT_EQ(scaler.skipped_steps(), 2);
  EXPECT_EQ(scaler.scale(), 16384.0f);
  EXPECT_EQ(scaler.inverse_scale() * scaler.scale(), 1.0f);  // a power of two: exact
}

TEST(LossScaler, GrowsAfterTheIntervalOfGoodSteps) {
  LossScaler scaler;
  for (int i = 0; i < LossScaler::kGrowthInterval - 1; ++i) ASSERT_TRUE(scaler.Update(false));
  EXPECT_EQ(scaler.scale(), 65536.0f);
  EXPECT_TRUE(scaler.Update(false));
  EXPECT_EQ(scaler.scale(), 131072.0f);
  EXPECT_EQ(scaler.good_steps(), 0);
  EXPECT_EQ(scaler.skipped_steps(), 0);
}

TEST(LossScaler, ASkipRestartsTheRunOfGoodSteps) {
  LossScaler::Options options;
  options.init_scale = 8;
  options.growth_interval = 3;
  LossScaler scaler(options);
  scaler.Update(false);
  scaler.Update(false);
  scaler.Update(true);  // 4, and the two good steps no longer count
  scaler.Update(false);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 4.0f);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 8.0f);
  EXPECT_EQ(scaler.skipped_steps(), 1);
}

TEST(AllFinite, FindsInfAndNan) {
  std::vector<float> v = {1.0f, -2.5f, 0.0f, 3e38f};
  EXPECT_TRUE(AllFinite(v.data(), v.size()));
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> w = v;
    w[3] = bad;
    EXPECT_FALSE(AllFinite(w.data(), w.size())) << bad;
    EXPECT_TRUE(AllFinite(w.data(), 3));
  }
}

TEST(AutocastGuard, EnablesBf16OnTheCpuAndRestores) {
  const torch::Device cpu(torch::kCPU);
  ASSERT_FALSE(AutocastGuard::Enabled(c10::DeviceType::CPU));
  const c10::ScalarType before = AutocastGuard::Dtype(c10::DeviceType::CPU);
  torch::Tensor x = torch::randn({4, 8});
  torch::Tensor w = torch::randn({3, 8}, torch::requires_grad());
  {
    AutocastGuard guard(cpu, c10::ScalarType::BFloat16);
    EXPECT_TRUE(AutocastGuard::Enabled(c10::DeviceType::CPU));
    EXPECT_EQ(AutocastGuard::Dtype(c10::DeviceType::CPU), c10::ScalarType::BFloat16);
    torch::Tensor y = torch::nn::functional::linear(x, w);
    EXPECT_EQ(y.scalar_type(), c10::ScalarType::BFloat16);
    {
      AutocastGuard inner(cpu, c10::ScalarType::Float);  // fp32: changes nothing
      EXPECT_TRUE(AutocastGuard::Enabled(c10::DeviceType::CPU));
    }
    EXPECT_TRUE(AutocastGuard::Enabled(c10::DeviceType::CPU));
    // Backward outside autocast: the fp32 weight's gradient is fp32.
    y.sum().backward();
  }
  EXPECT_FALSE(AutocastGuard::Enabled(c10::DeviceType::CPU));
  EXPECT_EQ(AutocastGuard::Dtype(c10::DeviceType::CPU), before);
  EXPECT_EQ(torch::nn::functional::linear(x, w).scalar_type(), c10::ScalarType::Float);
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().scalar_type(), c10::ScalarType::Float);
}

TEST(AutocastGuard, RestoresWhenTheForwardThrows) {
  const torch::Device cpu(torch::kCPU);
  try {
    AutocastGuard guard(cpu, c10::ScalarType::BFloat16);
    throw std::runtime_error("forward failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(AutocastGuard::Enabled(c10::DeviceType::CPU));
}

TEST(AutocastGuard, Fp32DoesNothing) {
  AutocastGuard guard(torch::Device(torch::kCPU), c10::ScalarType::Float);
  EXPECT_FALSE(AutocastGuard::Enabled(c10::DeviceType::CPU));
}

TEST(MixedPrecision, WhatEachPrecisionMeansOnTheCpu) {
  job::JobSpec spec;
  const torch::Device cpu(torch::kCPU);
  auto fp32 = MixedPrecision::Create(spec, cpu, 0);
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  EXPECT_EQ((*fp32)->autocast_dtype(), c10::ScalarType::Float);
  EXPECT_FALSE((*fp32)->scales_loss());
  EXPECT_EQ((*fp32)->gradient_scale(), 1.0f);
  EXPECT_EQ((*fp32)->loss_scale(), 0.0f);

  spec.precision = "bf16";
  auto bf16 = MixedPrecision::Create(spec, cpu, 0);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ((*bf16)->autocast_dtype(), c10::ScalarType::BFloat16);
  EXPECT_FALSE((*bf16)->scales_loss());

  spec.precision = "fp16";
  auto fp16 = MixedPrecision::Create(spec, cpu, 0);
  ASSERT_FALSE(fp16.ok());
  EXPECT_EQ(fp16.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fp16.status().message().find("spec.precision"), absl::string_view::npos)
      << fp16.status();

  spec.precision = "fp32";
  spec.testing.loss_scaling = true;
  auto scaled = MixedPrecision::Create(spec, cpu, 0);
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_EQ((*scaled)->autocast_dtype(), c10::ScalarType::Float);
  EXPECT_TRUE((*scaled)->scales_loss());
  EXPECT_EQ((*scaled)->loss_scale(), 65536.0f);
  EXPECT_EQ((*scaled)->gradient_scale(), 1.0f / 65536.0f);
  torch::Tensor loss = torch::tensor({1.5f});
  EXPECT_EQ((*scaled)->ScaleLoss(loss).item<float>(), 1.5f * 65536.0f);
}

TEST(AutocastDtype, NamesTheFieldForAnUnknownPrecision) {
  absl::StatusOr<c10::ScalarType> dtype = AutocastDtype("fp8");
  ASSERT_FALSE(dtype.ok());
  EXPECT_NE(dtype.status().message().find("spec.precision"), absl::string_view::npos);
}

}  // namespace
}  // namespace hptrain::train
