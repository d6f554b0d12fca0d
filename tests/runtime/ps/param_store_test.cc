// ParamStore: aggregation in rank order, the optimizer step once per round, versions, pulls and
// mirrors, and every refusal leaving the shard as it was (docs/algorithms.md §5d); mp2's
// inference overlapped with the round (pushes and pulls served while it runs).
#include "runtime/ps/param_store.h"

#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/update/update.h"
#include "runtime/comm/encoded_tensor.h"
#include "runtime/ps/mp2/predictor.h"
#include "runtime/ps/mp2/schedule.h"
#include "runtime/ps/ps_codec.h"
#include "runtime/ps/shard_plan.h"

namespace hptrain::ps {
namespace {

using ::testing::HasSubstr;

constexpr auto kWait = std::chrono::seconds(10);

// Two tensors (3000 and 5 elements) in shard 0 of 1, three workers, B = 12.
struct Fixture {
  Fixture(int max_lead = 0) {
    ParamStoreConfig config;
    config.world_size = 3;
    config.global_batch = 12;
    config.optimizer.lr = 0.1;
    config.optimizer.momentum = 0.9;
    config.max_lead = max_lead;
    store = std::make_unique<ParamStore>(config);
    store->set_on_rejected([this](const std::string& reason) { rejected.push_back(reason); });
    layout.end = 3005;
    layout.tensor_sizes = {3000, 5};
    layout.world_size = 3;
    ShardState state;
    state.sections["params"] = Initial();
    EXPECT_TRUE(store->Init(0, layout, state).ok());
  }
  static std::vector<float> Initial() {
    std::vector<float> p(3005);
    for (size_t i = 0; i < p.size(); ++i) p[i] = 0.01f * std::cos(0.01f * i);
    return p;
  }
  static std::vector<float> Gradient(int rank, int step) {
    std::vector<float> g(3005);
    for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.002f * i + rank + 0.5f * step);
    return g;
  }
  static std::vector<std::vector<uint8_t>> Dense(const std::vector<float>& g, size_t begin,
                                                 size_t end, std::vector<int64_t> sizes) {
    std::vector<std::vector<uint8_t>> out;
    size_t offset = begin;
    for (int64_t n : sizes) {
      out.push_back(*EncodeGradient(g.data() + offset, nullptr, n, 32, 0, 0));
      offset += n;
    }
    EXPECT_EQ(offset, end);
    return out;
  }
  absl::StatusOr<int64_t> PushAll(int rank, int step, double lr = 0.1) {
    PushInfo push{rank, step, step, 4, lr, 0, 3005};
    return store->Push(push, Dense(Gradient(rank, step), 0, 3005, {3000, 5}));
  }
  std::vector<float> Params() { return store->GetState(store->version(), kWait)->sections["params"]; }

  std::unique_ptr<ParamStore> store;
  ShardLayoutInfo layout;
  std::vector<std::string> rejected;
};

TEST(ParamStore, AppliesOneOptimizerStepPerRoundOnTheRankOrderSumOverB) {
  Fixture f;
  ASSERT_TRUE(f.PushAll(2, 0).ok());
  ASSERT_TRUE(f.PushAll(0, 0).ok());
  EXPECT_EQ(f.store->version(), 0);  // rank 1 is missing
  ASSERT_TRUE(f.PushAll(1, 0).ok());
  EXPECT_EQ(f.store->version(), 1);
  // The same arithmetic by hand: rank 0 + rank 1 + rank 2, × 1/B, SGD with momentum (first step).
  std::vector<float> g = Fixture::Gradient(0, 0), g1 = Fixture::Gradient(1, 0),
                     g2 = Fixture::Gradient(2, 0);
  for (size_t i = 0; i < g.size(); ++i) g[i] += g1[i];
  for (size_t i = 0; i < g.size(); ++i) g[i] += g2[i];
  kernels::Scale(g.data(), g.size(), 1.0f / 12);
  std::vector<float> expected = Fixture::Initial();
  std::vector<float> momentum(g.size());
  kernels::SgdParams p;
  p.lr = 0.1f;
  p.momentum = 0.9f;
  p.first_step = true;
  kernels::SgdStep(expected.data(), g.data(), momentum.data(), g.size(), p);
  EXPECT_EQ(f.Params(), expected);
  ShardState state = *f.store->GetState(1, kWait);
  EXPECT_EQ(state.sections["momentum"], momentum);
  EXPECT_EQ(state.optimizer_steps, 1);
}

TEST(ParamStore, PushesOfARoundMayComeTensorByTensor) {
  Fixture a, b;
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(a.PushAll(rank, 0).ok());
    std::vector<float> g = Fixture::Gradient(rank, 0);
    ASSERT_TRUE(b.store->Push({rank, 0, 0, 4, 0.1, 3000, 3005}, Fixture::Dense(g, 3000, 3005, {5}))
                    .ok());
    ASSERT_TRUE(
        b.store->Push({rank, 0, 0, 4, 0.1, 0, 3000}, Fixture::Dense(g, 0, 3000, {3000})).ok());
  }
  EXPECT_EQ(b.store->version(), 1);
  EXPECT_EQ(b.Params(), a.Params());
}

// Every bad push is refused with a one-line message naming it, and the shard is unchanged: the
// round then completes with the good pushes exactly as if the bad one had never come.
TEST(ParamStore, RefusedPushesLeaveTheShardUnchanged) {
  Fixture reference;
  for (int rank = 0; rank < 3; ++rank) ASSERT_TRUE(reference.PushAll(rank, 0).ok());

  Fixture f;
  ASSERT_TRUE(f.PushAll(0, 0).ok());
  const std::vector<float> before = f.Params();
  std::vector<float> g = Fixture::Gradient(1, 0);
  struct Case {
    std::string name;
    absl::StatusOr<int64_t> result;
    std::string message;
    std::string reason;
  };
  std::vector<std::vector<uint8_t>> short_tensors = Fixture::Dense(g, 0, 3005, {3000, 5});
  short_tensors[1].resize(short_tensors[1].size() - 4);  // truncated
  std::vector<std::vector<uint8_t>> wrong_count = Fixture::Dense(g, 0, 3000, {3000});
  std::vector<Case> cases;
  cases.push_back({"stale", f.store->Push({1, -1, 0, 4, 0.1, 0, 3005},
                                          Fixture::Dense(g, 0, 3005, {3000, 5})),
                   "stale push of rank 1 for step -1", "stale_step"});
  cases.push_back({"future", f.store->Push({1, 1, 0, 4, 0.1, 0, 3005},
                                           Fixture::Dense(g, 0, 3005, {3000, 5})),
                   "future push of rank 1 for step 1", "future_step"});
  cases.push_back({"truncated", f.store->Push({1, 0, 0, 4, 0.1, 0, 3005}, short_tensors),
                   "push of rank 1 for step 0, tensor 1", "size"});
  cases.push_back({"count", f.store->Push({1, 0, 0, 4, 0.1, 0, 3005}, wrong_count),
                   "1 tensors for [0, 3005), which holds 2", "size"});
  cases.push_back({"range", f.store->Push({1, 0, 0, 4, 0.1, 0, 2999},
                                          Fixture::Dense(g, 0, 2999, {2999})),
                   "is not whole tensors of shard 0", "size"});
  cases.push_back({"rank", f.store->Push({3, 0, 0, 4, 0.1, 0, 3005},
                                         Fixture::Dense(g, 0, 3005, {3000, 5})),
                   "rank out of range", "rank"});
  cases.push_back({"duplicate", f.PushAll(0, 0), "duplicate push of rank 0 for step 0",
                   "duplicate"});
  cases.push_back({"lr", f.PushAll(1, 0, 0.2), "learning rate 0.2 differs", "lr"});
  ASSERT_EQ(f.rejected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_FALSE(cases[i].result.ok()) << cases[i].name;
    const std::string message(cases[i].result.status().message());
    EXPECT_THAT(message, HasSubstr(cases[i].message)) << cases[i].name;
    EXPECT_EQ(message.find('\n'), std::string::npos) << cases[i].name;
    EXPECT_EQ(f.rejected[i], cases[i].reason) << cases[i].name;
  }
  EXPECT_EQ(f.store->version(), 0);
  EXPECT_EQ(f.Params(), before);
  ASSERT_TRUE(f.PushAll(1, 0).ok());
  ASSERT_TRUE(f.PushAll(2, 0).ok());
  EXPECT_EQ(f.Params(), reference.Params());
}

TEST(ParamStore, PushBeforeInitIsRefused) {
  ParamStoreConfig config;
  ParamStore store(config);
  auto result = store.Push({0, 0, 0, 1, 0.1, 0, 5}, {});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("before rank 0 initialised it"));
}

TEST(ParamStore, InitRejectsALayoutThatIsNotThisShards) {
  Fixture f;
  ShardLayoutInfo layout = f.layout;
  layout.shard = 1;
  ShardState state;
  state.sections["params"] = Fixture::Initial();
  EXPECT_THAT(std::string(f.store->Init(0, layout, state).message()),
              HasSubstr("the layout is for shard 1"));
  layout = f.layout;
  state.sections["params"].pop_back();
  EXPECT_THAT(std::string(f.store->Init(0, layout, state).message()),
              HasSubstr("\"params\" must hold 3005 values"));
  state.sections["params"] = Fixture::Initial();
  state.sections["adam.m"] = Fixture::Initial();
  EXPECT_THAT(std::string(f.store->Init(0, layout, state).message()),
              HasSubstr("\"adam.m\" is not state of the job's optimizer"));
}

TEST(ParamStore, PullWaitsForTheVersionAndTimesOut) {
  Fixture f;
  auto early = f.store->Pull(0, 1, 32, std::chrono::milliseconds(50));
  ASSERT_FALSE(early.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(early.status()));
  EXPECT_THAT(std::string(early.status().message()), HasSubstr("did not reach model version 1"));
  std::thread pusher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int rank = 0; rank < 3; ++rank) ASSERT_TRUE(f.PushAll(rank, 0).ok());
  });
  auto pulled = f.store->Pull(0, 1, 32, kWait);
  pusher.join();
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->version, 1);
  ASSERT_EQ(pulled->tensors.size(), 2u);
  std::vector<float> copy(3005);
  ASSERT_TRUE(ApplyPulled(*DecodePsTensor(pulled->tensors[0], 3000, "t0"), copy.data()));
  ASSERT_TRUE(ApplyPulled(*DecodePsTensor(pulled->tensors[1], 5, "t1"), copy.data() + 3000));
  EXPECT_EQ(copy, f.Params());
}

TEST(ParamStore, ADeltaNeedsAFullPullFirst) {
  Fixture f;
  auto delta = f.store->Pull(1, 0, 8, kWait);
  ASSERT_FALSE(delta.ok());
  EXPECT_THAT(std::string(delta.status().message()), HasSubstr("needs a full pull"));
  EXPECT_TRUE(f.store->Pull(1, 0, 32, kWait).ok());
  EXPECT_TRUE(f.store->Pull(1, 0, 8, kWait).ok());
  EXPECT_FALSE(f.store->Pull(1, 0, 3, kWait).ok());
}

// With a staleness bound the shard serves the version asked for even when it has moved one on.
TEST(ParamStore, ServesTheVersionAskedForOneBehind) {
  Fixture f(/*max_lead=*/1);
  ASSERT_TRUE(f.store->Pull(0, 0, 32, kWait).ok());
  for (int rank = 0; rank < 3; ++rank) ASSERT_TRUE(f.PushAll(rank, 0).ok());
  const std::vector<float> v1 = f.Params();
  for (int rank = 0; rank < 3; ++rank) ASSERT_TRUE(f.PushAll(rank, 1).ok());
  ASSERT_EQ(f.store->version(), 2);
  auto pulled = f.store->Pull(0, 1, 32, kWait);
  ASSERT_TRUE(pulled.ok());
  EXPECT_EQ(pulled->version, 1);
  std::vector<float> copy(3005);
  ApplyPulled(*DecodePsTensor(pulled->tensors[0], 3000, "t0"), copy.data());
  ApplyPulled(*DecodePsTensor(pulled->tensors[1], 5, "t1"), copy.data() + 3000);
  EXPECT_EQ(copy, v1);
}

TEST(ParamStore, GetStateOfAPassedVersionIsRefused) {
  Fixture f;
  for (int rank = 0; rank < 3; ++rank) ASSERT_TRUE(f.PushAll(rank, 0).ok());
  auto state = f.store->GetState(0, kWait);
  ASSERT_FALSE(state.ok());
  EXPECT_THAT(std::string(state.status().message()), HasSubstr("is already at 1"));
}

TEST(ParamStore, ShutdownWakesWaitingPulls) {
  Fixture f;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    f.store->Shutdown();
  });
  auto pulled = f.store->Pull(0, 5, 32, kWait);
  stopper.join();
  EXPECT_TRUE(absl::IsCancelled(pulled.status()));
}

// A predictor whose calls block until the test lets them finish (call i needs Allow(i + 1)); it
// predicts no change. Stands in for an inference slower than a round.
class GatedPredictor : public mp2::PredictorRunner {
 public:
  GatedPredictor() : PredictorRunner(mp2::EmptyPredictor(mp2::kDefaultHistory, 8, 4)) {}
  void Predict(const float* histories, int64_t n, float* out, int /*threads*/) const override {
    std::unique_lock<std::mutex> lock(mu_);
    const int call = started_++;
    cv_.notify_all();
    cv_.wait(lock, [&] { return allowed_ > call; });
    const int K = mp2::kDefaultHistory;
    for (int64_t e = 0; e < n; ++e) out[e] = histories[e * K + K - 1];
    ++finished_;
    cv_.notify_all();
  }
  void Allow(int calls) {
    std::lock_guard<std::mutex> lock(mu_);
    allowed_ = calls;
    cv_.notify_all();
  }
  // Waits until `calls` calls have started; false after 10 s.
  bool WaitStarted(int calls) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return started_ >= calls; });
  }
  int finished() const {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int started_ = 0;
  mutable int finished_ = 0;
  int allowed_ = 0;
};

// mp2: round t's inference runs while round t is pushed, and a round is applied by the pull that
// needs it: pushes are taken, and the pull of the round before is served, while an inference is
// still running; no pull gets a version whose inference has not finished.
TEST(Mp2ParamStore, TheInferenceRunsBesideTheRound) {
  GatedPredictor predictor;  // outlives the store, whose last inference it runs
  ParamStoreConfig config;
  config.world_size = 2;
  config.global_batch = 8;
  Mp2StoreConfig mp2;
  mp2.prediction.push_ratio = 0.1;
  mp2.prediction.overlapped = true;
  mp2.predictor = &predictor;
  config.mp2 = mp2;
  ParamStore store(config);
  ShardLayoutInfo layout;
  layout.end = 10100;
  layout.tensor_sizes = {100, 10000};  // the second is predicted: one inference per round
  layout.world_size = 2;
  ShardState state;
  state.sections["params"] = std::vector<float>(10100, 1.0f);
  ASSERT_TRUE(store.Init(0, layout, state).ok());
  const mp2::SubsetSchedule schedule(0, 0, 1, 10000, 0.1);
  auto push = [&](int rank, int64_t step) {
    PushInfo info;
    info.rank = rank;
    info.step = step;
    info.batch_size = 4;
    info.begin = 0;
    info.end = 10100;
    info.schedule = mp2::ScheduleFingerprint(0, 0.1);
    std::vector<float> small(100, 2.0f + step), big(schedule.Subset(step).size(), 3.0f + step);
    std::vector<std::vector<uint8_t>> tensors;
    tensors.push_back(*EncodeValues(small.data(), 100));
    tensors.push_back(*EncodeValues(big.data(), static_cast<int64_t>(big.size())));
    return store.Push(info, tensors);
  };
  // Round 0's inference started at Init and is held: both pushes are taken, the round waits.
  ASSERT_TRUE(predictor.WaitStarted(1));
  ASSERT_TRUE(push(0, 0).ok());
  ASSERT_TRUE(push(1, 0).ok());
  EXPECT_EQ(predictor.finished(), 0);
  EXPECT_EQ(store.version(), 0);
  // The pull of version 1 waits for it, then applies the round.
  auto first = std::async(std::launch::async, [&] { return store.Pull(0, 1, 32, kWait); });
  EXPECT_EQ(first.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  predictor.Allow(1);
  absl::StatusOr<PullResult> pulled = first.get();
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->version, 1);
  // Round 1's inference starts as round 0 is applied; while it is held, rank 1's pull of version
  // 1 is served and round 1's pushes are taken.
  ASSERT_TRUE(predictor.WaitStarted(2));
  absl::StatusOr<PullResult> second = store.Pull(1, 1, 32, kWait);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->version, 1);
  ASSERT_TRUE(push(0, 1).ok());
  ASSERT_TRUE(push(1, 1).ok());
  EXPECT_EQ(predictor.finished(), 1);
  EXPECT_EQ(store.version(), 1);
  // Nothing is served for version 2 before its inference ends: the pull times out meanwhile.
  absl::StatusOr<PullResult> early = store.Pull(0, 2, 32, std::chrono::milliseconds(20));
  EXPECT_EQ(early.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(early.status().message()), HasSubstr("inference has not finished"));
  predictor.Allow(100);
  absl::StatusOr<ShardState> after = store.GetState(2, kWait);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->sections.at("params")[0], 3.0f);  // round 1's small tensor
  EXPECT_EQ(predictor.finished() >= 2, true);
}

TEST(ShardPlan, SplitsTheParametersEquallyCuttingTensorsAtTheBoundaries) {
  auto plan = PlanShards({150, 6, 2400, 16, 48000, 120, 10080, 84, 840, 10}, 2);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->shards.size(), 2u);
  EXPECT_EQ(plan->shards[0].begin, 0);
  EXPECT_EQ(plan->shards[0].end, 30853);  // half of 61,706
  EXPECT_EQ(plan->shards[1].begin, 30853);
  EXPECT_EQ(plan->shards[1].end, 61706);
  // The 48,000-element tensor at [2,572, 50,572) is cut into 28,281 + 19,719.
  EXPECT_EQ(plan->pieces, (std::vector<int64_t>{150, 6, 2400, 16, 28281, 19719, 120, 10080, 84,
                                                840, 10}));
  EXPECT_EQ(plan->shards[0].piece_sizes, (std::vector<int64_t>{150, 6, 2400, 16, 28281}));
  EXPECT_EQ(plan->shards[1].first_piece, 5);
  EXPECT_EQ(plan->shards[1].last_piece, 11);
  EXPECT_EQ(plan->ShardOf(30852), 0);
  EXPECT_EQ(plan->ShardOf(30853), 1);
  // One shard: the pieces are the tensors.
  auto one = PlanShards({5, 7}, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->pieces, (std::vector<int64_t>{5, 7}));
  // A boundary on a tensor boundary cuts nothing; a tensor may be cut more than once.
  auto three = PlanShards({3, 3}, 2);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(three->pieces, (std::vector<int64_t>{3, 3}));
  auto cuts = PlanShards({9}, 3);
  ASSERT_TRUE(cuts.ok());
  EXPECT_EQ(cuts->pieces, (std::vector<int64_t>{3, 3, 3}));
  auto too_many = PlanShards({1, 1}, 3);
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(std::string(too_many.status().message()),
              HasSubstr("3 shards for a model of 2 parameters"));
}

}  // namespace
}  // namespace hptrain::ps
