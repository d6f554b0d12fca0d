// The controller when things go wrong around it: killed in the middle of a Plan, two replicas
// behind one Lease, watches cut and their history compacted.
#include <string>
#include <vector>

#include "controller/kube/leader_election.h"
#include "gtest/gtest.h"
#include "tests/controller/manager/controller_fixture.h"

namespace hptrain::manager::testing {
namespace {

using hptrain::testing::Fault;

TEST_F(ControllerTest, ARestartedControllerFinishesAnInterruptedPlanWithoutDuplicates) {
  // Every pod create fails: the first controller stores the status, creates the Secret and the
  // Service, and dies (is stopped) with its Plan half done.
  Fault fault;
  fault.verb = "create";
  fault.resource = "pods";
  fault.times = -1;
  fault.code = 500;
  server_->InjectFault(fault);
  Controller* first = StartController();
  CreateJob(MlpJob("mlp"));
  ASSERT_TRUE(WaitFor([&] {
    return Owned("secrets", "mlp").size() == 1 && Owned("services", "mlp").size() == 1 &&
           server_->RequestCount("create", "pods") >= 2;
  }));
  EXPECT_TRUE(PodNames("mlp").empty());
  EXPECT_GT(first->metrics().reconcile_errors->Value(), 0);
  first->Stop();
  std::string token = Owned("secrets", "mlp")[0]["data"]["token"];

  server_->ClearFaults();
  StartController();
  ASSERT_TRUE(WaitFor([&] { return PodNames("mlp").size() == 3; }));
  SetPods("mlp", "Running");
  ASSERT_TRUE(WaitFor([&] { return Phase("mlp") == "Running"; })) << Status("mlp").dump();

  EXPECT_EQ(Owned("secrets", "mlp").size(), 1u);
  EXPECT_EQ(Owned("services", "mlp").size(), 1u);
  EXPECT_EQ(Owned("pods", "mlp").size(), 3u);
  // Each object was created once: the second controller picked up what the first had made.
  EXPECT_EQ(Succeeded("create", "secrets"), 1);
  EXPECT_EQ(Succeeded("create", "services"), 1);
  EXPECT_EQ(Succeeded("create", "pods"), 3);
  EXPECT_EQ(server_->RequestCount("delete", ""), 0);
  EXPECT_EQ(Owned("secrets", "mlp")[0]["data"]["token"], token);
  // The first controller stored the status with Created=True, so its event was due then.
  EXPECT_TRUE(WaitFor([&] { return Events("mlp", "Created").size() == 1; }));
}

TEST_F(ControllerTest, OnlyTheLeaderReconcilesAndAStandbyTakesOverAfterTheLeaseExpires) {
  AddUser("token-a", "controller-a");
  AddUser("token-b", "controller-b");
  kube::Client* client_a = KeptClient("token-a");
  kube::Client* client_b = KeptClient("token-b");
  auto options = [&](const std::string& identity) {
    ControllerOptions o = FastOptions();
    kube::LeaderElectionConfig election;
    election.lease_namespace = kControllerNs;  // where the leader-election Role grants it
    election.lease_name = "hptrain-controller";
    election.identity = identity;
    // Short enough for a quick takeover, long enough that a loaded machine (a parallel test
    // run) does not stall a renewal past the deadline and flip leadership mid-test.
    election.lease_duration = absl::Seconds(3);
    election.renew_deadline = absl::Seconds(2);
    election.retry_period = absl::Milliseconds(200);
    election.release_on_stop = false;  // a crash, not a clean shutdown
    o.leader_election = election;
    return o;
  };
  Controller* a = StartController(options("controller-a"), client_a);
  Controller* b = StartController(options("controller-b"), client_b);
  ASSERT_TRUE(WaitFor([&] { return a->IsLeader() || b->IsLeader(); }));
  Controller* leader = a->IsLeader() ? a : b;
  Controller* standby = leader == a ? b : a;
  std::string leader_user = leader == a ? "controller-a" : "controller-b";
  std::string standby_user = leader == a ? "controller-b" : "controller-a";
  EXPECT_FALSE(standby->IsLeader());
  EXPECT_EQ(leader->metrics().is_leader->Value(), 1);
  EXPECT_EQ(standby->metrics().is_leader->Value(), 0);

  CreateJob(MlpJob("mlp"));
  ASSERT_TRUE(WaitFor([&] { return PodNames("mlp").size() == 3 && Phase("mlp") == "Pending"; }));
  EXPECT_FALSE(standby->IsLeader());
  // The double logs a request after it answered it: wait for the log, not just the objects.
  EXPECT_TRUE(WaitFor([&] { return Succeeded("create", "pods", leader_user) == 3; }))
      << Succeeded("create", "pods", leader_user);
  EXPECT_EQ(Succeeded("create", "pods", standby_user), 0);
  EXPECT_EQ(Succeeded("update", "trainingjobs/status", standby_user), 0);
  EXPECT_GT(Succeeded("update", "trainingjobs/status", leader_user), 0);
  EXPECT_EQ(standby->reconciles(), 0);

  // The leader dies without releasing the lease: the standby waits for it to expire.
  leader->Stop();
  ASSERT_TRUE(WaitFor([&] { return standby->IsLeader(); }, absl::Seconds(20)));
  absl::StatusOr<Json> lease =
      server_->Get("leases.coordination.k8s.io", kControllerNs, "hptrain-controller");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], standby_user);
  EXPECT_EQ(standby->metrics().is_leader->Value(), 1);

  SetPods("mlp", "Running");
  ASSERT_TRUE(WaitFor([&] { return Phase("mlp") == "Running"; })) << Status("mlp").dump();
  EXPECT_TRUE(WaitFor([&] { return Succeeded("update", "trainingjobs/status", standby_user) > 0; }));
  EXPECT_EQ(Succeeded("create", "pods"), 3);
}

TEST_F(ControllerTest, AWatchCutWithCompactedHistoryRelistsAndMissesNothing) {
  Controller* controller = StartController();
  CreateJob(MlpJob("mlp"));
  ASSERT_TRUE(WaitFor([&] { return PodNames("mlp").size() == 3; }));
  SetPods("mlp", "Running");
  ASSERT_TRUE(WaitFor([&] { return Phase("mlp") == "Running"; }));
  int64_t lists_before = controller->caches().lists_started();

  // Pod watches cannot reconnect while the workers finish, and the history the informer would
  // resume from is gone by the time they can: only a relist shows the change.
  Fault no_pod_watch;
  no_pod_watch.verb = "watch";
  no_pod_watch.resource = "pods";
  no_pod_watch.times = -1;
  no_pod_watch.code = 500;
  server_->InjectFault(no_pod_watch);
  server_->CloseAllWatches();
  SetPods("mlp", "Succeeded", "worker");
  server_->CompactHistory();
  server_->ClearFaults();

  ASSERT_TRUE(WaitFor([&] { return Phase("mlp") == "Succeeded"; })) << Status("mlp").dump();
  EXPECT_GT(controller->caches().lists_started(), lists_before);
  EXPECT_TRUE(WaitFor([&] { return PodNames("mlp").size() == 2; }));  // the ps pod deleted
}

}  // namespace
}  // namespace hptrain::manager::testing
