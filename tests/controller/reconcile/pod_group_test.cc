// spec.gangScheduling's PodGroup: what is built for each provider (pod_group.h) and how the
// reconciler creates, replaces, removes and reads it (reconciler.h, step 9).
#include "controller/reconcile/pod_group.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "controller/reconcile/desired_objects.h"
#include "controller/reconcile/labels.h"
#include "controller/reconcile/parsed_job.h"
#include "tests/controller/reconcile/testing/cluster.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile {
namespace {

using testing::Cluster;
using testing::ShardedJob;
using testing::ShorthandJob;
using ::testing::ElementsAre;

Json Gang(Json job, const std::string& provider, const Json& extra = Json::object()) {
  job["spec"]["gangScheduling"] = {{"enabled", true}, {"provider", provider}};
  for (const auto& [key, value] : extra.items()) job["spec"]["gangScheduling"][key] = value;
  return job;
}

std::optional<Json> PodGroupOf(const Json& job) {
  absl::StatusOr<ParsedJob> parsed = ParseTrainingJob(job);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok()) return std::nullopt;
  absl::StatusOr<DesiredObjects> desired = BuildDesiredObjects(*parsed, "t", 0, {"img:1"});
  EXPECT_TRUE(desired.ok()) << desired.status();
  if (!desired.ok()) return std::nullopt;
  return desired->pod_group;
}

std::vector<std::string> Kinds(const std::vector<Json>& objects) {
  std::vector<std::string> out;
  for (const Json& o : objects) out.push_back(StringAt(o, {"kind"}) + "/" + Name(o));
  return out;
}

TEST(PodGroupTest, NoneWithoutGangScheduling) {
  EXPECT_FALSE(PodGroupOf(ShorthandJob(2)).has_value());
  Json off = ShorthandJob(2);
  off["spec"]["gangScheduling"] = {{"enabled", false}, {"provider", "volcano"}};
  EXPECT_FALSE(PodGroupOf(off).has_value());
}

TEST(PodGroupTest, VolcanoCountsThePsAndEveryWorker) {
  std::optional<Json> group = PodGroupOf(
      Gang(ShorthandJob(3), "volcano", {{"queue", "research"}, {"priorityClassName", "high"}}));
  ASSERT_TRUE(group.has_value());
  EXPECT_EQ((*group)["apiVersion"], "scheduling.volcano.sh/v1beta1");
  EXPECT_EQ((*group)["kind"], "PodGroup");
  EXPECT_EQ(Name(*group), "mlp");
  EXPECT_EQ(Namespace(*group), "team-a");
  EXPECT_EQ((*group)["spec"], Json::parse(R"({"minMember": 4,
      "minTaskMember": {"ps": 1, "worker": 3}, "queue": "research",
      "priorityClassName": "high"})"));
  // Owned by the job (controller reference: garbage collection deletes it with the job), and
  // labelled like the job's other objects (the controller's informers select on them).
  ASSERT_EQ((*group)["metadata"]["ownerReferences"].size(), 1u);
  const Json& owner = (*group)["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["kind"], "TrainingJob");
  EXPECT_EQ(owner["name"], "mlp");
  EXPECT_EQ(owner["controller"], true);
  EXPECT_EQ(Label(*group, kJobLabel), "mlp");
  EXPECT_EQ(Label(*group, kManagedByLabel), kManagedByValue);
}

TEST(PodGroupTest, SchedulerPluginsCountsEveryPsShard) {
  std::optional<Json> group = PodGroupOf(Gang(ShardedJob("hps", 3, 4), "scheduler-plugins",
                                              {{"priorityClassName", "high"}}));
  ASSERT_TRUE(group.has_value());
  EXPECT_EQ((*group)["apiVersion"], "scheduling.x-k8s.io/v1alpha1");
  // 3 ps shards + 4 workers; the coscheduling PodGroup has no queue or priority fields.
  EXPECT_EQ((*group)["spec"], Json::parse(R"({"minMember": 7})"));
}

TEST(PodGroupTest, PodsGetThePriorityClassUnlessTheirTemplateNamesOne) {
  Json job = Gang(ShorthandJob(2), "volcano", {{"priorityClassName", "high"}});
  absl::StatusOr<ParsedJob> parsed = ParseTrainingJob(job);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<DesiredObjects> d = BuildDesiredObjects(*parsed, "t", 0, {"img:1"});
  ASSERT_TRUE(d.ok()) << d.status();
  for (const Json& pod : d->pods) EXPECT_EQ(pod["spec"]["priorityClassName"], "high") << Name(pod);
  job["spec"]["workers"]["template"]["spec"]["priorityClassName"] = "mine";
  parsed = ParseTrainingJob(job);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  d = BuildDesiredObjects(*parsed, "t", 0, {"img:1"});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->pods[1]["spec"]["priorityClassName"], "mine");
}

TEST(PodGroupTest, AnInvalidPriorityClassNameIsRejectedWithItsPath) {
  absl::StatusOr<ParsedJob> parsed =
      ParseTrainingJob(Gang(ShorthandJob(2), "volcano", {{"priorityClassName", "High_Prio"}}));
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()),
              ::testing::StartsWith("spec.gangScheduling.priorityClassName: "));
}

TEST(PodGroupTest, MatchesIgnoresWhatTheSchedulerAdds) {
  std::optional<Json> desired = PodGroupOf(Gang(ShorthandJob(2), "volcano"));
  ASSERT_TRUE(desired.has_value());
  Json observed = *desired;
  observed["spec"]["queue"] = "default";  // Volcano's admission fills the default queue in
  observed["spec"]["minResources"] = {{"cpu", "3"}};
  observed["status"] = {{"phase", "Inqueue"}};
  EXPECT_TRUE(PodGroupMatches(observed, *desired));
  EXPECT_EQ(PodGroupPhase(observed), "Inqueue");
  observed["spec"]["minMember"] = 2;
  EXPECT_FALSE(PodGroupMatches(observed, *desired));
  observed["spec"]["minMember"] = 3;
  observed["spec"]["queue"] = "research";
  EXPECT_FALSE(PodGroupMatches(observed, *desired));
  observed["spec"]["queue"] = "default";
  observed["apiVersion"] = "scheduling.x-k8s.io/v1alpha1";
  EXPECT_FALSE(PodGroupMatches(observed, *desired));
}

TEST(PodGroupReconcileTest, CreatedBeforeThePodsAndItsPhaseRecorded) {
  Cluster c(Gang(ShorthandJob(2), "volcano"));
  Plan plan = c.Reconcile();
  EXPECT_THAT(Kinds(plan.creates),
              ElementsAre("Secret/mlp-hptrain", "Service/mlp", "PodGroup/mlp", "Pod/mlp-ps-0",
                          "Pod/mlp-worker-0", "Pod/mlp-worker-1"));
  c.Apply(plan);
  c.Settle();
  ASSERT_EQ(c.observed().pod_groups.size(), 1u);
  EXPECT_EQ(c.status()["podGroupPhase"], "");
  c.observed().pod_groups[0]["status"] = {{"phase", "Inqueue"}};
  plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["podGroupPhase"], "Inqueue");
  EXPECT_TRUE(plan.creates.empty());
  EXPECT_TRUE(plan.deletes.empty());
  c.Apply(plan);
  EXPECT_TRUE(c.Reconcile().NoWrites());
}

TEST(PodGroupReconcileTest, ScalingReplacesThePodGroupBeforeTheNewGangStarts) {
  Cluster c(Gang(ShorthandJob(2), "volcano"));
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  const std::string first_uid = Uid(c.observed().pod_groups[0]);
  testing::Scale(&c.job(), 3);
  c.Settle(12);
  ASSERT_EQ(c.observed().pod_groups.size(), 1u);
  EXPECT_NE(Uid(c.observed().pod_groups[0]), first_uid);
  EXPECT_EQ(c.observed().pod_groups[0]["spec"]["minMember"], 4);
  EXPECT_EQ(c.PodNames().size(), 4u);
}

TEST(PodGroupReconcileTest, SwitchingProviderOrTurningItOffDeletesTheOldOne) {
  Cluster c(Gang(ShorthandJob(2), "volcano"));
  c.Settle();
  c.job()["spec"]["gangScheduling"]["provider"] = "scheduler-plugins";
  c.job()["metadata"]["generation"] = 2;
  c.Settle(12);
  ASSERT_EQ(c.observed().pod_groups.size(), 1u);
  EXPECT_EQ(c.observed().pod_groups[0]["apiVersion"], "scheduling.x-k8s.io/v1alpha1");
  c.job()["spec"].erase("gangScheduling");
  c.job()["metadata"]["generation"] = 3;
  c.Settle(12);
  EXPECT_TRUE(c.observed().pod_groups.empty());
  EXPECT_FALSE(c.status().contains("podGroupPhase"));
  EXPECT_EQ(c.PodNames().size(), 3u);
}

TEST(PodGroupReconcileTest, APodGroupTheUserMadeIsUsedAsItIs) {
  Cluster c(Gang(ShorthandJob(2), "volcano"));
  c.observed().pod_groups.push_back(Json::parse(R"({
      "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
      "metadata": {"name": "mlp", "namespace": "team-a", "uid": "user-made",
                   "labels": {"hptrain.io/job": "mlp"}},
      "spec": {"minMember": 2}, "status": {"phase": "Pending"}})"));
  Plan plan = c.Reconcile();
  EXPECT_THAT(Kinds(plan.creates), ElementsAre("Secret/mlp-hptrain", "Service/mlp",
                                               "Pod/mlp-ps-0", "Pod/mlp-worker-0",
                                               "Pod/mlp-worker-1"));
  EXPECT_TRUE(plan.deletes.empty());
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["podGroupPhase"], "Pending");
}

}  // namespace
}  // namespace hptrain::reconcile
