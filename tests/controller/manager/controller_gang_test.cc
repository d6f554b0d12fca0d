// spec.gangScheduling on the API server double, under the controller's RBAC: the PodGroup of
// each provider is created with the right minMember, owned by the job and deleted with it; its
// phase shows in status; where the provider's CRD is missing, the job says so and waits, and
// proceeds once the CRD is installed.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/controller/apiserver/resource_type.h"
#include "tests/controller/manager/controller_fixture.h"

namespace hptrain::manager::testing {
namespace {

constexpr char kVolcano[] = "podgroups.scheduling.volcano.sh";
constexpr char kSchedulerPlugins[] = "podgroups.scheduling.x-k8s.io";

class GangSchedulingTest : public ControllerTest {
 protected:
  void ServePodGroups() {
    server_->ServeResource(hptrain::testing::VolcanoPodGroupResource());
    server_->ServeResource(hptrain::testing::SchedulerPluginsPodGroupResource());
  }
  Json PodGroup(const std::string& resource, const std::string& name) const {
    absl::StatusOr<Json> group = server_->Get(resource, kNs, name);
    return group.ok() ? *group : Json();
  }
};

Json GangJob(const std::string& name, const std::string& provider, int replicas = 2) {
  Json job = MlpJob(name, replicas);
  job["spec"]["gangScheduling"] = {{"enabled", true}, {"provider", provider}};
  return job;
}

TEST_F(GangSchedulingTest, VolcanoPodGroupIsOwnedByTheJobAndShowsItsPhase) {
  ServePodGroups();
  StartController();
  Json job = GangJob("mlp", "volcano", 3);
  job["spec"]["gangScheduling"]["queue"] = "research";
  const Json created = CreateJob(job);
  ASSERT_TRUE(WaitFor([&] { return PodNames("mlp").size() == 4; })) << Status("mlp").dump();

  const Json group = PodGroup(kVolcano, "mlp");
  ASSERT_FALSE(group.is_null());
  EXPECT_EQ(group["spec"]["minMember"], 4);  // the ps and 3 workers
  EXPECT_EQ(group["spec"]["queue"], "research");
  ASSERT_EQ(group["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(group["metadata"]["ownerReferences"][0]["uid"], created["metadata"]["uid"]);
  EXPECT_EQ(group["metadata"]["ownerReferences"][0]["controller"], true);
  for (const Json& pod : Owned("pods", "mlp")) {
    EXPECT_EQ(pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"], "mlp");
    EXPECT_EQ(pod["spec"]["schedulerName"], "volcano");
  }

  // The scheduler admits the gang.
  ASSERT_TRUE(server_
                  ->Mutate(kVolcano, kNs, "mlp",
                           [](Json* g) { (*g)["status"] = {{"phase", "Inqueue"}}; })
                  .ok());
  EXPECT_TRUE(WaitFor([&] { return Status("mlp").value("podGroupPhase", "") == "Inqueue"; }))
      << Status("mlp").dump();
  EXPECT_EQ(Succeeded("create", "podgroups"), 1);

  // Deleting the job deletes its PodGroup (garbage collection of owned objects).
  ASSERT_TRUE(server_->Delete("trainingjobs.hptrain.io", kNs, "mlp").ok());
  ASSERT_TRUE(server_->WaitForGarbageCollection(absl::Seconds(10)));
  EXPECT_TRUE(WaitFor([&] { return PodGroup(kVolcano, "mlp").is_null(); }));
}

TEST_F(GangSchedulingTest, SchedulerPluginsPodGroupCountsEveryPsShard) {
  ServePodGroups();
  StartController();
  Json job = GangJob("mlp", "scheduler-plugins", 2);
  job["spec"]["strategy"] = {{"type", "hps"}};
  job["spec"]["ps"] = {{"shards", 2}};
  CreateJob(job);
  ASSERT_TRUE(WaitFor([&] { return PodNames("mlp").size() == 4; })) << Status("mlp").dump();
  const Json group = PodGroup(kSchedulerPlugins, "mlp");
  ASSERT_FALSE(group.is_null());
  EXPECT_EQ(group["spec"]["minMember"], 4);  // 2 ps shards and 2 workers
  EXPECT_TRUE(PodGroup(kVolcano, "mlp").is_null());
  for (const Json& pod : Owned("pods", "mlp")) {
    EXPECT_EQ(pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"], "mlp");
  }

  // Scaled to 3 workers: a PodGroup for the new gang, minMember 5.
  PatchSpec("mlp", {{"workers", {{"replicas", 3}}}});
  EXPECT_TRUE(WaitFor([&] {
    const Json g = PodGroup(kSchedulerPlugins, "mlp");
    return !g.is_null() && g["spec"]["minMember"] == 5 && PodNames("mlp").size() == 5;
  })) << PodGroup(kSchedulerPlugins, "mlp").dump();
}

TEST_F(GangSchedulingTest, WithoutTheProvidersCrdTheJobSaysSoAndWaitsForIt) {
  StartController();  // no PodGroup kind served: the informers count as synced, empty
  CreateJob(GangJob("mlp", "volcano"));
  ASSERT_TRUE(WaitFor([&] { return !Events("mlp", "PodGroupUnavailable").empty(); }));
  const std::string message = Events("mlp", "PodGroupUnavailable")[0].value("message", "");
  EXPECT_NE(message.find("podgroups.scheduling.volcano.sh is not installed"), std::string::npos)
      << message;
  EXPECT_TRUE(PodNames("mlp").empty()) << "no pod may wait for a scheduler that is not there";

  ServePodGroups();  // Volcano installed
  EXPECT_TRUE(WaitFor([&] {
    return !PodGroup(kVolcano, "mlp").is_null() && PodNames("mlp").size() == 3;
  })) << Status("mlp").dump();
}

}  // namespace
}  // namespace hptrain::manager::testing
