// The controller's gRPC client of an elastic job's coordinator (membership_client.h): against the
// runtime's own CoordinatorService in process it reads the job status with the job token and is
// refused without it; an unreachable coordinator is an error that names the call; the
// conversions between the proto and the reconciler's view.
#include "controller/manager/membership_client.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/ps/coordinator_server.h"
#include "runtime/ps/coordinator_service.h"

namespace hptrain::manager {
namespace {

const nlohmann::json kJob = {{"metadata", {{"name", "mlp"}, {"namespace", "team-a"}}}};

TEST(MembershipClientTest, ReadsTheCoordinatorWithTheJobToken) {
  ps::CoordinatorConfig config;
  config.job = "mlp";
  config.strategy = "ssgd";
  config.token = "secret-token";
  config.groups = std::vector<std::string>(2, "workers");
  config.allocation = {32, 32};
  config.global_batch = 64;
  absl::StatusOr<std::unique_ptr<ps::CoordinatorServer>> server = ps::CoordinatorServer::Start(
      "127.0.0.1", 0, std::make_unique<ps::CoordinatorService>(config));
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("127.0.0.1:", (*server)->port());
  std::unique_ptr<MembershipClient> client =
      NewGrpcMembershipClient([&](const nlohmann::json&) { return address; }, absl::Seconds(5));

  absl::StatusOr<reconcile::CoordinatorMembership> read = client->Read(kJob, "secret-token");
  EXPECT_TRUE(read.ok()) << read.status();
  absl::StatusOr<reconcile::CoordinatorMembership> refused = client->Read(kJob, "other-token");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "GetJobStatus"))
      << refused.status();
  (*server)->Stop();
}

TEST(MembershipClientTest, AnUnreachableCoordinatorIsAnErrorNamingTheCall) {
  std::unique_ptr<MembershipClient> client = NewGrpcMembershipClient(
      [](const nlohmann::json&) { return std::string("127.0.0.1:1"); }, absl::Seconds(2));
  EXPECT_FALSE(client->Read(kJob, "t").ok());
  absl::Status change = client->Change(
      kJob, "t", {reconcile::MembershipRequest::Kind::kRemove, 3, "scaled down"});
  ASSERT_FALSE(change.ok());
  EXPECT_TRUE(absl::StrContains(change.message(), "ChangeMembership REMOVE slot 3")) << change;
}

TEST(MembershipClientTest, ConvertsTheProto) {
  v1::JobStatus status;
  status.set_membership_epoch(3);
  for (int slot : {0, 1, 3}) status.add_members(slot);
  v1::MembershipChange* change = status.add_membership_changes();
  change->set_epoch(3);
  change->set_reason("lost");
  change->add_slots(2);
  change->set_detail("exit 137");
  reconcile::CoordinatorMembership membership = MembershipOf(status);
  EXPECT_EQ(membership.epoch, 3);
  EXPECT_EQ(membership.members, (std::vector<int>{0, 1, 3}));
  ASSERT_EQ(membership.changes.size(), 1u);
  EXPECT_EQ(membership.changes[0].reason, "lost");
  EXPECT_EQ(membership.changes[0].slots, std::vector<int>{2});
  EXPECT_EQ(membership.changes[0].detail, "exit 137");
  EXPECT_TRUE(membership.IsMember(3));
  EXPECT_FALSE(membership.IsMember(2));

  v1::MembershipChangeRequest request =
      ChangeRequestOf({reconcile::MembershipRequest::Kind::kLost, 2, "pod failed"});
  EXPECT_EQ(request.kind(), v1::MembershipChangeRequest::LOST);
  EXPECT_EQ(request.slot(), 2);
  EXPECT_EQ(request.reason(), "pod failed");
}

}  // namespace
}  // namespace hptrain::manager
