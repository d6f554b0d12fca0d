// Emulated slowdown factors: fixed from the job, replaced at run time through the control file.
#include "runtime/train/slowdown.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "runtime/base/atomic_file.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::train {
namespace {

TEST(Slowdown, FixedFactorsFromTheJob) {
  Slowdown none({}, "", 1);
  EXPECT_EQ(none.Factor(), 1.0);
  Slowdown fixed({1, 2, 4}, "", 2);
  EXPECT_EQ(fixed.Factor(), 4.0);
}

TEST(Slowdown, ControlFileReplacesFactorsWhileRunning) {
  testing::TempDir dir;
  const std::string file = dir.path() + "/slowdown";
  Slowdown s({1, 3}, file, 1);
  EXPECT_EQ(s.Factor(), 3.0);  // no file yet: the job's factors
  ASSERT_TRUE(WriteFileAtomically(file, "1 2\n").ok());
  EXPECT_EQ(s.Factor(), 2.0);
  ASSERT_TRUE(WriteFileAtomically(file, "1 5.5 1\n").ok());
  EXPECT_EQ(s.Factor(), 5.5);
  // Invalid content keeps the previous factors: a factor below 1, a word, too few factors.
  for (const char* bad : {"1 0.5", "1 fast", "2"}) {
    ASSERT_TRUE(WriteFileAtomically(file, bad).ok());
    EXPECT_EQ(s.Factor(), 5.5) << bad;
  }
  ASSERT_TRUE(WriteFileAtomically(file, "4 1").ok());
  EXPECT_EQ(s.Factor(), 1.0);
  // The file disappearing keeps the last factors.
  ASSERT_EQ(unlink(file.c_str()), 0);
  EXPECT_EQ(s.Factor(), 1.0);
}

}  // namespace
}  // namespace hptrain::train
