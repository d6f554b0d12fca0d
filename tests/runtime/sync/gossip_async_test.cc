// gossip's asynchronous handshake (runtime/sync/gossip_async_protocol.h, docs/algorithms.md §4b):
// the deadlock test under random delays, the checks of §4d and the bytes of §4c without a
// per-step synchronisation, a worker stalled for a long time that does not hold the others up,
// and a partner that leaves.
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/base/splitmix64.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/hierarchical_communicator.h"
#include "runtime/comm/topology.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/comm/p2p_channel.h"
#include "runtime/sync/gossip.h"
#include "runtime/sync/gossip_async_protocol.h"

namespace hptrain::sync {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---- The protocol alone --------------------------------------------------------------------

// One exchange of a rank's log: with whom, as initiator or not, and the two values swapped.
struct Logged {
  int partner;
  bool initiator;
  float sent, received;
};

// The deadlock test (§4d): all workers trigger at once with cyclic requests (rank r asks r + 1),
// with a random delay before each step boundary and inside each exchange, 1,000 times; then
// every rank quiesces. Every run finishes; the k-th exchange rank a logs with b is the k-th b
// logs with a, with the values swapped and exactly one initiator; no request is left queued.
TEST(AsyncGossipProtocol, CyclicRequestsWithRandomDelaysFinish1000Times) {
  const int n = 4, steps = 3;
  SplitMix64 seeds(23);
  for (int run = 0; run < 1000; ++run) {
    auto hub = std::make_shared<comm::LoopbackHub>(n, std::chrono::seconds(10));
    const uint64_t seed = seeds.Next();
    std::vector<std::vector<Logged>> logs(n);
    std::vector<std::string> errors(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        comm::TransportCommunicator comm(std::make_unique<comm::LoopbackTransport>(hub, r));
        comm::P2pChannel channel(comm.transport());
        channel.StartInbox();
        AsyncGossipProtocol protocol(&channel, /*serve_all=*/false);
        SplitMix64 delays(seed + r);
        float counter = static_cast<float>(r) * 1000;
        auto exchange = [&](int partner, bool initiator) {
          std::this_thread::sleep_for(std::chrono::microseconds(delays.Below(50)));
          float mine = ++counter, theirs = -1;
          absl::Status s = channel.Transfer(partner, &mine, 4, &theirs, 4);
          if (s.ok()) logs[r].push_back({partner, initiator, mine, theirs});
          return s;
        };
        absl::Status status;
        for (int step = 0; step < steps && status.ok(); ++step) {
          std::this_thread::sleep_for(std::chrono::microseconds(delays.Below(200)));
          const int target = step == 0                ? (r + 1) % n
                             : delays.Below(2) == 0 ? -1
                                                    : static_cast<int>(delays.Below(n));
          status = protocol.Boundary([&] { return target == r ? -1 : target; }, exchange);
        }
        if (status.ok()) status = protocol.Quiesce(exchange);
        if (status.ok() && protocol.queued() != 0) status = absl::InternalError("requests left");
        errors[r] = std::string(status.message());
      });
    }
    for (auto& t : threads) t.join();
    std::map<std::pair<int, int>, std::vector<Logged>> by_pair;
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(errors[r], "") << "run " << run << ", rank " << r;
      for (const Logged& e : logs[r]) by_pair[{r, e.partner}].push_back(e);
    }
    int total = 0;
    for (const auto& [pair, mine] : by_pair) {
      const std::vector<Logged>& theirs = by_pair[{pair.second, pair.first}];
      ASSERT_EQ(mine.size(), theirs.size()) << "run " << run;
      for (size_t k = 0; k < mine.size(); ++k) {
        EXPECT_EQ(mine[k].received, theirs[k].sent) << "run " << run;
        EXPECT_NE(mine[k].initiator, theirs[k].initiator) << "run " << run;
      }
      total += static_cast<int>(mine.size());
    }
    EXPECT_GE(total, 2 * (n / 2)) << "run " << run;  // the cycle's requests: at least n/2 pairs
  }
}

// ---- The strategy over in-process ranks ----------------------------------------------------

GossipOptions Options(double threshold, int64_t max_interval,
                      GossipVariant variant = GossipVariant::kPairwise) {
  GossipOptions options;
  options.trigger.threshold = threshold;
  options.trigger.max_interval = max_interval;
  options.variant = variant;
  options.seed = 7;
  return options;  // lockstep false: the asynchronous handshake
}

struct Outcome {
  std::vector<std::vector<std::pair<int, std::vector<float>>>> exchanges;  // [rank]: (partner, x)
  std::vector<std::vector<float>> initial, final;                          // [rank]
  std::vector<std::vector<float>> final_buffers;                           // [rank]
  std::vector<std::vector<double>> updates;  // [rank]: Σ of its local updates, fp64
  std::vector<int64_t> counted, payload_sent, payload_received, control_sent;
  std::vector<std::string> errors;
};

// `world` ranks each run `steps` local steps of a synthetic update (a rank's own random walk)
// followed by the strategy's Average, then Synchronize (the models averaged). Before
// its step `stall_at`, rank `stall_rank` waits until `stall_until()` says so (a slow worker);
// rank `stop_rank` leaves before its step `stop_at` (a killed worker).
struct Plan {
  int world = 4;
  int steps = 30;
  size_t n = 257;
  std::chrono::milliseconds timeout{20000};
  int stall_rank = -1, stall_at = 0;
  std::function<bool()> stall_until;
  int stop_rank = -1, stop_at = 0;
  size_t buffers = 0;  // each rank's buffers (ModelView::buffers): `buffers` values of rank + 1
  // The job's communicator over a rank's loopback transport (default: the flat one).
  std::function<std::unique_ptr<comm::Communicator>(std::unique_ptr<comm::Transport>)> make_comm =
      [](std::unique_ptr<comm::Transport> t) -> std::unique_ptr<comm::Communicator> {
    return std::make_unique<comm::TransportCommunicator>(std::move(t));
  };
};

Outcome Drive(const GossipOptions& options, const Plan& plan) {
  auto hub = std::make_shared<comm::LoopbackHub>(plan.world, plan.timeout);
  Outcome run;
  const size_t w = static_cast<size_t>(plan.world);
  run.exchanges.resize(w);
  run.initial.resize(w);
  run.final.resize(w);
  run.final_buffers.resize(w);
  run.updates.assign(w, std::vector<double>(plan.n, 0.0));
  run.counted.resize(w);
  run.payload_sent.resize(w);
  run.payload_received.resize(w);
  run.control_sent.resize(w);
  run.errors.resize(w);
  std::vector<std::thread> threads;
  for (int r = 0; r < plan.world; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<comm::Communicator> comm =
          plan.make_comm(std::make_unique<comm::LoopbackTransport>(hub, r));
      GossipStrategy strategy(comm.get(), options);
      strategy.set_exchange_observer([&, r](int partner, absl::Span<const float> x) {
        run.exchanges[r].push_back({partner, std::vector<float>(x.begin(), x.end())});
      });
      SplitMix64 rng(100 + r);
      std::vector<float> x(plan.n);
      for (float& v : x) v = static_cast<float>(rng.Symmetric());
      run.initial[r] = x;
      std::vector<float> buffers(plan.buffers, static_cast<float>(r + 1));
      absl::Status status = strategy.Start(absl::MakeSpan(x), 0, {});
      for (int step = 0; step < plan.steps && status.ok(); ++step) {
        if (r == plan.stop_rank && step == plan.stop_at) return;
        if (r == plan.stall_rank && step == plan.stall_at) {
          while (!plan.stall_until()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        for (size_t i = 0; i < plan.n; ++i) {
          const float d = 0.01f * static_cast<float>(rng.Symmetric());
          x[i] += d;
          run.updates[r][i] += d;
        }
        StepInfo info;
        info.step = step;
        status = strategy.Average(info, {absl::MakeSpan(x), absl::MakeSpan(buffers)}).status();
      }
      if (status.ok()) status = strategy.Synchronize(plan.steps, absl::MakeSpan(x));
      run.final[r] = x;
      run.final_buffers[r] = buffers;
      run.errors[r] = std::string(status.message());
      run.counted[r] = strategy.exchanges();
      run.payload_sent[r] = strategy.counters()->payload_sent.load();
      run.payload_received[r] = strategy.counters()->payload_received.load();
      run.control_sent[r] = strategy.counters()->control_sent.load();
    });
  }
  for (auto& t : threads) t.join();
  return run;
}

// §4d without lock step: the k-th exchange of ranks a and b leaves both with bit-identical
// models, and the models' sum is kept: N × the final average equals, within fp rounding, the
// fp64 sum of the initial models and every local update (averaging moves no mass).
TEST(AsyncGossip, PartnersEndBitIdenticalAndTheSumIsKept) {
  Plan plan;
  plan.world = 6;
  const Outcome run = Drive(Options(0.0, 64), plan);  // every free worker asks at every step
  std::map<std::pair<int, int>, std::vector<const std::vector<float>*>> by_pair;
  int64_t exchanges = 0;
  for (int r = 0; r < plan.world; ++r) {
    ASSERT_EQ(run.errors[r], "") << "rank " << r;
    for (const auto& [partner, x] : run.exchanges[r]) by_pair[{r, partner}].push_back(&x);
    EXPECT_EQ(run.counted[r], static_cast<int64_t>(run.exchanges[r].size()));
    exchanges += run.counted[r];
  }
  for (const auto& [pair, mine] : by_pair) {
    const auto& theirs = by_pair[{pair.second, pair.first}];
    ASSERT_EQ(mine.size(), theirs.size()) << pair.first << " with " << pair.second;
    for (size_t k = 0; k < mine.size(); ++k) {
      EXPECT_TRUE(SameBits(*mine[k], *theirs[k])) << pair.first << " with " << pair.second;
    }
  }
  EXPECT_GT(exchanges, plan.steps);
  for (size_t i = 0; i < plan.n; ++i) {
    double shadow = 0, magnitude = 0;
    for (int r = 0; r < plan.world; ++r) {
      shadow += run.initial[r][i] + run.updates[r][i];
      magnitude += std::fabs(run.initial[r][i]) + std::fabs(run.updates[r][i]);
    }
    const double sum = static_cast<double>(run.final[0][i]) * plan.world;
    ASSERT_LE(std::fabs(sum - shadow), magnitude * plan.steps * 0x1.0p-22) << "i " << i;
    for (int r = 1; r < plan.world; ++r) ASSERT_EQ(run.final[r][i], run.final[0][i]);
  }
}

// §4c: one pairwise exchange moves S = 4P bytes each way; the control messages are 16 bytes.
TEST(AsyncGossip, PayloadBytesAreTheModelEachWayPerExchange) {
  Plan plan;
  plan.n = 1000;
  plan.steps = 40;
  const Outcome run = Drive(Options(0.002, 64), plan);
  const int64_t s = static_cast<int64_t>(plan.n * sizeof(float));
  int64_t exchanges = 0, control = 0;
  for (int r = 0; r < plan.world; ++r) {
    ASSERT_EQ(run.errors[r], "") << "rank " << r;
    EXPECT_EQ(run.payload_sent[r], s * run.counted[r]) << "rank " << r;
    EXPECT_EQ(run.payload_received[r], s * run.counted[r]) << "rank " << r;
    exchanges += run.counted[r];
    control += run.control_sent[r];
  }
  ASSERT_GT(exchanges, 0);
  EXPECT_EQ(exchanges % 2, 0);  // both partners count an exchange
  // One request and one answer per exchange, one more request per crossing (two requests
  // that are one exchange), and the quiesce messages.
  const int64_t quiesce = plan.world * (plan.world - 1);
  EXPECT_GE(control, 16 * (exchanges + quiesce));
  EXPECT_LE(control, 16 * (exchanges + exchanges / 2 + quiesce));
}

// The model's buffers (BatchNorm statistics, ModelView::buffers) travel after the parameters and
// are averaged the same way: their sum over the workers is kept, and each exchange moves them too.
TEST(AsyncGossip, BuffersTravelWithTheModel) {
  Plan plan;
  plan.n = 64;
  plan.buffers = 10;
  const Outcome run = Drive(Options(0.0, 64), plan);
  const int64_t s = static_cast<int64_t>((plan.n + plan.buffers) * sizeof(float));
  int64_t exchanges = 0;
  for (int r = 0; r < plan.world; ++r) {
    ASSERT_EQ(run.errors[r], "") << "rank " << r;
    EXPECT_EQ(run.payload_sent[r], s * run.counted[r]) << "rank " << r;
    exchanges += run.counted[r];
  }
  ASSERT_GT(exchanges, 0);
  bool mixed = false;
  for (size_t i = 0; i < plan.buffers; ++i) {
    double sum = 0;
    for (int r = 0; r < plan.world; ++r) {
      sum += run.final_buffers[r][i];
      mixed = mixed || run.final_buffers[r][i] != static_cast<float>(r + 1);
    }
    EXPECT_NEAR(sum, plan.world * (plan.world + 1) / 2.0, 1e-4) << "i " << i;
  }
  EXPECT_TRUE(mixed);
}

// θ = ∞, T_max = ∞: no model moves; only the Synchronize's quiesce messages are sent.
TEST(AsyncGossip, InfiniteThresholdMovesNoModel) {
  Plan plan;
  const Outcome run = Drive(Options(kInf, 0), plan);
  for (int r = 0; r < plan.world; ++r) {
    ASSERT_EQ(run.errors[r], "") << "rank " << r;
    EXPECT_EQ(run.counted[r], 0);
    EXPECT_EQ(run.payload_sent[r], 0);
    EXPECT_EQ(run.control_sent[r], 16 * (plan.world - 1));
  }
}

// Push (Jin's variant): the initiator's model goes one way, so over all workers the payload
// sent equals the payload received, S per exchange of the pair; easgd: every exchange is with
// the center's holder, rank 0. Both end with one model after Synchronize.
TEST(AsyncGossip, PushAndElasticVariantsRun) {
  Plan plan;
  plan.n = 100;
  const int64_t s = static_cast<int64_t>(plan.n * sizeof(float));
  for (GossipVariant variant : {GossipVariant::kPush, GossipVariant::kEasgd}) {
    const Outcome run = Drive(Options(0.0, 64, variant), plan);
    int64_t sent = 0, received = 0, pairs = 0;
    for (int r = 0; r < plan.world; ++r) {
      ASSERT_EQ(run.errors[r], "") << "rank " << r;
      EXPECT_TRUE(SameBits(run.final[r], run.final[0]));
      sent += run.payload_sent[r];
      received += run.payload_received[r];
      for (const auto& [partner, x] : run.exchanges[r]) {
        if (variant == GossipVariant::kEasgd && r != 0) EXPECT_EQ(partner, 0);
        ++pairs;
      }
    }
    EXPECT_EQ(sent, received);
    EXPECT_GT(pairs, 0);
    if (variant == GossipVariant::kPush) EXPECT_EQ(sent * 2, s * pairs);
  }
}

// Under the node topology's communicator (spec.topology, or the node names a placement gives
// the workers), whose transport counts the bytes between nodes apart, the handshake runs the
// same.
TEST(AsyncGossip, RunsOverTheHierarchicalCommunicator) {
  auto topology = comm::Topology::FromNodeSizes({2, 2}, 4, "spec.topology.nodes");
  ASSERT_TRUE(topology.ok()) << topology.status();
  Plan plan;
  plan.make_comm = [&](std::unique_ptr<comm::Transport> t) -> std::unique_ptr<comm::Communicator> {
    return std::make_unique<comm::HierarchicalCommunicator>(std::move(t), *topology,
                                                            comm::HierarchicalCommunicator::Options{});
  };
  const Outcome run = Drive(Options(0.0, 64), plan);
  int64_t exchanges = 0;
  for (int r = 0; r < plan.world; ++r) {
    ASSERT_EQ(run.errors[r], "") << "rank " << r;
    EXPECT_TRUE(SameBits(run.final[r], run.final[0]));
    exchanges += run.counted[r];
  }
  EXPECT_GT(exchanges, 0);
}

// No barrier per step: rank 3 stalls before its step 2 until every other rank has finished all
// its steps. With a per-step synchronisation this could never happen (the others would wait
// for rank 3 at their next step boundary); here the others finish and wait for it only at the
// Synchronize. No exchange is ever due, so nobody asks the stalled rank.
TEST(AsyncGossip, AStalledWorkerDoesNotHoldTheOthersUp) {
  Plan plan;
  plan.steps = 20;
  std::mutex mu;
  int finished = 0;
  GossipOptions options = Options(kInf, 0);
  plan.stall_rank = 3;
  plan.stall_at = 2;
  plan.stall_until = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return finished == 3;
  };
  auto hub = std::make_shared<comm::LoopbackHub>(plan.world, plan.timeout);
  std::vector<std::string> errors(plan.world);
  std::vector<int> steps_done(plan.world, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < plan.world; ++r) {
    threads.emplace_back([&, r] {
      comm::TransportCommunicator comm(std::make_unique<comm::LoopbackTransport>(hub, r));
      GossipStrategy strategy(&comm, options);
      std::vector<float> x(16, static_cast<float>(r));
      absl::Status status = strategy.Start(absl::MakeSpan(x), 0, {});
      for (int step = 0; step < plan.steps && status.ok(); ++step) {
        if (r == plan.stall_rank && step == plan.stall_at) {
          while (!plan.stall_until()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        x[0] += 1.0f;
        StepInfo info;
        info.step = step;
        status = strategy.Average(info, {absl::MakeSpan(x), {}}).status();
        if (status.ok()) steps_done[r] = step + 1;
      }
      if (r != plan.stall_rank) {
        std::lock_guard<std::mutex> lock(mu);
        ++finished;
      }
      if (status.ok()) status = strategy.Synchronize(plan.steps, absl::MakeSpan(x));
      errors[r] = std::string(status.message());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < plan.world; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(steps_done[r], plan.steps) << "rank " << r;
  }
}

// A worker that leaves mid-run (a killed process, its connections closed): every other worker
// fails, those waiting for its answer or for it to reach the Synchronize with an error naming
// it, and nobody hangs.
TEST(AsyncGossip, ALeavingPartnerFailsItsPeersNamingIt) {
  Plan plan;
  plan.timeout = std::chrono::milliseconds(2000);
  plan.stop_rank = 1;
  plan.stop_at = 5;
  const Outcome run = Drive(Options(0.0, 64), plan);
  // Those that expected something of rank 1 name it; a worker that fails leaves in turn, so
  // the rest may name the first of those.
  int naming = 0;
  for (int r : {0, 2, 3}) {
    EXPECT_NE(run.errors[r], "") << "rank " << r;
    if (run.errors[r].find("lost rank 1 ") != std::string::npos) ++naming;
  }
  EXPECT_GE(naming, 1) << run.errors[0] << "\n" << run.errors[2] << "\n" << run.errors[3];
}

}  // namespace
}  // namespace hptrain::sync
