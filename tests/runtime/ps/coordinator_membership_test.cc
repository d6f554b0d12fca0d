// The coordinator's membership epochs for elastic jobs (docs/elastic.md): joins, removals and
// losses become allocations over the new members at the right steps.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/ps/coordinator_client.h"
#include "runtime/ps/coordinator_server.h"

namespace hptrain::ps {
namespace {

namespace v1 = hptrain::v1;

std::vector<int> Members(const v1::Allocation& a) {
  return std::vector<int>(a.members().begin(), a.members().end());
}
std::vector<int> Batches(const v1::Allocation& a) {
  return std::vector<int>(a.batch_sizes().begin(), a.batch_sizes().end());
}

class MembershipTest : public ::testing::Test {
 protected:
  void Start(bool elastic, std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(30)) {
    CoordinatorConfig config;
    config.job = "test";
    config.strategy = "ssgd";
    config.token = "secret";
    config.groups = {"w", "w", "w", "w", "w", "w"};  // 6 slots
    config.allocation = {16, 16, 16, 16};
    config.global_batch = 64;
    config.elastic = elastic;
    config.initial_members = 4;
    config.heartbeat_timeout = heartbeat_timeout;
    auto server = CoordinatorServer::Start("127.0.0.1", 0,
                                           std::make_unique<CoordinatorService>(config));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<CoordinatorClient>(
        "127.0.0.1:" + std::to_string(server_->port()), "secret");
  }

  absl::StatusOr<v1::RegisterResponse> Register(int slot) {
    v1::RegisterRequest request;
    request.set_rank(slot);
    request.set_group("w");
    return client_->Register(request);
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<CoordinatorClient> client_;
};

TEST_F(MembershipTest, StartsWithTheInitialSlotsAsEpochZero) {
  Start(true);
  for (int slot = 0; slot < 4; ++slot) {
    auto registered = Register(slot);
    ASSERT_TRUE(registered.ok()) << registered.status();
    EXPECT_FALSE(registered->joining());
    EXPECT_EQ(registered->world_size(), 4);
  }
  auto allocation = client_->GetAllocation(0);
  ASSERT_TRUE(allocation.ok());
  EXPECT_EQ(allocation->membership_epoch(), 0);
  EXPECT_EQ(Members(*allocation), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(allocation->membership_reason(), "start");
}

TEST_F(MembershipTest, AJoinTakesEffectAfterEveryStepAlreadyAsked) {
  Start(true);
  for (int slot = 0; slot < 4; ++slot) ASSERT_TRUE(Register(slot).ok());
  ASSERT_TRUE(client_->GetAllocation(9).ok());  // a worker asked for step 9
  auto joined = Register(4);
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_TRUE(joined->joining());
  EXPECT_EQ(joined->allocation().membership_epoch(), 1);
  EXPECT_EQ(joined->allocation().effective_step(), 10);
  EXPECT_EQ(Members(joined->allocation()), (std::vector<int>{0, 1, 2, 3, 4}));
  // B = 64 over 5 members, the extra samples to the lower ranks.
  EXPECT_EQ(Batches(joined->allocation()), (std::vector<int>{13, 13, 13, 13, 12}));
  auto at9 = client_->GetAllocation(9);
  auto at10 = client_->GetAllocation(10);
  ASSERT_TRUE(at9.ok() && at10.ok());
  EXPECT_EQ(at9->membership_epoch(), 0);
  EXPECT_EQ(at10->membership_epoch(), 1);
  EXPECT_EQ(at10->membership_reason(), "joined");
  auto status = client_->GetJobStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->membership_epoch(), 1);
  EXPECT_EQ(status->world_size(), 5);
  ASSERT_EQ(status->membership_changes_size(), 1);
  EXPECT_EQ(status->membership_changes(0).reason(), "joined");
  EXPECT_EQ(status->membership_changes(0).slots(0), 4);
  EXPECT_EQ(status->membership_changes(0).effective_step(), 10);
}

TEST_F(MembershipTest, ARemovalWaitsForItsStepAndKeepsTheOrder) {
  Start(true);
  for (int slot = 0; slot < 4; ++slot) ASSERT_TRUE(Register(slot).ok());
  ASSERT_TRUE(client_->GetAllocation(3).ok());
  auto removed = client_->ChangeMembership(v1::MembershipChangeRequest::REMOVE, 1, "test", 20);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->effective_step(), 20);
  EXPECT_EQ(Members(*removed), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(Batches(*removed), (std::vector<int>{22, 21, 21}));
  EXPECT_EQ(client_->GetAllocation(19)->membership_epoch(), 0);
  EXPECT_EQ(client_->GetAllocation(20)->membership_epoch(), 1);
  // The removed slot reporting done does not hold the job up, nor count as a member's success.
  ASSERT_TRUE(client_->ReportDone(1, true, "left").ok());
  auto status = client_->GetJobStatus();
  EXPECT_EQ(status->done(), 0);
  for (int slot : {0, 2, 3}) ASSERT_TRUE(client_->ReportDone(slot, true, "").ok());
  EXPECT_TRUE(server_->service().WaitUntilFinished(std::chrono::milliseconds(100)));
}

TEST_F(MembershipTest, AMemberRemovedBeforeItRegisteredStillStartsWithTheOthers) {
  Start(true);
  for (int slot = 0; slot < 3; ++slot) ASSERT_TRUE(Register(slot).ok());
  ASSERT_TRUE(client_->ChangeMembership(v1::MembershipChangeRequest::REMOVE, 3, "t", 50).ok());
  auto late = Register(3);  // slow to start: it forms epoch 0 with the others, then leaves
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->joining());
  EXPECT_EQ(client_->GetAllocation(49)->membership_epoch(), 0);
  EXPECT_EQ(Members(*client_->GetAllocation(50)), (std::vector<int>{0, 1, 2}));
}

TEST_F(MembershipTest, ALossIsInForceAtOnceAndSupersedesPlannedEpochs) {
  Start(true);
  for (int slot = 0; slot < 4; ++slot) ASSERT_TRUE(Register(slot).ok());
  ASSERT_TRUE(client_->GetAllocation(5).ok());
  ASSERT_TRUE(Register(4).ok());  // a join planned for step 6
  auto lost = client_->ChangeMembership(v1::MembershipChangeRequest::LOST, 2, "exit 137");
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(lost->membership_epoch(), 2);
  EXPECT_EQ(lost->membership_reason(), "lost");
  // The joiner stays a member; the survivors keep their order; every step is the new epoch's.
  EXPECT_EQ(Members(*lost), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(client_->GetAllocation(3)->membership_epoch(), 2);
  EXPECT_EQ(client_->GetAllocation(6)->membership_epoch(), 2);
  // A worker that still trains in epoch 0 learns from its heartbeat that a member was lost.
  auto beat = client_->Heartbeat(0, 0);
  ASSERT_TRUE(beat.ok());
  EXPECT_TRUE(beat->membership_lost());
  EXPECT_EQ(beat->membership_epoch(), 2);
  EXPECT_EQ(beat->lost_epoch(), 2);
  EXPECT_FALSE(client_->Heartbeat(0, 2)->membership_lost());
  // A loss reported twice changes nothing.
  auto again = client_->ChangeMembership(v1::MembershipChangeRequest::LOST, 2, "again");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->membership_epoch(), 2);
  // A join after the loss is not a loss: a worker in epoch 2 goes on.
  ASSERT_TRUE(Register(5).ok());
  auto later = client_->Heartbeat(0, 2);
  EXPECT_EQ(later->membership_epoch(), 3);
  EXPECT_EQ(later->lost_epoch(), 2);
  EXPECT_FALSE(later->membership_lost());
}

TEST_F(MembershipTest, AFailedMemberIsLostNotAReasonToStop) {
  Start(true);
  for (int slot = 0; slot < 4; ++slot) ASSERT_TRUE(Register(slot).ok());
  ASSERT_TRUE(client_->ReportDone(3, false, "peer vanished").ok());
  auto beat = client_->Heartbeat(0, 0);
  ASSERT_TRUE(beat.ok());
  EXPECT_FALSE(beat->stop());
  EXPECT_TRUE(beat->membership_lost());
  EXPECT_EQ(Members(*client_->GetAllocation()), (std::vector<int>{0, 1, 2}));
  // It comes back: registering again makes it a joiner, appended after the survivors.
  auto back = Register(3);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->joining());
  EXPECT_EQ(Members(back->allocation()), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(back->allocation().membership_epoch(), 2);
}

TEST_F(MembershipTest, ARestartedMemberIsLostThenJoins) {
  Start(true);
  for (int slot = 0; slot < 4; ++slot) ASSERT_TRUE(Register(slot).ok());
  auto again = Register(1);  // its process was replaced before anybody reported the loss
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->joining());
  EXPECT_EQ(Members(again->allocation()), (std::vector<int>{0, 2, 3, 1}));
  auto status = client_->GetJobStatus();
  ASSERT_EQ(status->membership_changes_size(), 2);
  EXPECT_EQ(status->membership_changes(0).reason(), "lost");
  EXPECT_EQ(status->membership_changes(1).reason(), "joined");
}

TEST_F(MembershipTest, SilentMembersAreLost) {
  Start(true, std::chrono::milliseconds(300));
  for (int slot = 0; slot < 4; ++slot) ASSERT_TRUE(Register(slot).ok());
  // Slots 0..2 keep beating, slot 3 stays silent.
  for (int i = 0; i < 6; ++i) {
    for (int slot = 0; slot < 3; ++slot) ASSERT_TRUE(client_->Heartbeat(slot, 0).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server_->service().ExpireSilentMembers();
  }
  auto status = client_->GetJobStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(std::vector<int>(status->members().begin(), status->members().end()),
            (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(status->membership_changes_size(), 1);
  EXPECT_EQ(status->membership_changes(0).reason(), "lost");
  EXPECT_NE(status->membership_changes(0).detail().find("no heartbeat"), std::string::npos);
}

TEST_F(MembershipTest, StaticJobsRefuseMembershipChangesAndKeepTheirRanks) {
  Start(false);
  auto change = client_->ChangeMembership(v1::MembershipChangeRequest::REMOVE, 1, "test");
  EXPECT_EQ(change.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(change.status().message().find("spec.elastic"), std::string::npos);
  ASSERT_TRUE(Register(1).ok());
  auto again = Register(1);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->joining());
  // A failure stops the job as before.
  ASSERT_TRUE(client_->ReportDone(1, false, "boom").ok());
  EXPECT_TRUE(client_->Heartbeat(0, 0)->stop());
}

TEST_F(MembershipTest, TheLastMemberCannotBeRemoved) {
  Start(true);
  for (int slot : {1, 2, 3}) {
    ASSERT_TRUE(client_->ChangeMembership(v1::MembershipChangeRequest::LOST, slot, "t").ok());
  }
  auto last = client_->ChangeMembership(v1::MembershipChangeRequest::REMOVE, 0, "t");
  EXPECT_EQ(last.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client_->ChangeMembership(v1::MembershipChangeRequest::REMOVE, 9, "t").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hptrain::ps
