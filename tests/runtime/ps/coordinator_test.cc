#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/gloo/gloo_transport.h"
#include "runtime/ps/coordinator_client.h"
#include "runtime/ps/coordinator_server.h"

namespace hptrain::ps {
namespace {

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorConfig config;
    config.job = "test";
    config.strategy = "ssgd";
    config.token = "secret";
    config.groups = {"a", "a", "b"};
    config.allocation = {4, 4, 8};
    config.global_batch = 16;
    auto service = std::make_unique<CoordinatorService>(config);
    service->set_on_rejected([this](const std::string& reason) {
      if (reason == "missing_token") ++missing_;
      if (reason == "bad_token") ++bad_;
    });
    auto server = CoordinatorServer::Start("127.0.0.1", 0, std::move(service));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = "127.0.0.1:" + std::to_string(server_->port());
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::string address_;
  std::atomic<int> missing_{0};
  std::atomic<int> bad_{0};
};

TEST_F(CoordinatorTest, RefusesCallsWithoutTheJobToken) {
  CoordinatorClient wrong(address_, "not-the-token");
  absl::Status status = wrong.Set("k", "v");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(status.message().find("job token does not match"), std::string::npos) << status;
  EXPECT_EQ(bad_.load(), 1);

  CoordinatorClient empty(address_, "");
  EXPECT_EQ(empty.GetJobStatus().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(bad_.load(), 2);  // an empty bearer token is a wrong token, not a missing one

  // A raw stub that sends no metadata at all.
  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  auto stub = hptrain::v1::Coordinator::NewStub(channel);
  grpc::ClientContext context;
  hptrain::v1::SetAllocationRequest request;
  hptrain::v1::Allocation response;
  grpc::Status raw = stub->SetAllocation(&context, request, &response);
  EXPECT_EQ(raw.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(missing_.load(), 1);
}

TEST_F(CoordinatorTest, KeyValueGetWaitsForTheKeyAndTimesOut) {
  CoordinatorClient client(address_, "secret");
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(client.Set("late", "value").ok());
  });
  auto value = client.Get("late", std::chrono::seconds(5));
  writer.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "value");

  auto missing = client.Get("never", std::chrono::milliseconds(200));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(missing.status().message().find("\"never\""), std::string::npos);
  EXPECT_EQ(client.Wait({"late", "never"}, std::chrono::milliseconds(200)).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(CoordinatorTest, AllocationIsValidatedAndGenerationAdvances) {
  CoordinatorClient client(address_, "secret");
  auto initial = client.GetAllocation();
  ASSERT_TRUE(initial.ok());
  EXPECT_EQ(initial->generation(), 1);
  EXPECT_EQ(initial->batch_sizes_size(), 3);

  EXPECT_EQ(client.SetAllocation({4, 4}, 1).status().code(), absl::StatusCode::kInvalidArgument);
  auto wrong_sum = client.SetAllocation({4, 4, 4}, 1);
  EXPECT_NE(wrong_sum.status().message().find("sums to 12, the global batch is 16"),
            std::string::npos);
  EXPECT_EQ(client.SetAllocation({0, 8, 8}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);

  hptrain::v1::ProgressReport progress;
  progress.set_rank(1);
  progress.set_step(41);
  ASSERT_TRUE(client.ReportProgress(progress).ok());
  auto next = client.SetAllocation({2, 6, 8}, 2);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->generation(), 2);
  EXPECT_EQ(next->effective_step(), 43);
}

// Workers that ask the allocation for each step switch at the same step boundary: a change
// takes effect only after every step anybody has asked for, and a step asked for again gets the
// same answer.
TEST_F(CoordinatorTest, AllocationAtStepNeverChangesAStepAlreadyAsked) {
  CoordinatorClient client(address_, "secret");
  auto sizes = [&](int64_t step) {
    auto a = client.GetAllocation(step);
    EXPECT_TRUE(a.ok()) << a.status();
    return std::vector<int>(a->batch_sizes().begin(), a->batch_sizes().end());
  };
  const std::vector<int> initial = sizes(0);
  EXPECT_EQ(sizes(10), initial);  // worker 0 is about to run step 10
  auto first = client.SetAllocation({2, 6, 8}, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->effective_step(), 11);
  EXPECT_EQ(sizes(9), initial);   // a slower worker still at step 9
  EXPECT_EQ(sizes(10), initial);  // step 10 was promised the old allocation
  EXPECT_EQ(sizes(11), (std::vector<int>{2, 6, 8}));
  // Two changes before either takes effect: they apply in order, each after the steps asked.
  auto second = client.SetAllocation({8, 6, 2}, 1);
  auto third = client.SetAllocation({6, 6, 4}, 1);
  ASSERT_TRUE(second.ok() && third.ok());
  EXPECT_EQ(second->effective_step(), 12);
  EXPECT_EQ(third->effective_step(), 13);
  EXPECT_EQ(sizes(11), (std::vector<int>{2, 6, 8}));
  EXPECT_EQ(sizes(12), (std::vector<int>{8, 6, 2}));
  EXPECT_EQ(sizes(13), (std::vector<int>{6, 6, 4}));
  EXPECT_EQ(client.GetAllocation()->generation(), 4);  // the newest, without a step
}

TEST_F(CoordinatorTest, MembershipProgressAndDone) {
  CoordinatorClient client(address_, "secret");
  hptrain::v1::RegisterRequest request;
  request.set_rank(2);
  request.set_group("a");
  EXPECT_EQ(client.Register(request).status().code(), absl::StatusCode::kInvalidArgument);
  request.set_group("b");
  request.set_metrics_address("127.0.0.1:9999");
  auto registered = client.Register(request);
  ASSERT_TRUE(registered.ok());
  EXPECT_EQ(registered->world_size(), 3);

  ASSERT_TRUE(client.ReportDone(0, true, "").ok());
  ASSERT_TRUE(client.ReportDone(1, false, "out of memory").ok());
  auto heartbeat = client.Heartbeat(2);
  ASSERT_TRUE(heartbeat.ok());
  EXPECT_TRUE(heartbeat->stop());
  EXPECT_EQ(heartbeat->stop_reason(), "rank 1 failed: out of memory");
  auto status = client.GetJobStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->done(), 1);
  EXPECT_EQ(status->failed(), 1);
  EXPECT_EQ(status->metrics_addresses(2), "127.0.0.1:9999");
  // Who has joined: rank 2 only (done reports are not registrations).
  EXPECT_EQ(status->registered(), 1);
  ASSERT_EQ(status->registered_ranks_size(), 1);
  EXPECT_EQ(status->registered_ranks(0), 2);
  request.set_rank(0);
  request.set_group("a");
  request.clear_metrics_address();  // registering without a metrics endpoint still counts
  ASSERT_TRUE(client.Register(request).ok());
  status = client.GetJobStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(std::vector<int>(status->registered_ranks().begin(), status->registered_ranks().end()),
            std::vector<int>({0, 2}));
}

TEST_F(CoordinatorTest, GlooRendezvousRunsThroughTheCoordinator) {
  const int size = 3;
  std::vector<float> results(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      CoordinatorClient client(address_, "secret");
      comm::GlooOptions options;
      options.timeout = std::chrono::seconds(20);
      auto transport = comm::GlooTransport::Connect(client, r, size, options);
      ASSERT_TRUE(transport.ok()) << transport.status();
      comm::TransportCommunicator comm(std::move(*transport));
      float x = static_cast<float>(r + 1);
      ASSERT_TRUE(comm.AllReduceSum(&x, 1).ok());
      results[r] = x;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(results, (std::vector<float>{6, 6, 6}));
}

TEST(CoordinatorServerTest, PortInUseIsReported) {
  CoordinatorConfig config;
  config.groups = {"a"};
  auto first = CoordinatorServer::Start("127.0.0.1", 0, std::make_unique<CoordinatorService>(config));
  ASSERT_TRUE(first.ok());
  int port = (*first)->port();
  auto second =
      CoordinatorServer::Start("127.0.0.1", port, std::make_unique<CoordinatorService>(config));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("already in use"), std::string::npos);
}

}  // namespace
}  // namespace hptrain::ps
