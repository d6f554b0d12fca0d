// P2pChannel: transfers between two ranks over the loopback transport and Gloo, the request
// words, byte counters (payload apart from control), tags apart from the collectives', and a
// peer that stops answering or goes away failing its partner with an error that names it.
#include "runtime/comm/p2p_channel.h"

#include <chrono>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/loopback_transport.h"
#include "tests/runtime/comm/gloo_and_loopback.h"
#include "tests/runtime/comm/spawn.h"

namespace hptrain::comm {
namespace {

using testing::Spawn;
using testing::SpawnOverGloo;

std::vector<float> Model(int rank, size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(rank * 1000 + i) * 0.25f;
  return x;
}

// Ranks 0-1 and 2-3 swap models; 4 pushes to 0 one way.
void SwapAndPush(Communicator& comm) {
  P2pChannel channel(comm.transport());
  const int me = channel.rank();
  const size_t n = 1000;
  const size_t bytes = n * sizeof(float);
  std::vector<float> mine = Model(me, n), theirs(n, -1.0f);
  if (me < 4) {
    const int peer = me ^ 1;
    ASSERT_TRUE(channel.Transfer(peer, mine.data(), bytes, theirs.data(), bytes).ok());
    EXPECT_EQ(theirs, Model(peer, n));
  }
  if (me == 0) {
    ASSERT_TRUE(channel.Transfer(4, nullptr, 0, theirs.data(), bytes).ok());
    EXPECT_EQ(theirs, Model(4, n));
  }
  if (me == 4) ASSERT_TRUE(channel.Transfer(0, mine.data(), bytes, nullptr, 0).ok());
  const int64_t sent = me < 4 ? bytes : 0;
  const int64_t received = me < 4 ? bytes : 0;
  EXPECT_EQ(channel.counters().payload_sent.load(), sent + (me == 4 ? bytes : 0));
  EXPECT_EQ(channel.counters().payload_received.load(), received + (me == 0 ? bytes : 0));
  EXPECT_EQ(channel.counters().control_sent.load(), 0);
  // The transport counts the same bytes.
  EXPECT_EQ(comm.bytes_sent(), channel.counters().payload_sent.load());
  EXPECT_EQ(comm.bytes_received(), channel.counters().payload_received.load());
}

TEST(P2pChannel, TransfersBetweenTwoRanksOverLoopback) {
  auto hub = std::make_shared<LoopbackHub>(5);
  Spawn(5, [&](int r) {
    TransportCommunicator comm(std::make_unique<LoopbackTransport>(hub, r));
    SwapAndPush(comm);
  });
}

TEST(P2pChannel, TransfersBetweenTwoRanksOverGloo) {
  SpawnOverGloo(5, [](int, Communicator& comm) { SwapAndPush(comm); });
}

void WordsFromEveryone(Communicator& comm) {
  P2pChannel channel(comm.transport());
  const int n = channel.size();
  const int me = channel.rank();
  for (int round = 0; round < 3; ++round) {
    std::vector<int64_t> words(n), received(n, -7);
    for (int p = 0; p < n; ++p) words[p] = 100 * me + p + 10000 * round;
    ASSERT_TRUE(channel.ExchangeWords(words, absl::MakeSpan(received)).ok());
    for (int p = 0; p < n; ++p) {
      EXPECT_EQ(received[p], p == me ? -7 : 100 * p + me + 10000 * round) << "from rank " << p;
    }
  }
  EXPECT_EQ(channel.counters().control_sent.load(), 3 * (n - 1) * 8);
  EXPECT_EQ(channel.counters().control_received.load(), 3 * (n - 1) * 8);
  EXPECT_EQ(channel.counters().payload_sent.load(), 0);
}

TEST(P2pChannel, ExchangeWordsReachesEveryRankOverLoopback) {
  auto hub = std::make_shared<LoopbackHub>(6);
  Spawn(6, [&](int r) {
    TransportCommunicator comm(std::make_unique<LoopbackTransport>(hub, r));
    WordsFromEveryone(comm);
  });
}

TEST(P2pChannel, ExchangeWordsReachesEveryRankOverGloo) {
  SpawnOverGloo(4, [](int, Communicator& comm) { WordsFromEveryone(comm); });
}

// Collectives and point-to-point transfers on the same transport do not take each other's
// messages: a transfer posted between two all-reduces.
TEST(P2pChannel, InterleavesWithCollectives) {
  SpawnOverGloo(4, [](int r, Communicator& comm) {
    P2pChannel channel(comm.transport());
    std::vector<float> sum(64, static_cast<float>(r));
    ASSERT_TRUE(comm.AllReduceSum(sum.data(), sum.size()).ok());
    std::vector<float> mine = Model(r, 64), theirs(64);
    ASSERT_TRUE(channel.Transfer(r ^ 1, mine.data(), 256, theirs.data(), 256).ok());
    ASSERT_TRUE(comm.AllReduceSum(sum.data(), sum.size()).ok());
    EXPECT_EQ(theirs, Model(r ^ 1, 64));
    EXPECT_EQ(sum[0], 24.0f);
  });
}

TEST(P2pChannel, RejectsSelfAndOutOfRangePeers) {
  auto hub = std::make_shared<LoopbackHub>(2);
  TransportCommunicator comm(std::make_unique<LoopbackTransport>(hub, 0));
  P2pChannel channel(comm.transport());
  float x = 1;
  absl::Status self = channel.Transfer(0, &x, 4, &x, 4);
  EXPECT_EQ(self.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(self.message().find("rank 0"), std::string::npos) << self;
  EXPECT_FALSE(channel.Transfer(2, &x, 4, &x, 4).ok());
}

// A peer that stops answering: the transfer fails within the transport's timeout, naming it.
TEST(P2pChannel, SilentPeerFailsNamingItWithinTheTimeout) {
  auto hub = std::make_shared<LoopbackHub>(3, std::chrono::milliseconds(200));
  Spawn(3, [&](int r) {
    TransportCommunicator comm(std::make_unique<LoopbackTransport>(hub, r));
    P2pChannel channel(comm.transport());
    if (r != 0) return;  // ranks 1 and 2 never answer
    std::vector<float> x(16), y(16);
    absl::Status status = channel.Transfer(2, x.data(), 64, y.data(), 64);
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    EXPECT_NE(status.message().find("with rank 2"), std::string::npos) << status;
    std::vector<int64_t> words(3, 1), received(3);
    status = channel.ExchangeWords(words, absl::MakeSpan(received));
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.message().find("with rank 1"), std::string::npos) << status;
  });
}

// A peer whose process goes away mid-exchange (its Gloo pairs close): the partner fails with an
// error naming it, well before the 30 s timeout would end the wait.
TEST(P2pChannel, PeerGoneOverGlooFailsNamingIt) {
  SpawnOverGloo(
      2,
      [](int r, Communicator& comm) {
        P2pChannel channel(comm.transport());
        std::vector<float> x(1 << 16), y(1 << 16);
        const size_t bytes = x.size() * sizeof(float);
        // One exchange completes, then rank 1 leaves (its transport is destroyed on return).
        ASSERT_TRUE(channel.Transfer(r ^ 1, x.data(), bytes, y.data(), bytes).ok());
        if (r == 1) return;
        absl::Status status = channel.Transfer(1, x.data(), bytes, y.data(), bytes);
        EXPECT_FALSE(status.ok());
        EXPECT_NE(status.message().find("rank 1"), std::string::npos) << status;
      },
      std::chrono::seconds(30));
}

// Messages: every rank posts three to every other; each receiver gets them all, each sender's
// in the order sent, counted as control bytes (16 each); nothing arrives that was not sent.
void MessagesFromEveryone(Communicator& comm) {
  P2pChannel channel(comm.transport());
  channel.StartInbox();
  const int n = channel.size();
  const int me = channel.rank();
  for (int k = 0; k < 3; ++k) {
    for (int p = 0; p < n; ++p) {
      if (p != me) ASSERT_TRUE(channel.Post(p, 7, 100 * me + k).ok());
    }
  }
  std::vector<int64_t> next(n, 0);
  for (int got = 0; got < 3 * (n - 1); ++got) {
    std::optional<P2pMessage> m = channel.Next(std::chrono::seconds(20));
    ASSERT_TRUE(m.has_value()) << "message " << got;
    ASSERT_EQ(m->kind, 7);
    EXPECT_EQ(m->value, 100 * m->from + next[m->from]++);
  }
  EXPECT_FALSE(channel.Next(std::chrono::milliseconds(50)).has_value());
  EXPECT_EQ(channel.counters().control_sent.load(), 3 * (n - 1) * 16);
  EXPECT_EQ(channel.counters().control_received.load(), 3 * (n - 1) * 16);
  // Nobody leaves before everyone has all its messages (a gone peer would be a message too).
  std::vector<float> sync(1, 1.0f);
  ASSERT_TRUE(comm.AllReduceSum(sync.data(), 1).ok());
}

TEST(P2pChannel, MessagesReachEveryRankInOrderOverLoopback) {
  auto hub = std::make_shared<LoopbackHub>(4);
  Spawn(4, [&](int r) {
    TransportCommunicator comm(std::make_unique<LoopbackTransport>(hub, r));
    MessagesFromEveryone(comm);
  });
}

TEST(P2pChannel, MessagesReachEveryRankInOrderOverGloo) {
  SpawnOverGloo(4, [](int, Communicator& comm) { MessagesFromEveryone(comm); });
}

// A peer that leaves (its Gloo pairs close) while the inbox waits for it with no time limit:
// its last message is kGone, after what it sent, and failure() names it; within seconds, not
// at a timeout.
TEST(P2pChannel, PeerGoneOverGlooEndsItsMessagesNamingIt) {
  SpawnOverGloo(
      2,
      [](int r, Communicator& comm) {
        P2pChannel channel(comm.transport());
        channel.StartInbox();
        if (r == 1) {
          ASSERT_TRUE(channel.Post(0, 3, 42).ok());
          return;  // the transport is destroyed: its connections close
        }
        std::optional<P2pMessage> m = channel.Next(std::chrono::seconds(20));
        ASSERT_TRUE(m.has_value());
        EXPECT_EQ(m->kind, 3);
        EXPECT_EQ(m->value, 42);
        m = channel.Next(std::chrono::seconds(20));
        ASSERT_TRUE(m.has_value());
        EXPECT_EQ(m->from, 1);
        EXPECT_EQ(m->kind, P2pMessage::kGone);
        const absl::Status why = channel.failure(1);
        EXPECT_NE(why.message().find("lost rank 1"), std::string::npos) << why;
      },
      std::chrono::seconds(60));
}

}  // namespace
}  // namespace hptrain::comm
