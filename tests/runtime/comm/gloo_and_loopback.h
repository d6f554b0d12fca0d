// Runs one body per rank over a Gloo TCP communicator (a RingPass posts every receive first), or
// with two communicators, one over Gloo and one over the loopback transport (step by step), so a
// test can check that a collective gives the same bits on both paths.
#ifndef HPTRAIN_TESTS_RUNTIME_COMM_GLOO_AND_LOOPBACK_H_
#define HPTRAIN_TESTS_RUNTIME_COMM_GLOO_AND_LOOPBACK_H_

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/gloo/gloo_transport.h"
#include "runtime/comm/kv_store.h"
#include "runtime/comm/loopback_transport.h"
#include "tests/runtime/comm/spawn.h"

namespace hptrain::comm::testing {

// Results of a test's calls, [rank][call].
using ResultsPerRank = std::vector<std::vector<std::vector<float>>>;

// Runs fn(rank, gloo) on `size` threads, the ranks connected through one in-memory store; a
// collective that does not complete within `timeout` fails.
inline void SpawnOverGloo(int size, const std::function<void(int, Communicator&)>& fn,
                          std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  InMemoryStore store;
  GlooOptions options;
  options.timeout = timeout;
  Spawn(size, [&](int r) {
    auto transport = GlooTransport::Connect(store, r, size, options);
    ASSERT_TRUE(transport.ok()) << transport.status();
    TransportCommunicator gloo(std::move(*transport));
    fn(r, gloo);
  });
}

// Runs fn(rank, gloo, loopback) on `size` threads.
inline void SpawnOverGlooAndLoopback(
    int size, const std::function<void(int, Communicator&, Communicator&)>& fn) {
  auto hub = std::make_shared<LoopbackHub>(size);
  SpawnOverGloo(size, [&](int r, Communicator& gloo) {
    TransportCommunicator loopback(std::make_unique<LoopbackTransport>(hub, r));
    fn(r, gloo, loopback);
  });
}

// Every rank's results over Gloo equal its results over loopback and rank 0's, bit for bit.
inline void ExpectSameBitsEverywhere(const ResultsPerRank& tcp, const ResultsPerRank& loop) {
  ASSERT_EQ(tcp.size(), loop.size());
  for (size_t r = 0; r < tcp.size(); ++r) {
    ASSERT_EQ(tcp[r].size(), loop[r].size());
    for (size_t c = 0; c < tcp[r].size(); ++c) {
      const std::vector<float>& mine = tcp[r][c];
      ASSERT_EQ(mine.size(), loop[r][c].size()) << "rank " << r << ", call " << c;
      ASSERT_EQ(mine.size(), tcp[0][c].size()) << "rank " << r << ", call " << c;
      EXPECT_EQ(std::memcmp(mine.data(), loop[r][c].data(), mine.size() * sizeof(float)), 0)
          << "rank " << r << ", call " << c << ": Gloo and loopback differ";
      EXPECT_EQ(std::memcmp(mine.data(), tcp[0][c].data(), mine.size() * sizeof(float)), 0)
          << "rank " << r << ", call " << c << ": differs from rank 0";
    }
  }
}

}  // namespace hptrain::comm::testing

#endif  // HPTRAIN_TESTS_RUNTIME_COMM_GLOO_AND_LOOPBACK_H_
