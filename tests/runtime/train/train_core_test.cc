// The trainer's libtorch-free parts: LR schedules, the flat-buffer optimizer, checkpoint files.
#include <cmath>
#include <fstream>

#include "gtest/gtest.h"
#include "runtime/base/atomic_file.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/lr_schedule.h"
#include "runtime/train/optimizer.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::train {
namespace {

TEST(LearningRate, ConstantStepCosineAndWarmup) {
  job::OptimizerSpec spec;
  spec.lr = 0.1;
  EXPECT_DOUBLE_EQ(LearningRate(spec, 10, 3, 5, 100), 0.1);
  spec.schedule.type = "step";
  spec.schedule.step_size = 2;
  spec.schedule.gamma = 0.5;
  EXPECT_DOUBLE_EQ(LearningRate(spec, 10, 1, 99, 100), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(spec, 10, 2, 0, 100), 0.05);
  EXPECT_DOUBLE_EQ(LearningRate(spec, 10, 5, 0, 100), 0.025);
  spec.schedule.type = "cosine";
  spec.schedule.min_lr = 0.0;
  EXPECT_NEAR(LearningRate(spec, 10, 0, 0, 100), 0.1, 1e-12);
  EXPECT_NEAR(LearningRate(spec, 10, 5, 0, 100), 0.05, 1e-12);
  EXPECT_NEAR(LearningRate(spec, 10, 9, 100, 100), 0.0, 1e-12);
  spec.schedule.type = "constant";
  spec.schedule.warmup_epochs = 2;
  EXPECT_NEAR(LearningRate(spec, 10, 0, 0, 100), 0.1 * 0.01 / 2, 1e-12);
  EXPECT_NEAR(LearningRate(spec, 10, 1, 0, 100), 0.1 * 1.01 / 2, 1e-12);
  EXPECT_DOUBLE_EQ(LearningRate(spec, 10, 3, 0, 100), 0.1);
}

TEST(Optimizer, SgdMomentumStateIsExposedForCheckpoints) {
  job::OptimizerSpec spec;
  spec.lr = 0.1;
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
  job::OptimizerSpec spec;
  spec.type = "adam";
  Optimizer opt(spec, 3);
  auto state = opt.state();
  EXPECT_EQ(state.size(), 2u);
  EXPECT_EQ(state.count("adam.m"), 1u);
  EXPECT_EQ(state["adam.v"]->size(), 3u);
}

Checkpoint Sample() {
  Checkpoint c;
  c.job = "j";
  c.step = 12;
  c.epoch = 1;
  c.step_in_epoch = 3;
  c.optimizer_steps = 12;
  c.sections["params"] = {1.5f, -2.0f, 3.25f};
  c.sections["momentum"] = {0.5f, 0.25f, 0.125f};
  c.sections["buffers"] = {};
  return c;
}

TEST(Checkpoint, RoundTrips) {
  testing::TempDir dir;
  std::string path = dir.path() + "/c.ckpt";
  ASSERT_TRUE(SaveCheckpoint(path, Sample()).ok());
  auto loaded = LoadCheckpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->job, "j");
  EXPECT_EQ(loaded->step, 12);
  EXPECT_EQ(loaded->epoch, 1);
  EXPECT_EQ(loaded->step_in_epoch, 3);
  EXPECT_EQ(loaded->sections["params"], Sample().sections["params"]);
  EXPECT_EQ(loaded->sections["momentum"], Sample().sections["momentum"]);
  EXPECT_TRUE(loaded->sections["buffers"].empty());
}

TEST(Checkpoint, MissingFileIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(LoadCheckpoint("/nonexistent/c.ckpt").status()));
}

TEST(Checkpoint, EveryTruncationAndCorruptionIsDataLoss) {
  testing::TempDir dir;
  std::string path = dir.path() + "/c.ckpt";
  ASSERT_TRUE(SaveCheckpoint(path, Sample()).ok());
  std::string bytes = *ReadFile(path);
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::string cut = dir.path() + "/cut.ckpt";
    ASSERT_TRUE(WriteFileAtomically(cut, bytes.substr(0, len)).ok());
    auto loaded = LoadCheckpoint(cut);
    ASSERT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << "length " << len;
    EXPECT_NE(loaded.status().message().find(cut), std::string::npos);
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] ^= 0x40;
    std::string bad = dir.path() + "/bad.ckpt";
    ASSERT_TRUE(WriteFileAtomically(bad, flipped).ok());
    EXPECT_FALSE(LoadCheckpoint(bad).ok()) << "flipped byte " << i;
  }
}

}  // namespace
}  // namespace hptrain::train
