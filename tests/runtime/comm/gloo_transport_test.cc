#include "runtime/comm/gloo/gloo_transport.h"

#include <signal.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/kv_store.h"
#include "tests/runtime/comm/gloo_and_loopback.h"

namespace hptrain::comm {
namespace {

TEST(GlooTransport, RingAllReduceOverTcp) {
  const int size = 3;
  std::vector<std::vector<float>> data(size, std::vector<float>(10001));
  std::vector<int64_t> sent(size);
  testing::SpawnOverGloo(size, [&](int r, Communicator& comm) {
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

// GlooTransport posts every receive of a ring pass before its first send; LoopbackTransport runs
// the base class's step-by-step SendRecv. Both must give the same bits, for chunks of every size
// (empty ones when count < N) and over repeated calls on one tag sequence.
TEST(GlooTransport, RingPassGivesTheBitsOfTheStepByStepPath) {
  const int size = 4;
  const std::vector<size_t> counts = {1, 3, 4, 5, 1000, 61706};
  auto fill = [](int r, size_t count) {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = 0.1f * (r + 1) + 0.37f * static_cast<float>(i % 11);
    return v;
  };
  testing::ResultsPerRank tcp(size), loop(size);
  testing::SpawnOverGlooAndLoopback(size, [&](int r, Communicator& gloo, Communicator& loopback) {
    for (int round = 0; round < 3; ++round) {
      for (size_t count : counts) {
        std::vector<float> a = fill(r + round, count), b = a;
        ASSERT_TRUE(gloo.AllReduceSum(a.data(), count).ok());
        ASSERT_TRUE(loopback.AllReduceSum(b.data(), count).ok());
        tcp[r].push_back(std::move(a));
        loop[r].push_back(std::move(b));
      }
    }
  });
  testing::ExpectSameBitsEverywhere(tcp, loop);
}

// The all-gathers run as one RingPass too (every receive posted first): every rank must end with
// every rank's bytes, for equal blocks of several sizes and for blocks of unequal sizes, some
// empty, over repeated calls.
TEST(GlooTransport, AllGathersOverRingPassDeliverEveryRanksBytes) {
  const int size = 4;
  auto block = [](int r, int round, size_t bytes) {
    std::string b(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<char>(31 * r + 7 * round + i % 251);
    return b;
  };
  auto varying = [](int r, int round) -> size_t { return r == round % size ? 0 : 1000 * r + 17; };
  std::vector<std::string> failures(size);
  testing::SpawnOverGloo(size, [&](int r, Communicator& comm) {
    for (int round = 0; round < 3; ++round) {
      for (size_t bytes : {size_t{1}, size_t{13}, size_t{65536}}) {
        const std::string mine = block(r, round, bytes);
        std::string all(size * bytes, '\0');
        ASSERT_TRUE(comm.AllGather(mine.data(), all.data(), bytes).ok());
        for (int j = 0; j < size; ++j) {
          if (all.compare(j * bytes, bytes, block(j, round, bytes)) != 0) {
            failures[r] += "all-gather block " + std::to_string(j) + "; ";
          }
        }
      }
      const std::string mine = block(r, round, varying(r, round));
      std::vector<std::string> blocks;
      ASSERT_TRUE(comm.AllGatherV(mine.data(), mine.size(), &blocks).ok());
      ASSERT_EQ(blocks.size(), static_cast<size_t>(size));
      for (int j = 0; j < size; ++j) {
        if (blocks[j] != block(j, round, varying(j, round))) {
          failures[r] += "all-gather-v block " + std::to_string(j) + "; ";
        }
      }
    }
  });
  for (int r = 0; r < size; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
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

// A peer that closes its sockets must come back as an error, not kill the process by SIGPIPE:
// connecting ignores the signal, unless the process installed a handler of its own.
TEST(GlooTransport, ConnectingIgnoresSigpipeButKeepsAHandler) {
  struct sigaction original;
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &original), 0);
  struct sigaction deflt = {};
  deflt.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGPIPE, &deflt, nullptr), 0);
  testing::SpawnOverGloo(2, [](int, Communicator& comm) { ASSERT_TRUE(comm.Barrier().ok()); });
  struct sigaction now;
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_IGN);

  struct sigaction handler = {};
  handler.sa_handler = [](int) {};
  ASSERT_EQ(sigaction(SIGPIPE, &handler, nullptr), 0);
  testing::SpawnOverGloo(2, [](int, Communicator& comm) { ASSERT_TRUE(comm.Barrier().ok()); });
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, handler.sa_handler);
  sigaction(SIGPIPE, &original, nullptr);
}

}  // namespace
}  // namespace hptrain::comm
