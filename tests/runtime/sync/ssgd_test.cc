#include <cstring>

#include "gtest/gtest.h"
#include "tests/runtime/sync/strategy_harness.h"

namespace hptrain::sync::testing {
namespace {

TEST(Ssgd, AllRanksEndIdenticalAndSendTheRingVolume) {
  SimOptions options;
  SimResult r = Simulate(HarnessJob("ssgd"), options);
  ASSERT_TRUE(r.ok) << r.error;
  size_t p = 0;
  for (size_t s : options.tensor_sizes) p += s;
  for (int rank = 1; rank < options.world; ++rank) {
    ASSERT_EQ(std::memcmp(r.params[0].data(), r.params[rank].data(), 4 * p), 0);
  }
  EXPECT_NEAR(r.bytes_sent[0], options.steps * 2.0 * 3 / 4 * 4 * p, 0.01 * options.steps * 6 * p);
}

TEST(Ssgd, UnknownStrategyNamesTheAvailableOnes) {
  SimResult r = Simulate(HarnessJob("nonexistent"), SimOptions());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("ssgd"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace hptrain::sync::testing
