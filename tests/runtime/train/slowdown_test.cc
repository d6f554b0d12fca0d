// Emulated slowdown factors: fixed from the job, replaced at run time through the control file;
// the CPU time a step is charged, with and without a window.
#include "runtime/train/slowdown.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

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

TEST(Slowdown, EmulatedComputeIsTheFactorTimesTheCpuTimeUnlessTheWallClockIsLonger) {
  EXPECT_EQ(Slowdown::EmulatedSeconds(1.0, 0.3, 0.1), 0.3);  // factor 1: as measured
  EXPECT_DOUBLE_EQ(Slowdown::EmulatedSeconds(4.0, 0.1, 0.1), 0.4);
  // Other processes held the cores for part of the phase: the thread's CPU time is what counts.
  EXPECT_DOUBLE_EQ(Slowdown::EmulatedSeconds(4.0, 0.25, 0.1), 0.4);
  // Contention beyond the factor: the wall clock already covers more than the emulated device.
  EXPECT_DOUBLE_EQ(Slowdown::EmulatedSeconds(2.0, 0.5, 0.1), 0.5);
}

TEST(Slowdown, EachStepIsChargedItsOwnCpuTimeWithoutAWindow) {
  Slowdown s({2, 2}, "", 0);
  EXPECT_EQ(s.ChargedCpuSeconds(32, 0.010), 0.010);
  EXPECT_EQ(s.ChargedCpuSeconds(32, 0.030), 0.030);
  EXPECT_EQ(s.ChargedCpuSeconds(32, 0.012), 0.012);
}

TEST(Slowdown, AWindowChargesTheMedianOfTheLastStepsAtTheSameBatchSize) {
  Slowdown s({2, 2}, "", 0, /*window=*/3);
  EXPECT_DOUBLE_EQ(s.ChargedCpuSeconds(32, 0.010), 0.010);  // one step so far
  EXPECT_DOUBLE_EQ(s.ChargedCpuSeconds(32, 0.030), 0.020);  // even count: the middle two's mean
  EXPECT_DOUBLE_EQ(s.ChargedCpuSeconds(32, 0.012), 0.012);  // a spike of 30 ms is not charged
  EXPECT_DOUBLE_EQ(s.ChargedCpuSeconds(32, 0.011), 0.012);  // 10 ms has left the window
  // Another batch size has its own history, and coming back finds the old one.
  EXPECT_DOUBLE_EQ(s.ChargedCpuSeconds(64, 0.040), 0.040);
  EXPECT_DOUBLE_EQ(s.ChargedCpuSeconds(64, 0.044), 0.042);
  EXPECT_DOUBLE_EQ(s.ChargedCpuSeconds(32, 0.013), 0.012);  // {12, 11, 13}
  // A lasting change of the host's speed reaches the device once it is most of the window.
  EXPECT_DOUBLE_EQ(s.ChargedCpuSeconds(32, 0.020), 0.013);
  EXPECT_DOUBLE_EQ(s.ChargedCpuSeconds(32, 0.021), 0.020);
}

TEST(Slowdown, ThreadCpuClockAdvancesWithWorkNotWithSleep) {
  const double start = Slowdown::ThreadCpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double slept = Slowdown::ThreadCpuSeconds() - start;
  EXPECT_LT(slept, 0.1);
  // Spins until the clock has advanced 20 ms: it must advance with work.
  volatile double sink = 0;
  const double spin_start = Slowdown::ThreadCpuSeconds();
  while (Slowdown::ThreadCpuSeconds() - spin_start < 0.02) sink = sink + 1;
  EXPECT_GT(sink, 0);
}

}  // namespace
}  // namespace hptrain::train
