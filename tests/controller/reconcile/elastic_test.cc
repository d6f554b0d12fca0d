// Elastic jobs (spec.elastic) in the reconciler, pass by pass on the in-memory cluster: the ps
// pod still restarts the gang, restartPolicy still decides about a failed worker, a scale-down
// without a coordinator deletes at once, the Secret keeps its token while workers run and follows
// the replica count across a gang restart, no worker pod above maxReplicas, the pods' hash
// leaves the replica count out, and the MembershipChanged message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "controller/reconcile/conditions.h"
#include "controller/reconcile/desired_objects.h"
#include "controller/reconcile/elastic.h"
#include "controller/reconcile/labels.h"
#include "controller/reconcile/parsed_job.h"
#include "controller/reconcile/reconciler.h"
#include "tests/controller/reconcile/testing/cluster.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile {
namespace {

using testing::Cluster;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Json ElasticJob(int replicas) {
  Json job = testing::ShorthandJob(replicas);
  job["spec"]["elastic"] = {{"minReplicas", 2}, {"maxReplicas", 6}, {"joinTimeoutSeconds", 60}};
  return job;
}

// The elastic job, running with `replicas` workers; the coordinator lists them (epoch 0) unless
// `coordinator` is false (then it cannot be read).
Cluster Running(int replicas, bool coordinator = true) {
  Cluster c(ElasticJob(replicas));
  if (coordinator) {
    CoordinatorMembership membership;
    for (int i = 0; i < replicas; ++i) membership.members.push_back(i);
    c.observed().membership = membership;
  }
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  EXPECT_EQ(StringAt(c.status(), {"phase"}), "Running");
  return c;
}

std::string SecretUid(Cluster& c) {
  Json* secret = c.Object("Secret", SecretName(testing::kJobName));
  return secret == nullptr ? "" : Uid(*secret);
}

TEST(ElasticReconcileTest, AFailedPsPodStillRestartsTheGang) {
  Cluster c = Running(4);
  c.FailPod("mlp-ps-0");
  c.Settle();
  EXPECT_EQ(IntAt(c.status(), {"restarts"}, 0), 1);
  EXPECT_THAT(c.RestartGenerations(), ::testing::Each("1"));
}

TEST(ElasticReconcileTest, RestartPolicyNeverStillFailsTheJobOnAFailedWorker) {
  Json job = ElasticJob(4);
  testing::SetRunPolicy(&job, "restartPolicy", "Never");
  Cluster c(job);
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  c.FailPod("mlp-worker-1");
  c.Settle();
  EXPECT_EQ(StringAt(c.status(), {"phase"}), "Failed");
  EXPECT_EQ(StringAt(*FindCondition(c.status(), kConditionFailed), {"reason"}), kReasonPodFailed);
}

TEST(ElasticReconcileTest, AFailedWorkerIsReplacedAloneAndReportedLost) {
  Cluster c = Running(4);
  const std::string other = Uid(*c.Pod("mlp-worker-0"));
  c.FailPod("mlp-worker-3", "OOMKilled", 137);
  Plan plan = c.Reconcile();
  ASSERT_EQ(plan.deletes.size(), 1u) << plan.DebugString();
  EXPECT_EQ(plan.deletes[0].name, "mlp-worker-3");
  ASSERT_EQ(plan.membership.size(), 1u);
  EXPECT_EQ(plan.membership[0].kind, MembershipRequest::Kind::kLost);
  EXPECT_EQ(plan.membership[0].slot, 3);
  c.Apply(plan);
  c.Settle();
  EXPECT_EQ(IntAt(c.status(), {"restarts"}, 0), 0);
  EXPECT_EQ(Uid(*c.Pod("mlp-worker-0")), other);
  ASSERT_NE(c.Pod("mlp-worker-3"), nullptr);
  EXPECT_EQ(c.PodNames().size(), 5u);
}

TEST(ElasticReconcileTest, WithoutTheCoordinatorAScaleDownDeletesAtOnce) {
  Cluster c = Running(4, /*coordinator=*/false);
  testing::Scale(&c.job(), 2);
  Plan plan = c.Reconcile();
  EXPECT_TRUE(plan.membership.empty()) << plan.DebugString();
  c.Apply(plan);
  c.Settle();
  EXPECT_THAT(c.PodNames(), ElementsAre("mlp-ps-0", "mlp-worker-0", "mlp-worker-1"));
  EXPECT_EQ(IntAt(c.status(), {"restarts"}, 0), 0);
}

TEST(ElasticReconcileTest, AMemberBeingRemovedKeepsItsPodUntilItHasLeft) {
  Cluster c = Running(4);
  testing::Scale(&c.job(), 3);
  Plan plan = c.Reconcile();
  ASSERT_EQ(plan.membership.size(), 1u) << plan.DebugString();
  EXPECT_EQ(plan.membership[0].kind, MembershipRequest::Kind::kRemove);
  EXPECT_EQ(plan.membership[0].slot, 3);
  EXPECT_TRUE(plan.deletes.empty()) << plan.DebugString();
  c.Apply(plan);
  c.SetPodPhase("mlp-worker-3", "Succeeded");  // the worker left at a step boundary
  plan = c.Reconcile();
  EXPECT_TRUE(plan.membership.empty()) << plan.DebugString();
  ASSERT_EQ(plan.deletes.size(), 1u) << plan.DebugString();
  EXPECT_EQ(plan.deletes[0].name, "mlp-worker-3");
}

TEST(ElasticReconcileTest, TheSecretKeepsItsTokenWhileWorkersRunAndFollowsAfterARestart) {
  Cluster c = Running(4);
  const std::string first = SecretUid(c);
  testing::Scale(&c.job(), 6);
  c.Settle();
  EXPECT_EQ(SecretUid(c), first) << "running workers hold the Secret's token";
  EXPECT_EQ(c.PodNames().size(), 7u);
  c.FailPod("mlp-ps-0");  // a gang restart: no pod holds the token any more
  c.Settle();
  EXPECT_NE(SecretUid(c), first);
  const Json* secret = c.Object("Secret", SecretName(testing::kJobName));
  ASSERT_NE(secret, nullptr);
  absl::StatusOr<ParsedJob> parsed = ParseTrainingJob(c.job());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(Annotation(*secret, kManifestHashAnnotation), parsed->manifest_hash);
  EXPECT_EQ(c.PodNames().size(), 7u);
}

TEST(ElasticReconcileTest, NoWorkerPodAboveMaxReplicas) {
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(ElasticJob(4));
  ASSERT_TRUE(job.ok()) << job.status();
  job->spec.worker_groups[0].replicas = 8;  // past maxReplicas 6, however it got there
  absl::StatusOr<DesiredObjects> desired = BuildDesiredObjects(*job, "token", 0, {});
  ASSERT_TRUE(desired.ok()) << desired.status();
  std::vector<std::string> workers;
  for (const Json& pod : desired->pods) {
    if (Label(pod, kRoleLabel) == kRoleWorker) workers.push_back(Name(pod));
  }
  EXPECT_EQ(workers.size(), 6u);
  EXPECT_EQ(workers.back(), "mlp-worker-5");
}

TEST(ElasticReconcileTest, ThePodsHashLeavesTheReplicaCountOutOfElasticJobsOnly) {
  absl::StatusOr<ParsedJob> four = ParseTrainingJob(ElasticJob(4));
  absl::StatusOr<ParsedJob> six = ParseTrainingJob(ElasticJob(6));
  ASSERT_TRUE(four.ok() && six.ok());
  EXPECT_EQ(four->spec_hash, six->spec_hash);
  EXPECT_NE(four->manifest_hash, six->manifest_hash);
  absl::StatusOr<ParsedJob> plain4 = ParseTrainingJob(testing::ShorthandJob(4));
  absl::StatusOr<ParsedJob> plain6 = ParseTrainingJob(testing::ShorthandJob(6));
  ASSERT_TRUE(plain4.ok() && plain6.ok());
  EXPECT_NE(plain4->spec_hash, plain6->spec_hash);
  EXPECT_EQ(plain4->spec_hash, plain4->manifest_hash);
}

TEST(ElasticReconcileTest, MembershipEventMessages) {
  EXPECT_EQ(MembershipEventMessage({3, "lost", {2}, "exit 137"}, {0, 1, 3}),
            "epoch 3: slot 2 lost; members 0,1,3");
  EXPECT_EQ(MembershipEventMessage({4, "joined", {4, 5}, ""}, {0, 1, 3, 4, 5}),
            "epoch 4: slots 4,5 joined; members 0,1,3,4,5");
  EXPECT_EQ(MembershipEventMessage({2, "removed", {3}, ""}, {}), "epoch 2: slot 3 removed");
}

}  // namespace
}  // namespace hptrain::reconcile
