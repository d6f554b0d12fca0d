// The LR schedules (constant, step, cosine, warm-up) and the job spec's conversion to them.
#include "runtime/optim/lr_schedule.h"

#include "gtest/gtest.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/optimizer_options.h"

namespace hptrain::optim {
namespace {

TEST(LearningRate, ConstantStepCosineAndWarmup) {
  LrScheduleOptions spec;
  spec.lr = 0.1;
  spec.epochs = 10;
  EXPECT_DOUBLE_EQ(LearningRate(spec, 3, 5, 100), 0.1);
  spec.type = LrScheduleType::kStep;
  spec.step_size = 2;
  spec.gamma = 0.5;
  EXPECT_DOUBLE_EQ(LearningRate(spec, 1, 99, 100), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(spec, 2, 0, 100), 0.05);
  EXPECT_DOUBLE_EQ(LearningRate(spec, 5, 0, 100), 0.025);
  spec.type = LrScheduleType::kCosine;
  spec.min_lr = 0.0;
  EXPECT_NEAR(LearningRate(spec, 0, 0, 100), 0.1, 1e-12);
  EXPECT_NEAR(LearningRate(spec, 5, 0, 100), 0.05, 1e-12);
  EXPECT_NEAR(LearningRate(spec, 9, 100, 100), 0.0, 1e-12);
  spec.type = LrScheduleType::kConstant;
  spec.warmup_epochs = 2;
  EXPECT_NEAR(LearningRate(spec, 0, 0, 100), 0.1 * 0.01 / 2, 1e-12);
  EXPECT_NEAR(LearningRate(spec, 1, 0, 100), 0.1 * 1.01 / 2, 1e-12);
  EXPECT_DOUBLE_EQ(LearningRate(spec, 3, 0, 100), 0.1);
}

TEST(LrScheduleFor, CarriesTheJobsSchedule) {
  job::OptimizerSpec spec;
  spec.lr = 0.2;
  spec.schedule.type = "cosine";
  spec.schedule.min_lr = 0.01;
  spec.schedule.warmup_epochs = 1.5;
  LrScheduleOptions s = job::LrScheduleFor(spec, 7);
  EXPECT_EQ(s.type, LrScheduleType::kCosine);
  EXPECT_EQ(s.lr, 0.2);
  EXPECT_EQ(s.epochs, 7);
  EXPECT_EQ(s.min_lr, 0.01);
  EXPECT_EQ(s.warmup_epochs, 1.5);
  spec.schedule.type = "step";
  spec.schedule.step_size = 3;
  spec.schedule.gamma = 0.5;
  s = job::LrScheduleFor(spec, 7);
  EXPECT_EQ(s.type, LrScheduleType::kStep);
  EXPECT_EQ(s.step_size, 3);
  EXPECT_EQ(s.gamma, 0.5);
  spec.schedule.type = "constant";
  EXPECT_EQ(job::LrScheduleFor(spec, 7).type, LrScheduleType::kConstant);
}

}  // namespace
}  // namespace hptrain::optim
