// Small helpers of the reconciler: timestamps, metadata access, ownership, failure summaries,
// device strings, Plan utilities.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller/reconcile/kube_time.h"
#include "controller/reconcile/labels.h"
#include "controller/reconcile/object_meta.h"
#include "controller/reconcile/observed_objects.h"
#include "controller/reconcile/plan.h"
#include "controller/reconcile/worker_status.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(KubeTimeTest, FormatsUtcWholeSeconds) {
  absl::Time t = absl::FromUnixSeconds(1800000000) + absl::Milliseconds(999);
  EXPECT_EQ(FormatKubeTime(t), "2027-01-15T08:00:00Z");
  EXPECT_EQ(ParseKubeTime("2027-01-15T08:00:00Z"), absl::FromUnixSeconds(1800000000));
  EXPECT_EQ(ParseKubeTime("2027-01-15T09:00:00+01:00"), absl::FromUnixSeconds(1800000000));
  EXPECT_EQ(ParseKubeTime("2027-01-15T08:00:00.5Z"),
            absl::FromUnixSeconds(1800000000) + absl::Milliseconds(500));
  EXPECT_EQ(ParseKubeTime("yesterday"), std::nullopt);
  EXPECT_EQ(ParseKubeTime(""), std::nullopt);
}

TEST(ObjectMetaTest, NeverThrowsOnOddShapes) {
  Json pod = Json::parse(R"({"metadata": {"name": 5, "labels": "x", "generation": 3.0,
                                          "annotations": {"a": "b"}}})");
  EXPECT_EQ(Name(pod), "");
  EXPECT_EQ(Label(pod, "x"), "");
  EXPECT_EQ(Annotation(pod, "a"), "b");
  EXPECT_EQ(Generation(pod), 3);
  EXPECT_EQ(IntAt(pod, {"metadata", "name", "deeper"}, -7), -7);
  EXPECT_EQ(Find(Json(), {"a"}), nullptr);
  EXPECT_FALSE(IsTerminating(pod));
  pod["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z";
  EXPECT_TRUE(IsTerminating(pod));
  EXPECT_EQ(DumpJson(Json("\xff")), "\"\xEF\xBF\xBD\"");
}

TEST(LabelsTest, NamesAndSelectors) {
  EXPECT_EQ(PsPodName("j"), "j-ps-0");
  EXPECT_EQ(WorkerPodName("j", 12), "j-worker-12");
  EXPECT_EQ(ServiceName("j"), "j");
  EXPECT_EQ(SecretName("j"), "j-hptrain");
  EXPECT_EQ(JobSelector("j"), "hptrain.io/job=j");
  EXPECT_EQ(WorkerSelector("j"), "hptrain.io/job=j,hptrain.io/role=worker");
}

TEST(LabelsTest, ControlledByUidNotJustName) {
  Json job = testing::ShorthandJob(2);
  Json pod = {{"metadata",
               {{"name", "mlp-ps-0"},
                {"ownerReferences", Json::array({OwnerReference("mlp", testing::kJobUid)})}}}};
  EXPECT_TRUE(IsControlledBy(pod, job));
  // The same name under another uid: an earlier job of that name.
  pod["metadata"]["ownerReferences"][0]["uid"] = "old-uid";
  EXPECT_FALSE(IsControlledBy(pod, job));
  // Not a controller reference.
  pod["metadata"]["ownerReferences"][0]["uid"] = testing::kJobUid;
  pod["metadata"]["ownerReferences"][0]["controller"] = false;
  EXPECT_FALSE(IsControlledBy(pod, job));
  // Another kind.
  pod["metadata"]["ownerReferences"][0]["controller"] = true;
  pod["metadata"]["ownerReferences"][0]["kind"] = "Job";
  EXPECT_FALSE(IsControlledBy(pod, job));
  EXPECT_FALSE(IsControlledBy(Json::object(), job));
  // A job without a uid (never the case on a cluster) matches by name.
  Json no_uid = job;
  no_uid["metadata"].erase("uid");
  pod["metadata"]["ownerReferences"][0]["kind"] = "TrainingJob";
  EXPECT_TRUE(IsControlledBy(pod, no_uid));
}

TEST(ObservedObjectsTest, SortsKeepsForeignNamesAndReadsAnnotations) {
  Json job = testing::ShorthandJob(2);
  Json owned = {
      {"metadata",
       {{"name", "mlp-worker-1"},
        {"uid", "u1"},
        {"labels", {{"hptrain.io/role", "worker"}, {"hptrain.io/rank", "1"}}},
        {"annotations", {{"hptrain.io/restart-generation", "3"}, {"hptrain.io/spec-hash", "abc"}}},
        {"ownerReferences", Json::array({OwnerReference("mlp", testing::kJobUid)})}}},
      {"spec", {{"nodeName", "n1"}}},
      {"status",
       {{"phase", "Running"},
        {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  Json bad = owned;
  bad["metadata"]["name"] = "mlp-worker-0";
  bad["metadata"]["annotations"]["hptrain.io/restart-generation"] = "-2";
  bad["metadata"]["labels"]["hptrain.io/rank"] = "x";
  Json foreign = {{"metadata", {{"name", "mlp-ps-0"}}}};
  std::vector<Json> pods = {owned, foreign, bad};
  ObservedPods seen = ObservePods(pods, job);
  ASSERT_EQ(seen.owned.size(), 2u);
  EXPECT_EQ(seen.owned[0].name, "mlp-worker-0");
  EXPECT_EQ(seen.owned[0].restart_generation, -1);
  EXPECT_EQ(seen.owned[0].rank, -1);
  const PodView* w1 = seen.Owned("mlp-worker-1");
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(w1->restart_generation, 3);
  EXPECT_EQ(w1->spec_hash, "abc");
  EXPECT_EQ(w1->rank, 1);
  EXPECT_EQ(w1->role, "worker");
  EXPECT_EQ(w1->node, "n1");
  EXPECT_TRUE(w1->ready);
  EXPECT_EQ(seen.Owned("mlp-ps-0"), nullptr);
  EXPECT_TRUE(seen.IsTaken("mlp-ps-0"));
  EXPECT_FALSE(seen.IsTaken("mlp-worker-2"));
  EXPECT_THAT(seen.taken, ElementsAre("mlp-ps-0", "mlp-worker-0", "mlp-worker-1"));

  std::vector<Json> secrets = {foreign};
  secrets[0]["metadata"]["name"] = "mlp-hptrain";
  EXPECT_EQ(LookupName(secrets, "mlp-hptrain", job), NameState::kForeign);
  EXPECT_EQ(LookupName(secrets, "other", job), NameState::kFree);
  secrets[0] = owned;
  secrets[0]["metadata"]["name"] = "mlp-hptrain";
  EXPECT_EQ(LookupName(secrets, "mlp-hptrain", job), NameState::kOwned);
  secrets[0]["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z";
  EXPECT_EQ(LookupName(secrets, "mlp-hptrain", job), NameState::kOwnedTerminating);
}

TEST(ObservedObjectsTest, FailureSummary) {
  Json pod = Json::parse(R"({"status": {"phase": "Failed", "containerStatuses": [
      {"name": "sidecar", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
      {"name": "worker", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}})");
  EXPECT_EQ(FailureSummary(pod), "container worker: OOMKilled, exit code 137");
  pod = Json::parse(R"({"status": {"phase": "Failed", "reason": "Evicted",
                                   "message": "The node was low on resource: memory."}})");
  EXPECT_EQ(FailureSummary(pod), "Evicted: The node was low on resource: memory.");
  EXPECT_EQ(FailureSummary(Json::object()), "");
}

TEST(WorkerStatusTest, DeviceOf) {
  EXPECT_EQ(DeviceOf(Json::object()), "cpu");
  EXPECT_EQ(DeviceOf(Json::parse(R"({"spec": {"containers": [
      {"resources": {"limits": {"cpu": "4"}}}]}})")),
            "cpu");
  EXPECT_EQ(DeviceOf(Json::parse(R"({"spec": {"containers": [
      {"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}})")),
            "gpu x2");
  EXPECT_EQ(DeviceOf(Json::parse(R"({"spec": {
      "nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"},
      "containers": [{"resources": {"requests": {"nvidia.com/gpu": 1}}}]}})")),
            "gpu x1 (Tesla-T4)");
  // spec.device cuda: one GPU where the template names none; a template's own count wins.
  EXPECT_EQ(DeviceOf(Json::object(), "cuda"), "gpu x1");
  EXPECT_EQ(DeviceOf(Json::parse(R"({"spec": {"containers": [
      {"resources": {"limits": {"nvidia.com/gpu": "0"}}}]}})"),
                     "cuda"),
            "cpu");
  EXPECT_EQ(DeviceOf(Json::object(), "auto"), "cpu");
}

TEST(PlanTest, NoWritesAndDebugString) {
  Plan plan;
  EXPECT_TRUE(plan.NoWrites());
  EXPECT_EQ(plan.DebugString(), "(no writes)\n");
  plan.requeue_after = absl::Seconds(30);
  EXPECT_TRUE(plan.NoWrites());
  plan.deletes.push_back({"v1", "Pod", "ns", "j-worker-0", "u", ""});
  plan.events.push_back({kEventWarning, kReasonGangRestart, "pod failed"});
  EXPECT_FALSE(plan.NoWrites());
  EXPECT_THAT(plan.DebugString(), HasSubstr("delete Pod ns/j-worker-0\n"));
  EXPECT_THAT(plan.DebugString(), HasSubstr("event Warning GangRestart: pod failed\n"));
  EXPECT_THAT(plan.DebugString(), HasSubstr("requeue after 30s"));
  Plan other = plan;
  EXPECT_EQ(plan, other);
  other.deletes[0].uid = "v";
  EXPECT_FALSE(plan == other);
}

}  // namespace
}  // namespace hptrain::reconcile
