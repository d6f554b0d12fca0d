// The parameter-server strategies across membership epochs (docs/elastic.md, "Parameter
// servers"): the strategy of a dead epoch, with a pull in flight that will never be served, is
// destroyed at once after PsConnection::CancelPending; the next epoch's strategy re-initialises
// the elastic shard through Start, from the parameters or from the ps.* sections rank 0
// broadcasts, and trains exactly as a fresh start from that state does.
#include <future>
#include <memory>
#include <thread>

#include "gtest/gtest.h"
#include "runtime/base/status.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/comm/work.h"
#include "runtime/ps/param_store.h"
#include "runtime/ps/ps_connection.h"
#include "runtime/sync/hierarchical.h"
#include "runtime/sync/registry.h"
#include "tests/runtime/sync/strategy_harness.h"

namespace hptrain::sync::testing {
namespace {

constexpr size_t kSize = 3005;
constexpr int kGlobalBatch = 12;

job::JobSpec HpsJob() {
  job::JobSpec spec = HarnessJob("hps");
  spec.strategy.Set("staleness", 1);
  spec.strategy.Set("bits", "32");
  spec.global_batch_size = kGlobalBatch;
  return spec;
}

std::unique_ptr<ps::ParamStore> Store(const job::JobSpec& spec, int slots, bool elastic) {
  ps::ParamStoreConfig config;
  config.world_size = slots;
  config.elastic = elastic;
  config.global_batch = kGlobalBatch;
  config.optimizer = spec.optimizer;
  config.max_lead = 1;
  return std::make_unique<ps::ParamStore>(config);
}

std::vector<float> InitialParams() {
  std::vector<float> p(kSize);
  for (size_t i = 0; i < p.size(); ++i) p[i] = 0.01f * std::cos(0.01f * i);
  return p;
}

// One worker of an epoch: its communicator over the epoch's hub and its strategy, driven as the
// trainer drives an updater (one bucket of two tensors).
struct Worker {
  Worker(const job::JobSpec& spec, std::shared_ptr<comm::LoopbackHub> hub, int rank,
         ps::PsConnection* ps)
      : rank(rank) {
    auto made = MakeJobCommunicator(spec, std::make_unique<comm::LoopbackTransport>(hub, rank));
    EXPECT_TRUE(made.ok()) << made.status();
    comm = *std::move(made);
    auto created = CreateStrategy(StrategyContextFor(spec, comm.get(), ps));
    EXPECT_TRUE(created.ok()) << created.status();
    strategy = *std::move(created);
    GradientLayout layout;
    layout.tensors = {{0, 3000}, {3000, kSize}};
    layout.buckets = {{0, kSize}};
    EXPECT_TRUE(strategy->Init(layout).ok());
  }
  absl::Status Step(int64_t step, std::vector<float>& params) {
    StepInfo info;
    info.step = step;
    info.global_batch = kGlobalBatch;
    info.local_batch = kGlobalBatch / comm->size();
    info.lr = 0.1;
    std::vector<float> g(kSize);
    for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.002f * i + rank + 0.5f * step);
    HPTRAIN_RETURN_IF_ERROR(
        strategy->updater()->Accumulate(info, 0, comm::BufferRef::Host(g.data(), kSize))->Wait());
    return strategy->updater()->Update(info, absl::MakeSpan(params)).status();
  }

  int rank;
  std::unique_ptr<comm::Communicator> comm;
  std::unique_ptr<Strategy> strategy;
};

// The shard's parameters and optimizer state at its current version.
std::map<std::string, std::vector<float>> ShardSections(ps::ParamStore& store) {
  return store.GetState(store.version(), std::chrono::seconds(10))->sections;
}

TEST(PsMembership, TheStrategyOfADeadEpochEndsAtOnceAndTheNextReInitialisesTheShard) {
  const job::JobSpec spec = HpsJob();
  auto store = Store(spec, /*slots=*/2, /*elastic=*/true);
  // A pull that is never served would hold the old strategy's destructor for 10 minutes.
  ps::LocalPsConnection connection({store.get()}, std::chrono::minutes(10));

  // Epoch 0: ranks 0 and 1; rank 1 is lost before it pushes round 0. Rank 0's step 0 leaves the
  // pull of version 1 running in the background (staleness 1): it waits for rank 1's push.
  std::vector<float> params = InitialParams();
  auto old_epoch =
      std::make_unique<Worker>(spec, std::make_shared<comm::LoopbackHub>(2), 0, &connection);
  ASSERT_TRUE(old_epoch->strategy->Start(absl::MakeSpan(params), 0, {}).ok());
  ASSERT_TRUE(old_epoch->Step(0, params).ok());
  EXPECT_EQ(store->version(), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (store->waiting() != 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(store->waiting(), 1);  // the pull of version 1
  connection.CancelPending();
  old_epoch.reset();  // returns: the background pull ended with Cancelled
  EXPECT_EQ(store->waiting(), 0);

  // Epoch 1: rank 0 alone continues from version 0 with its copy (no ps.* state broadcast).
  connection.set_membership_epoch(1);
  const std::vector<float> start = params;
  Worker alone(spec, std::make_shared<comm::LoopbackHub>(1), 0, &connection);
  ASSERT_TRUE(alone.strategy->Start(absl::MakeSpan(params), 0, {}).ok());
  EXPECT_EQ(store->world_size(), 1);
  EXPECT_EQ(store->membership_epoch(), 1);
  for (int64_t step = 0; step < 3; ++step) ASSERT_TRUE(alone.Step(step, params).ok());
  ASSERT_TRUE(alone.strategy->Synchronize(3, absl::MakeSpan(params)).ok());
  EXPECT_EQ(store->version(), 3);

  // The same three steps on a fresh shard of a one-worker job started from that copy.
  auto fresh = Store(spec, 1, /*elastic=*/false);
  ps::LocalPsConnection fresh_connection({fresh.get()});
  std::vector<float> reference = start;
  Worker single(spec, std::make_shared<comm::LoopbackHub>(1), 0, &fresh_connection);
  ASSERT_TRUE(single.strategy->Start(absl::MakeSpan(reference), 0, {}).ok());
  for (int64_t step = 0; step < 3; ++step) ASSERT_TRUE(single.Step(step, reference).ok());
  ASSERT_TRUE(single.strategy->Synchronize(3, absl::MakeSpan(reference)).ok());
  EXPECT_EQ(params, reference);
  EXPECT_EQ(ShardSections(*store), ShardSections(*fresh));

  // Epoch 2: a worker joins. Rank 0 broadcasts its state, with the shards' (SaveState); the
  // new strategies' Start re-initialises the shard from those sections, momentum included, and
  // rank 1's initial pull waits for that Init.
  CheckpointSections sections;
  ASSERT_TRUE(alone.strategy->SaveState(3, &sections).ok());
  ASSERT_EQ(sections.count("ps.momentum"), 1u);
  connection.set_membership_epoch(2);
  ps::LocalPsConnection joiner({store.get()});
  joiner.set_membership_epoch(2);
  auto hub = std::make_shared<comm::LoopbackHub>(2);
  std::vector<float> joined(kSize, 0.0f);
  auto second = std::async(std::launch::async, [&] {
    Worker w(spec, hub, 1, &joiner);
    HPTRAIN_RETURN_IF_ERROR(w.strategy->Start(absl::MakeSpan(joined), 3, sections));
    HPTRAIN_RETURN_IF_ERROR(w.Step(3, joined));
    return w.strategy->Synchronize(4, absl::MakeSpan(joined));
  });
  {
    Worker first(spec, hub, 0, &connection);
    ASSERT_TRUE(first.strategy->Start(absl::MakeSpan(params), 3, sections).ok());
    EXPECT_EQ(store->world_size(), 2);
    EXPECT_EQ(ShardSections(*store).at("momentum"), sections.at("ps.momentum"));
    ASSERT_TRUE(first.Step(3, params).ok());
    ASSERT_TRUE(first.strategy->Synchronize(4, absl::MakeSpan(params)).ok());
  }
  absl::Status joined_status = second.get();
  ASSERT_TRUE(joined_status.ok()) << joined_status;
  EXPECT_EQ(store->version(), 4);
  EXPECT_EQ(joined, params);
}

}  // namespace
}  // namespace hptrain::sync::testing
