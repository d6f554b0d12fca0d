// The parameter-server shard over gRPC (PsService + PsClient): the job token on every call, the
// client's errors naming the shard, a push through the wire reaching the store intact, and the
// membership epoch and CancelPending of a change of members.
#include "runtime/ps/ps_service.h"

#include <future>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/ps/grpc_server.h"
#include "runtime/ps/ps_client.h"
#include "runtime/ps/ps_codec.h"

namespace hptrain::ps {
namespace {

using ::testing::HasSubstr;

struct Served {
  Served() {
    ParamStoreConfig config;
    config.world_size = 1;
    config.global_batch = 2;
    config.optimizer.lr = 0.5;
    store = std::make_unique<ParamStore>(config);
    store->set_on_rejected([this](const std::string&) { ++refused; });
    service = std::make_unique<PsService>("secret", store.get());
    service->set_on_unauthenticated([this](const std::string& r) { unauthenticated.push_back(r); });
    auto started = StartGrpcServer("127.0.0.1", 0, {service.get()}, "parameter server");
    EXPECT_TRUE(started.ok()) << started.status();
    server = std::move(*started);
  }
  ~Served() { server.server->Shutdown(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(server.port); }

  std::unique_ptr<ParamStore> store;
  std::unique_ptr<PsService> service;
  RunningServer server;
  int refused = 0;
  std::vector<std::string> unauthenticated;
};

ShardLayoutInfo Layout() {
  ShardLayoutInfo layout;
  layout.end = 2000;
  layout.tensor_sizes = {1500, 500};
  layout.world_size = 1;
  return layout;
}

ShardState Initial() {
  ShardState state;
  state.sections["params"] = std::vector<float>(2000, 1.0f);
  return state;
}

TEST(PsService, PushAndPullOverTheWire) {
  Served served;
  PsClient client({served.address()}, "secret", std::chrono::seconds(10));
  ASSERT_TRUE(client.Init(0, 0, Layout(), Initial()).ok());
  std::vector<float> g(2000, 2.0f);
  std::vector<std::vector<uint8_t>> tensors = {*EncodeGradient(g.data(), nullptr, 1500, 8, 1, 0),
                                               *EncodeGradient(g.data(), nullptr, 500, 8, 1, 0)};
  auto version = client.Push(0, {0, 0, 0, 2, 0.5, 0, 2000}, tensors);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 1);
  auto pulled = client.Pull(0, 0, 1, 32);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  std::vector<float> copy(2000);
  ApplyPulled(*DecodePsTensor(pulled->tensors[0], 1500, "t0"), copy.data());
  ApplyPulled(*DecodePsTensor(pulled->tensors[1], 500, "t1"), copy.data() + 1500);
  // A constant gradient quantizes exactly: 1 − 0.5 · 2 / 2 = 0.5.
  EXPECT_EQ(copy, std::vector<float>(2000, 0.5f));
  // Payload bytes: rank 0 sent the initial 8,000 and one 8-bit push (1,500 + 8 bytes and the
  // 500-element tensor in fp32); it received one fp32 pull.
  EXPECT_EQ(client.bytes_sent(), 8000 + 1508 + 2000);
  EXPECT_EQ(client.bytes_received(), 8000);
}

TEST(PsService, AWrongOrMissingTokenIsRefusedAndChangesNothing) {
  Served served;
  PsClient good({served.address()}, "secret", std::chrono::seconds(10));
  ASSERT_TRUE(good.Init(0, 0, Layout(), Initial()).ok());
  PsClient bad({served.address()}, "other-job", std::chrono::seconds(10));
  std::vector<float> g(2000, 2.0f);
  std::vector<std::vector<uint8_t>> tensors = {*EncodeGradient(g.data(), nullptr, 1500, 32, 1, 0),
                                               *EncodeGradient(g.data(), nullptr, 500, 32, 1, 0)};
  auto pushed = bad.Push(0, {0, 0, 0, 2, 0.5, 0, 2000}, tensors);
  ASSERT_FALSE(pushed.ok());
  EXPECT_TRUE(absl::IsUnauthenticated(pushed.status())) << pushed.status();
  EXPECT_THAT(std::string(pushed.status().message()),
              HasSubstr("parameter server shard 0 (" + served.address() + ") Push"));
  EXPECT_THAT(std::string(pushed.status().message()), HasSubstr("job token does not match"));
  EXPECT_FALSE(bad.Init(0, 0, Layout(), Initial()).ok());
  EXPECT_EQ(served.unauthenticated, (std::vector<std::string>{"bad_token", "bad_token"}));
  EXPECT_EQ(served.store->version(), 0);
  auto state = served.store->GetState(0, std::chrono::seconds(1));
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->sections["params"], std::vector<float>(2000, 1.0f));
}

TEST(PsService, ARefusedPushComesBackNamingItAndTheShard) {
  Served served;
  PsClient client({served.address()}, "secret", std::chrono::seconds(10));
  ASSERT_TRUE(client.Init(0, 0, Layout(), Initial()).ok());
  std::vector<float> g(2000, 2.0f);
  std::vector<std::vector<uint8_t>> tensors = {*EncodeGradient(g.data(), nullptr, 1500, 32, 1, 0)};
  auto pushed = client.Push(0, {0, 3, 3, 2, 0.5, 0, 1500}, tensors);
  ASSERT_FALSE(pushed.ok());
  EXPECT_THAT(std::string(pushed.status().message()),
              HasSubstr("future push of rank 0 for step 3"));
  EXPECT_EQ(served.refused, 1);
}

// Waits until exactly `n` calls wait in `store` (false after 10 s).
bool WaitForWaiters(const ParamStore& store, int n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (store.waiting() != n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// A change of members: a pull blocked on a round that will never complete returns Cancelled at
// once after CancelPending (not after the client's 60 s deadline); calls are refused until the
// client is set to the next epoch, after which the same client serves it. The store sees the
// epochs the client stamps: a push of the old epoch is refused.
TEST(PsService, CancelPendingEndsABlockedPullAndTheClientServesTheNextEpoch) {
  Served served;
  PsClient client({served.address()}, "secret", std::chrono::seconds(60));
  ASSERT_TRUE(client.Init(0, 0, Layout(), Initial()).ok());
  auto blocked = std::async(std::launch::async, [&] { return client.Pull(0, 0, 5, 32); });
  ASSERT_TRUE(WaitForWaiters(*served.store, 1));
  client.CancelPending();
  absl::StatusOr<PullResult> pulled = blocked.get();
  ASSERT_FALSE(pulled.ok());
  EXPECT_TRUE(absl::IsCancelled(pulled.status())) << pulled.status();
  EXPECT_THAT(std::string(pulled.status().message()), HasSubstr("parameter server shard 0"));
  EXPECT_TRUE(absl::IsCancelled(client.Pull(0, 0, 0, 32).status()));

  client.set_membership_epoch(1);
  ASSERT_TRUE(client.Init(0, 0, Layout(), Initial()).ok());  // ends the server's wait too
  EXPECT_EQ(served.store->membership_epoch(), 1);
  EXPECT_TRUE(WaitForWaiters(*served.store, 0));
  std::vector<float> g(2000, 2.0f);
  std::vector<std::vector<uint8_t>> tensors = {*EncodeGradient(g.data(), nullptr, 1500, 32, 1, 0),
                                               *EncodeGradient(g.data(), nullptr, 500, 32, 1, 0)};
  PsClient old({served.address()}, "secret", std::chrono::seconds(10));  // still in epoch 0
  auto refused = old.Push(0, {0, 0, 0, 2, 0.5, 0, 2000}, tensors);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status()));
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("of membership epoch 0 to a shard in epoch 1"));
  auto version = client.Push(0, {0, 0, 0, 2, 0.5, 0, 2000}, tensors);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 1);
  auto next = client.Pull(0, 0, 1, 32);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->version, 1);
}

TEST(PsService, AnUnreachableShardIsNamed) {
  PsClient client({"127.0.0.1:1"}, "secret", std::chrono::seconds(2));
  auto pulled = client.Pull(0, 0, 0, 32);
  ASSERT_FALSE(pulled.ok());
  EXPECT_THAT(std::string(pulled.status().message()),
              HasSubstr("parameter server shard 0 (127.0.0.1:1) unreachable Pull"));
}

}  // namespace
}  // namespace hptrain::ps
