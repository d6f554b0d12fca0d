#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/collectives.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/loopback_transport.h"
#include "tests/runtime/comm/spawn.h"

namespace hptrain::comm {
namespace {

using testing::Spawn;

std::vector<std::unique_ptr<Communicator>> MakeGroup(int size) {
  auto hub = std::make_shared<LoopbackHub>(size);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r) {
    comms.push_back(
        std::make_unique<TransportCommunicator>(std::make_unique<LoopbackTransport>(hub, r)));
  }
  return comms;
}

class RingAllReduceTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(RingAllReduceTest, SumsAndAgreesBitwise) {
  auto [size, count] = GetParam();
  auto comms = MakeGroup(size);
  std::vector<std::vector<float>> data(size, std::vector<float>(count));
  for (int r = 0; r < size; ++r) {
    for (size_t i = 0; i < count; ++i) data[r][i] = 0.25f * (r + 1) + 0.001f * i;
  }
  Spawn(size, [&](int r) { ASSERT_TRUE(comms[r]->AllReduceSum(data[r].data(), count).ok()); });
  for (size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < size; ++r) expected += 0.25f * (r + 1) + 0.001f * i;
    EXPECT_NEAR(data[0][i], expected, 1e-4f * std::abs(expected) + 1e-6f) << "element " << i;
    for (int r = 1; r < size; ++r) {
      EXPECT_EQ(std::memcmp(&data[0][i], &data[r][i], sizeof(float)), 0) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, RingAllReduceTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 7),
                                            ::testing::Values<size_t>(0, 1, 5, 1000, 4097)));

TEST(RingAllReduceBytes, MatchesTwoNMinusOneOverN) {
  const int size = 4;
  const size_t count = 61706;  // LeNet-5
  auto comms = MakeGroup(size);
  std::vector<std::vector<float>> data(size, std::vector<float>(count, 1.0f));
  Spawn(size, [&](int r) { ASSERT_TRUE(comms[r]->AllReduceSum(data[r].data(), count).ok()); });
  const double expected = 2.0 * (size - 1) / size * 4.0 * count;
  for (int r = 0; r < size; ++r) {
    EXPECT_NEAR(comms[r]->bytes_sent(), expected, 0.01 * expected) << "rank " << r;
    EXPECT_NEAR(comms[r]->bytes_received(), expected, 0.01 * expected) << "rank " << r;
  }
}

TEST(AllGather, EveryRankGetsEveryBlockInOrder) {
  const int size = 3;
  auto comms = MakeGroup(size);
  std::vector<std::vector<int>> out(size, std::vector<int>(size * 2));
  Spawn(size, [&](int r) {
    int block[2] = {r * 10, r * 10 + 1};
    ASSERT_TRUE(comms[r]->AllGather(block, out[r].data(), sizeof(block)).ok());
  });
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(out[r], (std::vector<int>{0, 1, 10, 11, 20, 21}));
  }
}

TEST(AllGatherV, BlocksOfDifferentSizesArriveIntact) {
  const int size = 4;
  auto comms = MakeGroup(size);
  std::vector<std::vector<std::string>> out(size);
  Spawn(size, [&](int r) {
    std::string mine(static_cast<size_t>(r * 3), static_cast<char>('a' + r));  // rank 0 sends 0
    ASSERT_TRUE(comms[r]->AllGatherV(mine.data(), mine.size(), &out[r]).ok());
  });
  for (int r = 0; r < size; ++r) {
    ASSERT_EQ(out[r].size(), 4u);
    EXPECT_EQ(out[r][0], "");
    EXPECT_EQ(out[r][1], "bbb");
    EXPECT_EQ(out[r][3], "ddddddddd");
  }
  // Sizes: 3 ring steps of 8 bytes. Blocks: rank 2 forwards every block but its right
  // neighbour's (0 + 3 + 6 bytes) and receives every block but its own (0 + 3 + 9).
  EXPECT_EQ(comms[2]->bytes_sent(), 3 * 8 + (0 + 3 + 6));
  EXPECT_EQ(comms[2]->bytes_received(), 3 * 8 + (0 + 3 + 9));
}

TEST(Broadcast, CopiesRootBufferEverywhere) {
  const int size = 4;
  auto comms = MakeGroup(size);
  std::vector<std::vector<double>> data(size, std::vector<double>(3, -1.0));
  data[2] = {1.5, 2.5, 3.5};
  Spawn(size, [&](int r) {
    ASSERT_TRUE(comms[r]->Broadcast(data[r].data(), 3 * sizeof(double), 2).ok());
    ASSERT_TRUE(comms[r]->Barrier().ok());
  });
  for (int r = 0; r < size; ++r) EXPECT_EQ(data[r], (std::vector<double>{1.5, 2.5, 3.5}));
}

TEST(LoopbackTransport, MissingPeerTimesOut) {
  auto hub = std::make_shared<LoopbackHub>(2, std::chrono::milliseconds(50));
  LoopbackTransport t0(hub, 0);
  float x = 0;
  absl::Status status = t0.SendRecv(1, nullptr, 0, 1, &x, sizeof(x), 7);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("rank 1"), std::string::npos);
}

TEST(ChunkRange, TilesTheBuffer) {
  for (size_t count : {0u, 1u, 7u, 100u}) {
    size_t expected_begin = 0;
    for (int i = 0; i < 3; ++i) {
      size_t b, e;
      ChunkRange(count, 3, i, &b, &e);
      EXPECT_EQ(b, expected_begin);
      EXPECT_LE(e - b, count / 3 + 1);
      expected_begin = e;
    }
    EXPECT_EQ(expected_begin, count);
  }
}

}  // namespace
}  // namespace hptrain::comm
