// ParamStore across membership epochs (docs/elastic.md, "Parameter servers"): an elastic shard
// takes its world size from each Init, a re-Init drops the partial round and wakes the waiting
// calls with Aborted, calls of another epoch are refused, and LocalPsConnection::CancelPending
// ends a blocked pull. Non-elastic shards keep their world-size check.
#include <future>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/ps/param_store.h"
#include "runtime/ps/ps_codec.h"
#include "runtime/ps/ps_connection.h"

namespace hptrain::ps {
namespace {

using ::testing::HasSubstr;

constexpr auto kWait = std::chrono::seconds(10);
constexpr int kSize = 3005;

std::vector<float> Initial() {
  std::vector<float> p(kSize);
  for (size_t i = 0; i < p.size(); ++i) p[i] = 0.01f * std::cos(0.01f * i);
  return p;
}

std::vector<float> Gradient(int rank, int64_t step) {
  std::vector<float> g(kSize);
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.002f * i + rank + 0.5f * step);
  return g;
}

std::vector<std::vector<uint8_t>> Dense(const std::vector<float>& g) {
  return {*EncodeGradient(g.data(), nullptr, 3000, 32, 0, 0),
          *EncodeGradient(g.data() + 3000, nullptr, 5, 32, 0, 0)};
}

ShardLayoutInfo Layout(int world, int64_t epoch) {
  ShardLayoutInfo layout;
  layout.end = kSize;
  layout.tensor_sizes = {3000, 5};
  layout.world_size = world;
  layout.membership_epoch = epoch;
  return layout;
}

ShardState State(int64_t version, std::vector<float> params) {
  ShardState state;
  state.version = version;
  state.optimizer_steps = version;
  state.sections["params"] = std::move(params);
  return state;
}

// One shard of a job with `slots` worker slots (elastic) or workers; B = 12, SGD with momentum.
struct Shard {
  explicit Shard(int slots, bool elastic = true) {
    ParamStoreConfig config;
    config.world_size = slots;
    config.elastic = elastic;
    config.global_batch = 12;
    config.optimizer.lr = 0.1;
    config.optimizer.momentum = 0.9;
    store = std::make_unique<ParamStore>(config);
    store->set_on_rejected([this](const std::string& reason) { rejected.push_back(reason); });
  }
  absl::StatusOr<int64_t> Push(int rank, int64_t step, int64_t epoch = 0) {
    PushInfo push{rank, step, step, 4, 0.1, 0, kSize};
    push.membership_epoch = epoch;
    return store->Push(push, Dense(Gradient(rank, step)));
  }
  absl::StatusOr<ShardState> State() { return store->GetState(store->version(), kWait); }
  // Waits until exactly `n` calls wait in the store (false after 10 s).
  bool WaitForWaiters(int n) {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (store->waiting() != n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }

  std::unique_ptr<ParamStore> store;
  std::vector<std::string> rejected;
};

// Epoch 0 has four workers; rank 3 is lost after ranks 0..2 pushed round 0. Rank 0 of epoch 1
// re-initialises the shard for three at version 0: the partial round is gone, and rounds 0 and 1
// complete with three pushes each, exactly as on a shard that never had a fourth worker.
TEST(ParamStoreMembership, AReInitFromFourRanksToThreeDropsThePartialRound) {
  Shard f(/*slots=*/5);
  ASSERT_TRUE(f.store->Init(0, Layout(4, 0), State(0, Initial())).ok());
  for (int rank = 0; rank < 3; ++rank) ASSERT_TRUE(f.Push(rank, 0).ok());
  EXPECT_EQ(f.store->version(), 0);  // rank 3 is missing

  ASSERT_TRUE(f.store->Init(0, Layout(3, 1), State(0, Initial())).ok());
  EXPECT_EQ(f.store->world_size(), 3);
  EXPECT_EQ(f.store->membership_epoch(), 1);
  Shard reference(/*slots=*/3, /*elastic=*/false);
  ASSERT_TRUE(reference.store->Init(0, Layout(3, 0), State(0, Initial())).ok());
  for (int64_t step = 0; step < 2; ++step) {
    for (int rank = 0; rank < 3; ++rank) {
      ASSERT_TRUE(reference.Push(rank, step).ok());
      if (rank < 2) {
        ASSERT_TRUE(f.Push(rank, step, 1).ok());
        EXPECT_EQ(f.store->version(), step);  // the round waits for rank 2 only
      }
    }
    // Rank 3 is not a member of epoch 1.
    auto outside = f.Push(3, step, 1);
    ASSERT_FALSE(outside.ok());
    EXPECT_THAT(std::string(outside.status().message()),
                HasSubstr("rank out of range, the job has 3 workers"));
    ASSERT_TRUE(f.Push(2, step, 1).ok());
    EXPECT_EQ(f.store->version(), step + 1);
  }
  EXPECT_EQ(f.State()->sections, reference.State()->sections);
  EXPECT_EQ(f.rejected, (std::vector<std::string>{"rank", "rank"}));
}

// A pull waiting for a round of epoch 0 (which will never complete: a worker is gone) ends with
// Aborted when rank 0 of epoch 1 re-initialises the shard, as does a waiting GetState.
TEST(ParamStoreMembership, AReInitWakesAWaitingPullWithAborted) {
  Shard f(/*slots=*/4);
  ASSERT_TRUE(f.store->Init(0, Layout(4, 0), State(0, Initial())).ok());
  auto pull = std::async(std::launch::async, [&] { return f.store->Pull(1, 1, 32, kWait, 0); });
  auto state = std::async(std::launch::async, [&] { return f.store->GetState(1, kWait); });
  ASSERT_TRUE(f.WaitForWaiters(2));
  ASSERT_TRUE(f.store->Init(0, Layout(3, 1), State(0, Initial())).ok());
  absl::StatusOr<PullResult> pulled = pull.get();
  ASSERT_FALSE(pulled.ok());
  EXPECT_TRUE(absl::IsAborted(pulled.status())) << pulled.status();
  EXPECT_THAT(std::string(pulled.status().message()),
              HasSubstr("parameter-server shard 0 re-initialised for membership epoch 1"));
  EXPECT_TRUE(absl::IsAborted(state.get().status()));
  EXPECT_EQ(f.store->waiting(), 0);
}

// After the Init of epoch 1, a push of epoch 0 still in flight is refused and does not enter
// epoch 1's round; so are pulls and Inits of epoch 0. A pull of epoch 2 waits for epoch 2's Init.
TEST(ParamStoreMembership, CallsOfAnotherEpochAreRefused) {
  Shard f(/*slots=*/4);
  ASSERT_TRUE(f.store->Init(0, Layout(4, 0), State(0, Initial())).ok());
  ASSERT_TRUE(f.store->Init(0, Layout(2, 1), State(0, Initial())).ok());
  ASSERT_TRUE(f.Push(0, 0, 1).ok());
  const ShardState before = *f.State();

  auto old_push = f.Push(1, 0, 0);
  ASSERT_FALSE(old_push.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(old_push.status()));
  const std::string message(old_push.status().message());
  EXPECT_THAT(message, HasSubstr("push of rank 1 for step 0 of membership epoch 0 to a shard in "
                                 "epoch 1"));
  EXPECT_EQ(message.find('\n'), std::string::npos);
  auto old_pull = f.store->Pull(1, 0, 32, kWait, 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(old_pull.status())) << old_pull.status();
  auto old_init = f.store->Init(0, Layout(4, 0), State(0, Initial()));
  EXPECT_TRUE(absl::IsFailedPrecondition(old_init)) << old_init;
  EXPECT_EQ(f.rejected, (std::vector<std::string>{"membership", "membership", "membership"}));
  EXPECT_EQ(f.store->version(), 0);
  EXPECT_EQ(f.State()->sections, before.sections);
  // Rank 1 of epoch 1 completes the round: only epoch 1's pushes are in it.
  ASSERT_TRUE(f.Push(1, 0, 1).ok());
  EXPECT_EQ(f.store->version(), 1);

  // A worker of epoch 2 may ask before rank 0 of epoch 2 re-initialised the shard.
  auto early = std::async(std::launch::async, [&] { return f.store->Pull(2, 3, 32, kWait, 2); });
  ASSERT_TRUE(f.WaitForWaiters(1));
  ASSERT_TRUE(f.store->Init(0, Layout(3, 2), State(3, Initial())).ok());
  absl::StatusOr<PullResult> pulled = early.get();
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->version, 3);
}

// A pull waiting for the Init of epoch 1 is refused at once when the shard is initialised for
// epoch 2 instead (epoch 1 ended before its rank 0 initialised the shard).
TEST(ParamStoreMembership, APullWaitingForASkippedEpochIsRefused) {
  Shard f(/*slots=*/3);
  auto waiting = std::async(std::launch::async, [&] { return f.store->Pull(1, 5, 32, kWait, 1); });
  ASSERT_TRUE(f.WaitForWaiters(1));
  ASSERT_TRUE(f.store->Init(0, Layout(2, 2), State(0, Initial())).ok());
  absl::StatusOr<PullResult> pulled = waiting.get();
  EXPECT_TRUE(absl::IsFailedPrecondition(pulled.status())) << pulled.status();
  EXPECT_THAT(std::string(pulled.status().message()),
              HasSubstr("of membership epoch 1 to a shard in epoch 2"));
  EXPECT_EQ(f.rejected, (std::vector<std::string>{"membership"}));
}

// Without spec.elastic the layout must be for exactly the job's workers; with it, for 1 to the
// slots.
TEST(ParamStoreMembership, WorldSizeChecks) {
  Shard fixed(/*slots=*/3, /*elastic=*/false);
  absl::Status status = fixed.store->Init(0, Layout(2, 0), State(0, Initial()));
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("the layout is for 2 workers, the job has 3"));
  Shard elastic(/*slots=*/3);
  status = elastic.store->Init(0, Layout(4, 0), State(0, Initial()));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("the layout is for 4 workers, the job has 1 to 3"));
  EXPECT_FALSE(elastic.store->Init(0, Layout(0, 0), State(0, Initial())).ok());
  EXPECT_EQ(elastic.rejected, (std::vector<std::string>{"layout", "layout"}));
  EXPECT_FALSE(elastic.store->initialised());
  EXPECT_TRUE(elastic.store->Init(0, Layout(1, 0), State(0, Initial())).ok());
}

// CancelPending ends this connection's blocked pull with Cancelled (another connection's pull on
// the same shard goes on waiting), refuses calls until set_membership_epoch, and the connection
// then serves the next epoch, stamping its calls with it.
TEST(LocalPsConnection, CancelPendingEndsABlockedPull) {
  Shard f(/*slots=*/2);
  LocalPsConnection leaving({f.store.get()}), staying({f.store.get()});
  ASSERT_TRUE(leaving.Init(0, 0, Layout(2, 0), State(0, Initial())).ok());
  auto blocked = std::async(std::launch::async, [&] { return leaving.Pull(0, 0, 1, 32); });
  auto other = std::async(std::launch::async, [&] { return staying.Pull(0, 1, 1, 32); });
  ASSERT_TRUE(f.WaitForWaiters(2));
  leaving.CancelPending();
  absl::StatusOr<PullResult> pulled = blocked.get();
  EXPECT_TRUE(absl::IsCancelled(pulled.status())) << pulled.status();
  EXPECT_TRUE(absl::IsCancelled(leaving.Pull(0, 0, 0, 32).status()));
  EXPECT_EQ(f.store->waiting(), 1);  // the other connection's pull

  leaving.set_membership_epoch(1);
  staying.set_membership_epoch(1);
  ASSERT_TRUE(leaving.Init(0, 0, Layout(2, 1), State(0, Initial())).ok());
  EXPECT_EQ(f.store->membership_epoch(), 1);
  EXPECT_TRUE(absl::IsAborted(other.get().status()));
  std::vector<float> g = Gradient(0, 0);
  ASSERT_TRUE(leaving.Push(0, {0, 0, 0, 4, 0.1, 0, kSize}, Dense(g)).ok());
  ASSERT_TRUE(staying.Push(0, {1, 0, 0, 4, 0.1, 0, kSize}, Dense(g)).ok());
  auto next = leaving.Pull(0, 0, 1, 32);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->version, 1);
}

}  // namespace
}  // namespace hptrain::ps
