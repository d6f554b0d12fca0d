#include "runtime/comm/gloo/gloo_transport.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/kv_store.h"
#include "tests/runtime/comm/spawn.h"

namespace hptrain::comm {
namespace {

TEST(GlooTransport, RingAllReduceOverTcp) {
  const int size = 3;
  InMemoryStore store;
  GlooOptions options;
  options.timeout = std::chrono::seconds(20);
  std::vector<std::vector<float>> data(size, std::vector<float>(10001));
  std::vector<int64_t> sent(size);
  testing::Spawn(size, [&](int r) {
    auto transport = GlooTransport::Connect(store, r, size, options);
    ASSERT_TRUE(transport.ok()) << transport.status();
    TransportCommunicator comm(std::move(*transport));
    for (size_t i = 0; i < data[r].size(); ++i) data[r][i] = static_cast<float>(r + i % 7);
    ASSERT_TRUE(comm.AllReduceSum(data[r].data(), data[r].size()).ok());
    ASSERT_TRUE(comm.Barrier().ok());
    sent[r] = comm.bytes_sent();
  });
  for (size_t i = 0; i < data[0].size(); ++i) {
    ASSERT_EQ(data[0][i], static_cast<float>(3 * (i % 7) + 0 + 1 + 2));
    ASSERT_EQ(data[2][i], data[0][i]);
  }
  // 2(N-1)/N * 4 * count for the all-reduce, plus the barrier's (N-1) bytes.
  EXPECT_NEAR(sent[0], 2.0 * 2 / 3 * 4 * 10001 + 2, 8);
}

TEST(GlooTransport, RendezvousTimesOutWhenAPeerNeverComes) {
  InMemoryStore store;
  GlooOptions options;
  options.timeout = std::chrono::milliseconds(300);
  auto transport = GlooTransport::Connect(store, 0, 2, options);
  ASSERT_FALSE(transport.ok());
  EXPECT_NE(transport.status().message().find("rendezvous of rank 0 of 2"), std::string::npos)
      << transport.status();
}

}  // namespace
}  // namespace hptrain::comm
