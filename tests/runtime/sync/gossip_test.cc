// gossip (docs/algorithms.md §4): every check of §4d, the bytes of §4c, the handshake's
// deadlock freedom under random delays, a partner that stops answering, and the job fields.
#include "runtime/sync/gossip.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/update/update.h"
#include "runtime/base/splitmix64.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/job/job_parser.h"
#include "runtime/job/job_validate.h"
#include "runtime/job/optimizer_options.h"
#include "runtime/optim/optimizer.h"
#include "runtime/sync/gossip_protocol.h"
#include "runtime/sync/gossip_trigger.h"
#include "tests/runtime/sync/strategy_harness.h"

namespace hptrain::sync {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---- Trigger (§4d: δ resets after an exchange; fires on the first step δ ≥ θ) ----------------

// x_ref = (8, 0, ...): ||x_ref|| = 8. Each step adds 0.5 to x[1], so δ after k steps is
// k/16 up to the 1e-12 guard of the denominator (hence the thresholds a hair below k/16).
constexpr double kHair = 1 - 1e-9;
std::vector<float> ReferenceModel() {
  std::vector<float> x(32, 0.0f);
  x[0] = 8.0f;
  return x;
}

int FirstFiring(const GossipTriggerOptions& options, int limit, std::vector<double>* deltas) {
  GossipTrigger trigger(options);
  std::vector<float> x = ReferenceModel();
  trigger.Reset(x);
  for (int k = 1; k <= limit; ++k) {
    x[1] += 0.5f;
    const bool due = trigger.Step(x);
    EXPECT_EQ(trigger.steps(), k);
    if (deltas) deltas->push_back(trigger.delta());
    if (due) return k;
  }
  return -1;
}

TEST(GossipTrigger, FiresOnTheFirstStepTheChangeReachesTheThreshold) {
  GossipTriggerOptions options;
  options.threshold = 5.0 / 16 * kHair;
  options.max_interval = 0;
  std::vector<double> deltas;
  EXPECT_EQ(FirstFiring(options, 100, &deltas), 5);
  ASSERT_EQ(deltas.size(), 5u);
  for (int k = 0; k < 5; ++k) EXPECT_NEAR(deltas[k], (k + 1) / 16.0, 1e-12);
  options.threshold = 5.0 / 16 + 1e-9;  // just above: one step later
  EXPECT_EQ(FirstFiring(options, 100, nullptr), 6);
}

TEST(GossipTrigger, MinAndMaxIntervalBoundTheTrigger) {
  GossipTriggerOptions options;
  options.threshold = 1.0 / 16;  // due from step 1 on
  options.min_interval = 7;
  EXPECT_EQ(FirstFiring(options, 100, nullptr), 7);
  options = GossipTriggerOptions();
  options.threshold = kInf;
  options.max_interval = 3;
  EXPECT_EQ(FirstFiring(options, 100, nullptr), 3);
  options.max_interval = 0;
  EXPECT_EQ(FirstFiring(options, 100, nullptr), -1);
  EXPECT_FALSE(GossipTrigger(options).can_fire());
}

TEST(GossipTrigger, FixedPeriodIgnoresTheChange) {
  GossipTriggerOptions options;
  options.period = 4;
  options.threshold = 0;  // would fire at once in adaptive mode
  EXPECT_EQ(FirstFiring(options, 100, nullptr), 4);
}

TEST(GossipTrigger, ResetRestartsTheCountAndTheReference) {
  GossipTriggerOptions options;
  options.threshold = 2.0 / 16 * kHair;
  options.max_interval = 0;
  GossipTrigger trigger(options);
  std::vector<float> x = ReferenceModel();
  trigger.Reset(x);
  x[1] += 0.5f;
  EXPECT_FALSE(trigger.Step(x));
  x[1] += 0.5f;
  EXPECT_TRUE(trigger.Step(x));
  trigger.Reset(x);  // the exchange
  EXPECT_EQ(trigger.steps(), 0);
  EXPECT_EQ(trigger.delta(), 0.0);
  x[1] += 0.5f;  // δ relative to the new reference: 0.5 / ||(8, 1)|| < 2/16
  EXPECT_FALSE(trigger.Step(x));
  EXPECT_EQ(trigger.steps(), 1);
  EXPECT_NEAR(trigger.delta(), 0.5 / std::sqrt(65.0), 1e-12);
}

// ---- Handshake (§4b protocol) --------------------------------------------------------------

void ExpectConsistent(const std::vector<GossipPairing>& pairing) {
  for (size_t i = 0; i < pairing.size(); ++i) {
    const int p = pairing[i].partner;
    if (p < 0) continue;
    ASSERT_EQ(pairing[p].partner, static_cast<int>(i));
    EXPECT_NE(pairing[p].initiator, pairing[i].initiator);
  }
}

TEST(GossipMatcher, CrossingRequestsAreOneExchangeInitiatedByTheLowerRank) {
  GossipMatcher matcher(4);
  // 0 and 1 ask each other in the same step: one exchange, 0 initiates.
  auto pairing = matcher.Step(std::vector<int64_t>{1, 0, -1, -1});
  ExpectConsistent(pairing);
  EXPECT_EQ(pairing[0].partner, 1);
  EXPECT_TRUE(pairing[0].initiator);
  EXPECT_EQ(pairing[2].partner, -1);
  EXPECT_EQ(matcher.outstanding(), 0);
  // 1 asks 3 while 3 asks 1 (both queue behind a busy partner): 1 is served by 0 first, then
  // by 2's turn, then 1 and 3 exchange once, 1 initiating, and 3's request is gone with it.
  pairing = matcher.Step(std::vector<int64_t>{1, 3, 1, 1});
  ExpectConsistent(pairing);
  EXPECT_EQ(pairing[1].partner, 0);
  EXPECT_EQ(pairing[3].partner, -1);
  pairing = matcher.Step(std::vector<int64_t>{-1, -1, -1, -1});
  EXPECT_EQ(pairing[1].partner, 2);
  pairing = matcher.Step(std::vector<int64_t>{-1, -1, -1, -1});
  EXPECT_EQ(pairing[1].partner, 3);
  EXPECT_TRUE(pairing[1].initiator);
  EXPECT_EQ(matcher.outstanding(), 0);
}

TEST(GossipMatcher, ServesAtMostOneRequestPerStepInFifoOrder) {
  GossipMatcher matcher(4);
  // 1, 2 and 3 all ask 0: served 1, then 2, then 3.
  auto pairing = matcher.Step(std::vector<int64_t>{-1, 0, 0, 0});
  EXPECT_EQ(pairing[0].partner, 1);
  EXPECT_EQ(pairing[2].partner, -1);
  EXPECT_TRUE(matcher.waiting(2));
  EXPECT_TRUE(matcher.waiting(3));
  pairing = matcher.Step(std::vector<int64_t>{-1, -1, -1, -1});
  EXPECT_EQ(pairing[0].partner, 2);
  pairing = matcher.Step(std::vector<int64_t>{-1, -1, 1, 1});  // waiting 3's new request ignored
  EXPECT_EQ(pairing[0].partner, 3);
  EXPECT_EQ(pairing[2].partner, 1);
  EXPECT_EQ(matcher.outstanding(), 0);
}

// All workers trigger at once with cyclic requests i -> i+1: every request is served, within
// a few steps.
TEST(GossipMatcher, CyclicRequestsAllAtOnceFinish) {
  for (int n : {2, 3, 4, 5, 8, 16}) {
    GossipMatcher matcher(n);
    std::vector<int64_t> requests(n);
    for (int i = 0; i < n; ++i) requests[i] = (i + 1) % n;
    int steps = 0;
    std::vector<int64_t> none(n, -1);
    do {
      auto pairing = matcher.Step(steps == 0 ? requests : none);
      ExpectConsistent(pairing);
      ++steps;
    } while (matcher.outstanding() > 0 && steps < 3 * n);
    // n = 2: the two requests cross and are one exchange.
    EXPECT_EQ(matcher.outstanding(), 0) << n << " workers";
    EXPECT_LE(steps, 3) << n << " workers";
  }
}

// Random requests from every free worker at every step: pairings stay consistent and at least one
// request is served per step while any is outstanding.
TEST(GossipMatcher, ProgressesUnderRandomRequests) {
  SplitMix64 rng(7);
  for (int n : {2, 3, 4, 7}) {
    GossipMatcher matcher(n);
    for (int step = 0; step < 2000; ++step) {
      std::vector<int64_t> requests(n, -1);
      for (int i = 0; i < n; ++i) {
        if (matcher.waiting(i) || rng.Below(3) == 0) continue;
        int j = static_cast<int>(rng.Below(n - 1));
        requests[i] = j >= i ? j + 1 : j;
      }
      auto pairing = matcher.Step(requests);
      ExpectConsistent(pairing);
      int exchanges = 0;
      for (const auto& p : pairing) exchanges += p.partner >= 0;
      if (matcher.outstanding() > 0 || exchanges > 0) continue;
      for (int64_t r : requests) EXPECT_LT(r, 0);  // no exchange only when nobody asked
    }
  }
}

// The deadlock test (§4d): all workers trigger at once with cyclic requests, over real
// point-to-point channels with a random delay before each worker's step boundary, 1,000 times.
// Every run finishes, every worker's view of its partner matches the partner's, and the
// exchanged (tiny) models arrive.
TEST(GossipProtocol, CyclicRequestsWithRandomDelaysFinish1000Times) {
  const int n = 4;
  SplitMix64 seeds(11);
  for (int run = 0; run < 1000; ++run) {
    auto hub = std::make_shared<comm::LoopbackHub>(n, std::chrono::seconds(10));
    const uint64_t seed = seeds.Next();
    std::vector<std::vector<int>> partners(n);  // [rank][step]
    std::vector<std::string> errors(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        comm::TransportCommunicator comm(std::make_unique<comm::LoopbackTransport>(hub, r));
        comm::P2pChannel channel(comm.transport());
        GossipProtocol protocol(&channel);
        SplitMix64 delays(seed + r);
        float mine[2] = {static_cast<float>(r), 1.0f}, theirs[2] = {-1, -1};
        for (int step = 0; step < n; ++step) {
          std::this_thread::sleep_for(std::chrono::microseconds(delays.Below(200)));
          auto pairing = protocol.Round(step == 0 ? (r + 1) % n : -1);
          if (!pairing.ok()) {
            errors[r] = std::string(pairing.status().message());
            return;
          }
          partners[r].push_back(pairing->partner);
          if (pairing->partner < 0) continue;
          absl::Status s = channel.Transfer(pairing->partner, mine, 8, theirs, 8);
          if (!s.ok() || theirs[0] != static_cast<float>(pairing->partner)) {
            errors[r] = s.ok() ? "wrong model" : std::string(s.message());
            return;
          }
        }
        if (protocol.matcher().outstanding() != 0) errors[r] = "requests left unserved";
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(errors[r], "") << "run " << run << ", rank " << r;
      ASSERT_EQ(partners[r].size(), static_cast<size_t>(n));
      for (int step = 0; step < n; ++step) {
        const int p = partners[r][step];
        if (p >= 0) ASSERT_EQ(partners[p][step], r) << "run " << run << ", step " << step;
      }
    }
  }
}

// ---- The strategy over in-process ranks ----------------------------------------------------

// The handshake in lock step: the same pairs on every run, step by step.
job::JobSpec GossipJob() {
  job::JobSpec spec = testing::HarnessJob("gossip");
  spec.strategy.Set("lockstep", true);
  return spec;
}

struct Trace {
  std::vector<std::vector<std::vector<float>>> before, after;  // [step][rank]
  std::vector<std::vector<int>> partner;                       // [step][rank]
  std::vector<int64_t> exchanges, payload_sent, payload_received, control_sent;
  std::vector<std::string> errors;  // per rank, "" when OK
};

// `world` ranks each run `steps` local steps of a synthetic update (a rank's own random walk)
// followed by the strategy's Average; the models start different. Rank `stop_rank`
// (if any) leaves after `stop_after` steps, as a killed worker would.
Trace Drive(const job::JobSpec& spec, int world, int steps, size_t n,
            std::chrono::milliseconds timeout = std::chrono::seconds(20), int stop_rank = -1,
            int stop_after = 0) {
  auto hub = std::make_shared<comm::LoopbackHub>(world, timeout);
  Trace trace;
  trace.before.assign(steps, std::vector<std::vector<float>>(world));
  trace.after.assign(steps, std::vector<std::vector<float>>(world));
  trace.partner.assign(steps, std::vector<int>(world, -2));
  trace.exchanges.resize(world);
  trace.payload_sent.resize(world);
  trace.payload_received.resize(world);
  trace.control_sent.resize(world);
  trace.errors.resize(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      comm::TransportCommunicator comm(std::make_unique<comm::LoopbackTransport>(hub, r));
      GossipStrategy strategy(&comm, GossipOptionsFor(spec));
      SplitMix64 rng(100 + r);
      std::vector<float> x(n);
      for (float& v : x) v = static_cast<float>(rng.Symmetric());
      absl::Status status = strategy.Start(absl::MakeSpan(x), 0, {});
      for (int step = 0; step < steps && status.ok(); ++step) {
        if (r == stop_rank && step == stop_after) return;
        for (float& v : x) v += 0.01f * static_cast<float>(rng.Symmetric());
        trace.before[step][r] = x;
        StepInfo info;
        info.step = step;
        status = strategy.Average(info, {absl::MakeSpan(x), {}}).status();
        trace.after[step][r] = x;
        trace.partner[step][r] = strategy.last_partner();
      }
      trace.errors[r] = std::string(status.message());
      trace.exchanges[r] = strategy.exchanges();
      trace.payload_sent[r] = strategy.counters()->payload_sent.load();
      trace.payload_received[r] = strategy.counters()->payload_received.load();
      trace.control_sent[r] = strategy.counters()->control_sent.load();
    });
  }
  for (auto& t : threads) t.join();
  return trace;
}

// §4d: after an exchange the two partners hold bit-identical models; pairwise averaging keeps
// Σ_i x_i within fp rounding of an fp64 shadow (the fp64 sum of the models before the step's
// exchanges).
TEST(Gossip, PartnersEndBitIdenticalAndTheSumIsKept) {
  job::JobSpec spec = GossipJob();
  spec.strategy.Set("threshold", 0.0);  // every free worker requests at every step
  const int world = 6, steps = 30;
  const size_t n = 257;
  Trace trace = Drive(spec, world, steps, n);
  int exchanges = 0;
  for (int r = 0; r < world; ++r) ASSERT_EQ(trace.errors[r], "") << "rank " << r;
  for (int step = 0; step < steps; ++step) {
    for (int r = 0; r < world; ++r) {
      const int p = trace.partner[step][r];
      if (p < 0) {
        EXPECT_TRUE(SameBits(trace.after[step][r], trace.before[step][r]));
        continue;
      }
      ++exchanges;
      ASSERT_EQ(trace.partner[step][p], r);
      EXPECT_TRUE(SameBits(trace.after[step][r], trace.after[step][p]))
          << "step " << step << ", ranks " << r << " and " << p;
    }
    for (size_t i = 0; i < n; ++i) {
      double shadow = 0, sum = 0, magnitude = 0;
      for (int r = 0; r < world; ++r) {
        shadow += trace.before[step][r][i];
        sum += trace.after[step][r][i];
        magnitude += std::fabs(trace.after[step][r][i]);
      }
      ASSERT_LE(std::fabs(sum - shadow), magnitude * 0x1.0p-24) << "step " << step << ", i " << i;
    }
  }
  EXPECT_GT(exchanges, steps);  // both partners counted: at least one pair most steps
}

// §4c: one pairwise exchange moves S = 4P bytes each way, so the payload counters are S times
// the worker's exchanges in each direction, and 2S per exchange over both partners; the request
// words are counted apart (8 bytes per other worker and step).
TEST(Gossip, PayloadBytesAreTheModelEachWayPerExchange) {
  job::JobSpec spec = GossipJob();
  spec.strategy.Set("threshold", 0.002);
  const int world = 4, steps = 40;
  const size_t n = 1000;
  const int64_t s = n * sizeof(float);
  Trace trace = Drive(spec, world, steps, n);
  int64_t total_exchanges = 0, total_sent = 0;
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(trace.errors[r], "");
    EXPECT_GT(trace.exchanges[r], 0);
    EXPECT_LT(trace.exchanges[r], steps);  // the trigger skips steps
    EXPECT_EQ(trace.payload_sent[r], s * trace.exchanges[r]) << "rank " << r;
    EXPECT_EQ(trace.payload_received[r], s * trace.exchanges[r]) << "rank " << r;
    EXPECT_EQ(trace.control_sent[r], 8 * (world - 1) * steps);
    total_exchanges += trace.exchanges[r];
    total_sent += trace.payload_sent[r];
  }
  EXPECT_EQ(total_exchanges % 2, 0);
  EXPECT_EQ(total_sent, 2 * s * (total_exchanges / 2));
}

// push: the initiator sends S and keeps its model; the target receives S and averages.
TEST(Gossip, PushMovesTheModelOneWay) {
  job::JobSpec spec = GossipJob();
  spec.strategy.Set("period", 1);
  spec.strategy.Set("variant", "push");
  const int world = 4, steps = 12;
  const size_t n = 64;
  Trace trace = Drive(spec, world, steps, n);
  int64_t sent = 0, received = 0, pairs = 0;
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(trace.errors[r], "");
    sent += trace.payload_sent[r];
    received += trace.payload_received[r];
    for (int step = 0; step < steps; ++step) pairs += trace.partner[step][r] >= 0;
  }
  EXPECT_GT(pairs, 0);
  EXPECT_EQ(sent, received);
  EXPECT_EQ(sent, static_cast<int64_t>(n * sizeof(float)) * (pairs / 2));
}

// easgd: each request exchanges S each way with rank 0, the center's holder; a worker's model
// moves by α(x − x̃) toward the center, α = 0.9 / N.
TEST(Gossip, ElasticAveragingExchangesWithTheCenter) {
  job::JobSpec spec = GossipJob();
  spec.strategy.Set("period", 2);
  spec.strategy.Set("variant", "easgd");
  const int world = 4, steps = 10;
  const size_t n = 128;
  Trace trace = Drive(spec, world, steps, n);
  for (int r = 0; r < world; ++r) ASSERT_EQ(trace.errors[r], "");
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(trace.exchanges[r], steps / 2);
    EXPECT_EQ(trace.payload_sent[r], static_cast<int64_t>(n * 4) * (steps / 2));
    EXPECT_EQ(trace.payload_received[r], static_cast<int64_t>(n * 4) * (steps / 2));
  }
  // Step 1 (the first exchange): the center is still rank 0's initial model at rank 0's turn;
  // rank 0 moves α of the way toward it, the others toward the center as rank 0 updated it.
  const float alpha = 0.9f / world;
  ASSERT_EQ(trace.partner[1][1], 0);
  const std::vector<float>& x0 = trace.before[1][0];
  const std::vector<float>& after0 = trace.after[1][0];
  std::vector<float> initial(n);
  SplitMix64 rng(100);
  for (float& v : initial) v = static_cast<float>(rng.Symmetric());
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(after0[i], x0[i] - alpha * (x0[i] - initial[i])) << i;
  }
}

// §4d: θ = 0, T_max = 1 is fixed-period gossip with p = 1, bit for bit (same peer streams, same
// handshake), through the trainer's reduce-and-step path.
TEST(Gossip, ZeroThresholdEqualsFixedPeriodOneBitForBit) {
  testing::SimOptions options;
  options.world = 4;
  options.steps = 25;
  options.tensor_sizes = {150, 6, 2400, 16, 120, 10};
  options.synchronize_at_end = false;
  job::JobSpec adaptive = GossipJob();
  adaptive.strategy.Set("threshold", 0.0);
  adaptive.strategy.Set("maxInterval", 1);
  job::JobSpec fixed = GossipJob();
  fixed.strategy.Set("period", 1);
  testing::SimResult a = Simulate(adaptive, options);
  testing::SimResult f = Simulate(fixed, options);
  ASSERT_TRUE(a.ok) << a.error;
  ASSERT_TRUE(f.ok) << f.error;
  for (int r = 0; r < options.world; ++r) {
    EXPECT_TRUE(SameBits(a.params[r], f.params[r])) << "rank " << r;
    EXPECT_EQ(a.bytes_sent[r], f.bytes_sent[r]) << "rank " << r;
    EXPECT_GT(a.bytes_sent[r], 0);
  }
  // Different ranks got different gradients and were mixed: the models are not all one.
  EXPECT_FALSE(SameBits(a.params[0], a.params[1]) && SameBits(a.params[0], a.params[2]) &&
               SameBits(a.params[0], a.params[3]));
}

// §4d: θ = ∞, T_max = ∞ gives N independent SGD runs and zero bytes: every rank's model is
// what its own optimizer makes of its own mean gradient.
TEST(Gossip, InfiniteThresholdIsIndependentRunsWithZeroBytes) {
  testing::SimOptions options;
  options.world = 4;
  options.steps = 15;
  options.tensor_sizes = {150, 6, 2400, 16, 120, 10};
  options.synchronize_at_end = false;
  job::JobSpec spec = GossipJob();
  spec.strategy.Set("threshold", kInf);
  spec.strategy.Set("maxInterval", 0);
  testing::SimResult result = Simulate(spec, options);
  ASSERT_TRUE(result.ok) << result.error;
  const size_t p = testing::Parameters(options);
  const int b = options.global_batch / options.world;
  for (int r = 0; r < options.world; ++r) {
    EXPECT_EQ(result.bytes_sent[r], 0) << "rank " << r;
    // The harness's defaults: initial model and gradient function (strategy_harness.cc).
    std::vector<float> x(p), g(p);
    for (size_t i = 0; i < p; ++i) x[i] = 0.01f * std::cos(0.01f * i);
    optim::Optimizer optimizer(job::OptimizerOptionsFor(spec.optimizer), p);
    for (int step = 0; step < options.steps; ++step) {
      for (size_t i = 0; i < p; ++i) {
        g[i] = std::sin(0.001f * static_cast<float>(i) + 0.3f * r + 0.7f * step) * 0.5f + 0.01f * r;
      }
      kernels::Scale(g.data(), p, static_cast<float>(options.global_batch) / b);
      kernels::Scale(g.data(), p, 1.0f / options.global_batch);
      optimizer.Step(x.data(), g.data(), spec.optimizer.lr);
    }
    EXPECT_TRUE(SameBits(result.params[r], x)) << "rank " << r;
  }
}

// Synchronize (before evaluation) gives every worker the average model.
TEST(Gossip, SynchronizeGivesEveryWorkerTheAverageModel) {
  testing::SimOptions options;
  options.world = 4;
  options.steps = 10;
  options.tensor_sizes = {150, 6, 120, 10};
  job::JobSpec spec = GossipJob();
  spec.strategy.Set("threshold", 0.05);
  testing::SimResult result = Simulate(spec, options);
  ASSERT_TRUE(result.ok) << result.error;
  for (int r = 1; r < options.world; ++r) EXPECT_TRUE(SameBits(result.params[0], result.params[r]));
}

// A worker that stops mid-run (a killed process): the first worker waiting on it fails with an
// error naming it when the transport's timeout passes, and every other worker fails too (naming
// the peer it was waiting on); nobody hangs.
TEST(Gossip, SilentPartnerFailsItsPeersNamingIt) {
  job::JobSpec spec = GossipJob();
  spec.strategy.Set("threshold", 0.0);
  Trace trace = Drive(spec, 4, 20, 64, std::chrono::milliseconds(300), /*stop_rank=*/1,
                      /*stop_after=*/5);
  // Rank 0 exchanges its request words with rank 1 first.
  EXPECT_NE(trace.errors[0].find("with rank 1 failed"), std::string::npos) << trace.errors[0];
  for (int r : {0, 2, 3}) {
    EXPECT_NE(trace.errors[r].find("gossip at step 5"), std::string::npos) << trace.errors[r];
  }
}

// ---- Job fields -----------------------------------------------------------------------------

absl::StatusOr<job::JobSpec> Parse(const std::string& strategy) {
  return job::ParseJobText(R"(apiVersion: hptrain.io/v1alpha1
kind: TrainingJob
metadata:
  name: g
spec:
  model:
    name: mlp
  dataset:
    name: synthetic
  globalBatchSize: 64
  workers:
    replicas: 4
  strategy:
)" + strategy,
                           {}, "job.yaml");
}

TEST(GossipJob, ParsesTheStrategyBlock) {
  auto spec = Parse(
      "    type: gossip\n    threshold: 0.02\n    maxInterval: 32\n"
      "    minInterval: 2\n    variant: push\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  GossipOptions options = GossipOptionsFor(*spec);
  EXPECT_EQ(options.trigger.threshold, 0.02);
  EXPECT_EQ(options.trigger.max_interval, 32);
  EXPECT_EQ(options.trigger.min_interval, 2);
  EXPECT_EQ(options.trigger.period, 0);
  EXPECT_EQ(options.variant, GossipVariant::kPush);
  spec = Parse("    type: gossip\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  options = GossipOptionsFor(*spec);
  EXPECT_EQ(options.trigger.threshold, 0.01);  // the starting θ, until calibration sets it
  EXPECT_EQ(options.trigger.max_interval, 64);
  EXPECT_EQ(options.trigger.min_interval, 1);
  EXPECT_TRUE(options.trigger.calibrate);
  EXPECT_EQ(options.trigger.calibration_period, 5);  // targetInterval
  EXPECT_EQ(options.trigger.calibration_steps, 200);
  EXPECT_EQ(options.trigger.calibration_factor, 1.0);
  EXPECT_EQ(options.variant, GossipVariant::kPairwise);
  spec = Parse("    type: gossip\n    targetInterval: 8\n    calibrationSteps: 64\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(job::ValidateJob(*spec).ok()) << job::ValidateJob(*spec);
  options = GossipOptionsFor(*spec);
  EXPECT_TRUE(options.trigger.calibrate);
  EXPECT_EQ(options.trigger.calibration_period, 8);
  EXPECT_EQ(options.trigger.calibration_steps, 64);
  // No exchange at all: a threshold no change reaches, no forced exchange (job files take
  // finite numbers only).
  spec = Parse("    type: gossip\n    threshold: 1e300\n    maxInterval: 0\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(GossipOptionsFor(*spec).trigger.max_interval, 0);
  spec = Parse("    type: gossip\n    threshold: 0\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(GossipOptionsFor(*spec).trigger.threshold, 0.0);
  EXPECT_FALSE(GossipOptionsFor(*spec).lockstep);  // the asynchronous handshake by default
  spec = Parse("    type: gossip\n    lockstep: true\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(GossipOptionsFor(*spec).lockstep);
}

TEST(GossipJob, RejectsBadFieldsNamingThem) {
  const std::pair<const char*, const char*> cases[] = {
      {"    type: gossip\n    variant: ring\n", "spec.strategy.variant"},
      {"    type: gossip\n    threshold: -0.1\n", "spec.strategy.threshold"},
      {"    type: gossip\n    maxInterval: -1\n", "spec.strategy.maxInterval"},
      {"    type: gossip\n    minInterval: 0\n", "spec.strategy.minInterval"},
      {"    type: gossip\n    period: -2\n", "spec.strategy.period"},
      {"    type: gossip\n    minInterval: 9\n    maxInterval: 8\n", "spec.strategy.minInterval"},
      {"    type: gossip\n    period: 1\n    threshold: 0.1\n", "spec.strategy.threshold"},
      {"    type: localsgd\n    threshold: 0.1\n", "spec.strategy.threshold"},
      {"    type: ssgd\n    variant: push\n", "spec.strategy.variant"},
      {"    type: gossip\n    interval: 4\n", "spec.strategy.interval"},
      {"    type: ssgd\n    lockstep: true\n", "spec.strategy.lockstep"},
      {"    type: gossip\n    lockstep: sometimes\n", "spec.strategy.lockstep"},
  };
  for (const auto& [yaml, path] : cases) {
    auto spec = Parse(yaml);
    absl::Status status = spec.ok() ? job::ValidateJob(*spec) : spec.status();
    EXPECT_FALSE(status.ok()) << yaml;
    EXPECT_NE(status.message().find(path), std::string::npos) << yaml << " -> " << status;
  }
}

// ---- Self-calibration of θ (§4b: a window at a fixed period, then θ = κ · median δ) ----------

// Each step moves x[1] to a known distance d_k from x_ref = (8, 0, ...) (δ = d_k / 8) and the
// exchange that follows resets the reference to (8, 0, ...) again.
TEST(GossipTrigger, CalibrationFiresEveryStepThenSetsFourTimesTheMedianDelta) {
  GossipTriggerOptions options;
  options.calibrate = true;
  options.calibration_period = 1;  // §4b's window: every step, κ = 4
  options.calibration_factor = 4;
  options.threshold = kInf;  // unused while calibrating, replaced after it
  options.max_interval = 0;
  GossipTrigger trigger(options);
  EXPECT_TRUE(trigger.can_fire());
  trigger.Reset(ReferenceModel());
  std::vector<double> expected;
  for (int k = 1; k <= 200; ++k) {
    ASSERT_TRUE(trigger.calibrating()) << k;
    std::vector<float> x = ReferenceModel();
    x[1] = 0.125f * static_cast<float>((k * 37) % 101 + 1);  // exact in fp32
    expected.push_back(x[1] / 8.0);
    EXPECT_TRUE(trigger.Step(x)) << "step " << k << " of the calibration window did not fire";
    EXPECT_NEAR(trigger.delta(), expected.back(), 1e-9);
    trigger.Reset(ReferenceModel());  // the exchange
  }
  EXPECT_FALSE(trigger.calibrating());
  ASSERT_TRUE(trigger.calibrated());
  ASSERT_EQ(trigger.calibration_deltas().size(), 200u);
  std::vector<double> sorted = expected;
  std::sort(sorted.begin(), sorted.end());
  const double median = 0.5 * (sorted[99] + sorted[100]);
  EXPECT_NEAR(trigger.threshold(), 4 * median, 1e-9);

  // Then the adaptive rule with the calibrated θ: a change just below it does not fire, one
  // just above it does.
  std::vector<float> x = ReferenceModel();
  x[1] = static_cast<float>(8 * trigger.threshold() * 0.99);
  EXPECT_FALSE(trigger.Step(x));
  x[1] = static_cast<float>(8 * trigger.threshold() * 1.01);
  EXPECT_TRUE(trigger.Step(x));
}

TEST(GossipTrigger, CalibrationWindowAndPeriodAreOptions) {
  GossipTriggerOptions options;
  options.calibrate = true;
  options.calibration_steps = 6;
  options.calibration_period = 2;
  options.calibration_factor = 4;
  options.max_interval = 0;
  GossipTrigger trigger(options);
  std::vector<float> x = ReferenceModel();
  trigger.Reset(x);
  std::vector<bool> fired;
  for (int k = 1; k <= 6; ++k) {
    x[1] += 0.5f;  // δ = 1/16 after one step since the reference, 2/16 after two
    const bool due = trigger.Step(x);
    fired.push_back(due);
    if (due) {
      x = ReferenceModel();
      trigger.Reset(x);
    }
  }
  EXPECT_EQ(fired, (std::vector<bool>{false, true, false, true, false, true}));
  ASSERT_TRUE(trigger.calibrated());
  EXPECT_EQ(trigger.calibration_deltas().size(), 3u);
  EXPECT_NEAR(trigger.threshold(), 4 * 2.0 / 16, 1e-9);
}

TEST(GossipJob, CalibrateIsABoolForTheAdaptiveTriggerOnly) {
  auto spec = Parse("    type: gossip\n    calibrate: true\n    maxInterval: 32\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(job::ValidateJob(*spec).ok()) << job::ValidateJob(*spec);
  EXPECT_TRUE(GossipOptionsFor(*spec).trigger.calibrate);
  // On by default; off with an explicit threshold, a period or calibrate: false.
  spec = Parse("    type: gossip\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(GossipOptionsFor(*spec).trigger.calibrate);
  for (const char* off :
       {"    type: gossip\n    threshold: 0.02\n", "    type: gossip\n    period: 4\n",
        "    type: gossip\n    calibrate: false\n"}) {
    spec = Parse(off);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_TRUE(job::ValidateJob(*spec).ok()) << off << job::ValidateJob(*spec);
    EXPECT_FALSE(GossipOptionsFor(*spec).trigger.calibrate) << off;
  }
  const std::pair<const char*, const char*> cases[] = {
      {"    type: gossip\n    calibrate: true\n    threshold: 0.1\n", "spec.strategy.threshold"},
      {"    type: gossip\n    calibrate: true\n    period: 2\n", "spec.strategy.calibrate"},
      {"    type: ssgd\n    calibrate: true\n", "spec.strategy.calibrate"},
      {"    type: gossip\n    calibrate: often\n", "spec.strategy.calibrate"},
  };
  for (const auto& [yaml, path] : cases) {
    auto bad = Parse(yaml);
    absl::Status status = bad.ok() ? job::ValidateJob(*bad) : bad.status();
    EXPECT_FALSE(status.ok()) << yaml;
    EXPECT_NE(status.message().find(path), std::string::npos) << yaml << " -> " << status;
  }
  // calibrate: false goes with anything the adaptive trigger takes.
  spec = Parse("    type: gossip\n    calibrate: false\n    threshold: 0.1\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(job::ValidateJob(*spec).ok());
}

// ---- The default trigger (§4g: calibrated for an exchange every targetInterval steps) ---------

// One worker's trigger with the job's defaults, on a fake model that moves by speed · 0.5 in x[1]
// per step from x_ref = (8, 0, ...), its own exchanges resetting it to that reference: δ after k
// steps at a constant speed is k · speed / 16.
struct Firings {
  std::vector<int> steps;  // the step numbers at which the trigger fired
  // Steps between consecutive firings (not the partial interval before the first).
  std::vector<int> Intervals() const {
    std::vector<int> out;
    for (size_t i = 1; i < steps.size(); ++i) out.push_back(steps[i] - steps[i - 1]);
    return out;
  }
};

GossipTriggerOptions DefaultTriggerOptions() {
  auto spec = Parse("    type: gossip\n");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return GossipOptionsFor(*spec).trigger;
}

// Steps the trigger `steps` times, the model moving by speed(k) · 0.5 at step k.
template <typename Speed>
Firings StepModel(GossipTrigger& trigger, int first, int steps, Speed speed,
                  std::vector<float>& x) {
  Firings f;
  for (int k = first; k < first + steps; ++k) {
    x[1] += 0.5f * static_cast<float>(speed(k));
    if (trigger.Step(x)) {
      f.steps.push_back(k);
      x = ReferenceModel();  // the exchange
      trigger.Reset(x);
    }
  }
  return f;
}

TEST(GossipTrigger, DefaultCalibratesForAnExchangeEveryTargetInterval) {
  const GossipTriggerOptions options = DefaultTriggerOptions();
  ASSERT_TRUE(options.calibrate);
  const int target = static_cast<int>(options.calibration_period);
  const int window = static_cast<int>(options.calibration_steps);
  ASSERT_GT(target, 1);
  GossipTrigger trigger(options);
  std::vector<float> x = ReferenceModel();
  trigger.Reset(x);
  // The window requests an exchange every `target` steps, never every step.
  Firings f = StepModel(trigger, 1, window, [](int) { return 1.0; }, x);
  ASSERT_TRUE(trigger.calibrated());
  ASSERT_EQ(f.steps.size(), static_cast<size_t>(window / target));
  for (size_t i = 0; i < f.steps.size(); ++i) EXPECT_EQ(f.steps[i], target * (i + 1));
  // θ = the median change over `target` steps (every one the same here).
  EXPECT_NEAR(trigger.threshold(), target / 16.0, 1e-9);
  // After it, the adaptive trigger at the same speed: still every `target` steps.
  f = StepModel(trigger, window + 1, 20 * target, [](int) { return 1.0; }, x);
  EXPECT_EQ(f.steps.size(), 20u);
  for (int interval : f.Intervals()) EXPECT_EQ(interval, target);
}

// With the model's change per step doubled the calibrated trigger fires about twice as often;
// halved, half as often; nearly still, at T_max.
TEST(GossipTrigger, DefaultAdaptsToTheModelsChangeAfterCalibration) {
  GossipTriggerOptions options = DefaultTriggerOptions();
  const int target = static_cast<int>(options.calibration_period);  // 5
  const int window = static_cast<int>(options.calibration_steps);
  GossipTrigger trigger(options);
  std::vector<float> x = ReferenceModel();
  trigger.Reset(x);
  StepModel(trigger, 1, window, [](int) { return 1.0; }, x);
  ASSERT_TRUE(trigger.calibrated());
  // Speed s: δ after k steps is k·s/16 ≥ target/16 from k = ceil(target / s) on.
  auto interval_at = [&](double speed) {
    Firings f = StepModel(trigger, 1, 400, [&](int) { return speed; }, x);
    const std::vector<int> intervals = f.Intervals();
    EXPECT_GE(intervals.size(), 3u) << "speed " << speed;
    for (int i : intervals) EXPECT_EQ(i, intervals.front()) << "speed " << speed;
    return intervals.empty() ? -1 : intervals.front();
  };
  EXPECT_EQ(interval_at(2.0), (target + 1) / 2);  // 3
  EXPECT_EQ(interval_at(0.5), 2 * target);        // 10
  EXPECT_EQ(interval_at(0.25), 4 * target);       // 20
  EXPECT_EQ(interval_at(0.01), options.max_interval);
  // The change growing step by step (a model speeding up): the intervals shrink.
  Firings f = StepModel(trigger, 1, 300, [](int k) { return 0.25 + k / 100.0; }, x);
  const std::vector<int> intervals = f.Intervals();
  ASSERT_GE(intervals.size(), 10u);
  EXPECT_GT(intervals.front(), intervals.back());
  for (size_t i = 1; i < intervals.size(); ++i) EXPECT_LE(intervals[i], intervals[i - 1]);
}

// A worker whose peers request every exchange it takes part in (each resets its trigger before
// its own count reaches the target) has no δ at the window's end: the window runs on until it
// fires once.
TEST(GossipTrigger, CalibrationWaitsForTheWorkersOwnFiring) {
  GossipTriggerOptions options = DefaultTriggerOptions();
  const int target = static_cast<int>(options.calibration_period);
  const int window = static_cast<int>(options.calibration_steps);
  GossipTrigger trigger(options);
  std::vector<float> x = ReferenceModel();
  trigger.Reset(x);
  for (int k = 1; k <= window + 10; ++k) {
    x[1] += 0.5f;
    ASSERT_FALSE(trigger.Step(x)) << k;
    if (k % (target - 1) == 0) {  // served by a peer
      x = ReferenceModel();
      trigger.Reset(x);
    }
  }
  EXPECT_TRUE(trigger.calibrating());
  x = ReferenceModel();
  trigger.Reset(x);
  Firings f = StepModel(trigger, 1, target, [](int) { return 1.0; }, x);
  EXPECT_EQ(f.steps, std::vector<int>{target});
  ASSERT_TRUE(trigger.calibrated());
  EXPECT_NEAR(trigger.threshold(), target / 16.0, 1e-9);
}

// An explicit threshold turns calibration off: the trigger fires on θ from the first step.
TEST(GossipTrigger, ExplicitThresholdDisablesCalibration) {
  auto spec = Parse("    type: gossip\n    threshold: 0.1\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  GossipTrigger trigger(GossipOptionsFor(*spec).trigger);
  EXPECT_FALSE(trigger.calibrating());
  std::vector<float> x = ReferenceModel();
  trigger.Reset(x);
  // δ = k / 16 ≥ 0.1 at k = 2 on every interval.
  Firings f = StepModel(trigger, 1, 20, [](int) { return 1.0; }, x);
  EXPECT_EQ(f.steps, (std::vector<int>{2, 4, 6, 8, 10, 12, 14, 16, 18, 20}));
  EXPECT_FALSE(trigger.calibrated());
  EXPECT_EQ(trigger.threshold(), 0.1);
}

// Four workers with the default trigger in the calibration window: every exchange is requested
// by a worker whose count since its last exchange reached targetInterval, so the pairs over the
// run are at most world · steps / targetInterval (p = 1 forms about one pair per two workers per
// step).
TEST(Gossip, DefaultWindowExchangesAtTheTargetRate) {
  job::JobSpec spec = GossipJob();
  const int world = 4, steps = 40;
  const int target = static_cast<int>(spec.strategy.Int("targetInterval"));
  Trace trace = Drive(spec, world, steps, 64);
  int64_t exchanges = 0;
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(trace.errors[r], "") << "rank " << r;
    exchanges += trace.exchanges[r];
  }
  EXPECT_GT(exchanges, 0);
  EXPECT_LE(exchanges / 2, world * steps / target);
  job::JobSpec fixed = GossipJob();
  fixed.strategy.Set("period", 1);
  Trace p1 = Drive(fixed, world, steps, 64);
  int64_t p1_exchanges = 0;
  for (int r = 0; r < world; ++r) p1_exchanges += p1.exchanges[r];
  EXPECT_GT(p1_exchanges, 2 * exchanges);
}

TEST(GossipJob, CalibrationOptionsAreValidatedNamingTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"    type: gossip\n    targetInterval: 0\n", "spec.strategy.targetInterval"},
      {"    type: gossip\n    calibrationSteps: 0\n", "spec.strategy.calibrationSteps"},
      {"    type: gossip\n    targetInterval: often\n", "spec.strategy.targetInterval"},
      {"    type: gossip\n    threshold: 0.1\n    targetInterval: 4\n",
       "spec.strategy.targetInterval"},
      {"    type: gossip\n    period: 2\n    calibrationSteps: 50\n",
       "spec.strategy.calibrationSteps"},
      {"    type: gossip\n    calibrate: false\n    targetInterval: 4\n",
       "spec.strategy.targetInterval"},
      {"    type: gossip\n    targetInterval: 80\n", "spec.strategy.targetInterval"},
      {"    type: gossip\n    targetInterval: 8\n    calibrationSteps: 7\n",
       "spec.strategy.calibrationSteps"},
      {"    type: ssgd\n    targetInterval: 4\n", "spec.strategy.targetInterval"},
      {"    type: localsgd\n    calibrationSteps: 40\n", "spec.strategy.calibrationSteps"},
  };
  for (const auto& [yaml, path] : cases) {
    auto spec = Parse(yaml);
    absl::Status status = spec.ok() ? job::ValidateJob(*spec) : spec.status();
    EXPECT_FALSE(status.ok()) << yaml;
    EXPECT_NE(status.message().find(path), std::string::npos) << yaml << " -> " << status;
  }
  // targetInterval up to maxInterval; maxInterval: 0 bounds nothing.
  for (const char* ok : {"    type: gossip\n    targetInterval: 80\n    maxInterval: 0\n",
                         "    type: gossip\n    targetInterval: 64\n",
                         "    type: gossip\n    calibrate: true\n    calibrationSteps: 5\n"}) {
    auto spec = Parse(ok);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_TRUE(job::ValidateJob(*spec).ok()) << ok << job::ValidateJob(*spec);
  }
}

}  // namespace
}  // namespace hptrain::sync
