// Garbage collection through ownerReferences in the API server double: Background, Foreground
// and Orphan propagation, dependents with several owners, and pod deletion as watchers see it.
#include <string>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/apiserver/test_objects.h"

namespace hptrain::testing {
namespace {

using ::testing::ElementsAre;

constexpr absl::Duration kWait = absl::Seconds(5);

uint64_t EventRv(const nlohmann::json& event) {
  uint64_t rv = 0;
  EXPECT_TRUE(absl::SimpleAtoi(event["object"]["metadata"].value("resourceVersion", ""), &rv));
  return rv;
}

class ApiServerGcTest : public ApiServerTest {
 protected:
  // A job "j" with two worker pods and a headless service it owns, plus an unrelated pod.
  void SetUpJob() {
    job_ = MustCreate(TjPath("ns"), TrainingJob("j", "ns"));
    for (const char* name : {"j-worker-0", "j-worker-1"}) {
      MustCreate(PodPath("ns"), Pod(name, "ns", {{"hptrain.io/job", "j"}}, job_));
    }
    MustCreate(PodPath("ns"), Pod("unrelated", "ns"));
    nlohmann::json service = {
        {"apiVersion", "v1"},
        {"kind", "Service"},
        {"metadata", {{"name", "j"}, {"ownerReferences", nlohmann::json::array({OwnerRef(job_)})}}},
        {"spec", {{"clusterIP", "None"}, {"ports", {{{"name", "coordinator"}, {"port", 29400}}}}}}};
    MustCreate("/api/v1/namespaces/ns/services", service);
  }
  bool Exists(const std::string& resource, const std::string& name) {
    return server_->Get(resource, "ns", name).ok();
  }

  nlohmann::json job_;
};

TEST_F(ApiServerGcTest, BackgroundDeletesOwnerThenDependents) {
  SetUpJob();
  WatchStream pods(port_, PodPath("ns") + "?watch=1&timeoutSeconds=5&resourceVersion=" +
                              std::to_string(server_->resource_version()));
  ASSERT_TRUE(WaitForWatches(*server_, "pods", 1));
  HttpResult deleted = client_->Delete(TjPath("ns", "j") + "?propagationPolicy=Background");
  ASSERT_EQ(deleted.status, 200) << deleted.text;
  EXPECT_EQ(deleted.body["kind"], "Status");
  EXPECT_EQ(deleted.body["status"], "Success");
  EXPECT_FALSE(Exists("trainingjobs", "j")) << "the owner goes at once";

  ASSERT_TRUE(server_->WaitForGarbageCollection(kWait));
  EXPECT_FALSE(Exists("pods", "j-worker-0"));
  EXPECT_FALSE(Exists("pods", "j-worker-1"));
  EXPECT_FALSE(Exists("services", "j"));
  EXPECT_TRUE(Exists("pods", "unrelated"));

  // Each pod: MODIFIED with deletionTimestamp, then DELETED (fixture 36).
  std::vector<nlohmann::json> events = pods.WaitForEvents(4, kWait);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_THAT(pods.types(), ElementsAre("MODIFIED", "DELETED", "MODIFIED", "DELETED"));
  for (const nlohmann::json& event : events) {
    EXPECT_TRUE(event["object"]["metadata"].contains("deletionTimestamp"));
    EXPECT_EQ(event["object"]["metadata"]["deletionGracePeriodSeconds"], 0);
  }
  EXPECT_EQ(EventRv(events[1]), EventRv(events[0]) + 1);
}

TEST_F(ApiServerGcTest, ForegroundKeepsOwnerUntilDependentsAreGone) {
  SetUpJob();
  WatchStream jobs(port_, TjPath("ns") + "?watch=1&timeoutSeconds=5&resourceVersion=" +
                              std::to_string(server_->resource_version()));
  WatchStream pods(port_, PodPath("ns") + "?watch=1&timeoutSeconds=5&resourceVersion=" +
                              std::to_string(server_->resource_version()));
  ASSERT_TRUE(WaitForWatches(*server_, "", 2));
  HttpResult deleting = client_->Delete(
      TjPath("ns", "j"),
      {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"propagationPolicy", "Foreground"}});
  ASSERT_EQ(deleting.status, 200) << deleting.text;
  // Fixture 37: the owner comes back with a deletionTimestamp and the foregroundDeletion finalizer.
  EXPECT_EQ(deleting.body["kind"], "TrainingJob");
  EXPECT_TRUE(deleting.body["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(deleting.body["metadata"]["finalizers"], nlohmann::json::array({"foregroundDeletion"}));
  EXPECT_EQ(deleting.body["metadata"]["generation"], 2);

  ASSERT_TRUE(server_->WaitForGarbageCollection(kWait));
  EXPECT_FALSE(Exists("trainingjobs", "j"));
  EXPECT_FALSE(Exists("pods", "j-worker-0"));
  EXPECT_FALSE(Exists("services", "j"));
  std::vector<nlohmann::json> job_events = jobs.WaitForEvents(2, kWait);
  ASSERT_EQ(job_events.size(), 2u);
  EXPECT_THAT(jobs.types(), ElementsAre("MODIFIED", "DELETED"));
  std::vector<nlohmann::json> pod_events = pods.WaitForEvents(4, kWait);
  ASSERT_EQ(pod_events.size(), 4u);
  for (const nlohmann::json& event : pod_events) {
    EXPECT_LT(EventRv(event), EventRv(job_events[1])) << "dependents go before the owner";
  }
}

TEST_F(ApiServerGcTest, OrphanKeepsDependentsWithoutTheReference) {
  SetUpJob();
  HttpResult deleting = client_->Delete(TjPath("ns", "j") + "?propagationPolicy=Orphan");
  ASSERT_EQ(deleting.status, 200) << deleting.text;
  EXPECT_EQ(deleting.body["metadata"]["finalizers"], nlohmann::json::array({"orphan"}));
  ASSERT_TRUE(server_->WaitForGarbageCollection(kWait));
  EXPECT_FALSE(Exists("trainingjobs", "j"));
  for (const char* name : {"j-worker-0", "j-worker-1"}) {
    absl::StatusOr<nlohmann::json> pod = server_->Get("pods", "ns", name);
    ASSERT_TRUE(pod.ok()) << name;
    EXPECT_FALSE((*pod)["metadata"].contains("ownerReferences"));
  }
  EXPECT_TRUE(Exists("services", "j"));
}

TEST_F(ApiServerGcTest, DependentWithAnotherLiveOwnerSurvives) {
  nlohmann::json a = MustCreate(TjPath("ns"), TrainingJob("a", "ns"));
  nlohmann::json b = MustCreate(TjPath("ns"), TrainingJob("b", "ns"));
  nlohmann::json pod = Pod("shared", "ns", {}, a);
  pod["metadata"]["ownerReferences"].push_back(OwnerRef(b));
  pod["metadata"]["ownerReferences"][1]["controller"] = false;
  MustCreate(PodPath("ns"), pod);
  ASSERT_EQ(client_->Delete(TjPath("ns", "a")).status, 200);
  ASSERT_TRUE(server_->WaitForGarbageCollection(kWait));
  absl::StatusOr<nlohmann::json> kept = server_->Get("pods", "ns", "shared");
  ASSERT_TRUE(kept.ok());
  ASSERT_EQ((*kept)["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ((*kept)["metadata"]["ownerReferences"][0]["name"], "b");
  ASSERT_EQ(client_->Delete(TjPath("ns", "b")).status, 200);
  ASSERT_TRUE(server_->WaitForGarbageCollection(kWait));
  EXPECT_FALSE(Exists("pods", "shared"));
}

TEST_F(ApiServerGcTest, DirectPodDeleteReturnsThePodAndIsSeenAsModifiedThenDeleted) {
  MustCreate(PodPath("ns"), Pod("p", "ns"));
  WatchStream pods(port_, PodPath("ns") + "?watch=1&timeoutSeconds=5&resourceVersion=" +
                              std::to_string(server_->resource_version()));
  ASSERT_TRUE(WaitForWatches(*server_, "pods", 1));
  HttpResult deleted = client_->Delete(PodPath("ns", "p"));
  ASSERT_EQ(deleted.status, 200);
  EXPECT_EQ(deleted.body["kind"], "Pod");
  EXPECT_TRUE(deleted.body["metadata"].contains("deletionTimestamp"));
  ASSERT_EQ(pods.WaitForEvents(2, kWait).size(), 2u);
  EXPECT_THAT(pods.types(), ElementsAre("MODIFIED", "DELETED"));
}

}  // namespace
}  // namespace hptrain::testing
