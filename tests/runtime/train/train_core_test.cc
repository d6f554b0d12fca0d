// The trainer's libtorch-free parts: checkpoint files. (The optimizer and the LR schedules are
// runtime/optim's: tests/runtime/optim.)
#include <cmath>
#include <fstream>

#include "gtest/gtest.h"
#include "runtime/base/atomic_file.h"
#include "runtime/train/checkpoint.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::train {
namespace {

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
