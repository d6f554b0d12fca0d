// spec.runPolicy: activeDeadlineSeconds, ttlSecondsAfterFinished, suspend.
#include "controller/reconcile/run_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller/reconcile/conditions.h"
#include "controller/reconcile/kube_time.h"
#include "controller/reconcile/reconciler.h"
#include "tests/controller/reconcile/testing/cluster.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile {
namespace {

using testing::Cluster;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::ShorthandJob;

Json JobWithPolicy(const Json& run_policy) {
  Json job = ShorthandJob(2);
  job["spec"]["runPolicy"] = run_policy;
  return job;
}

void StartRunning(Cluster* c) {
  c->Settle();
  c->SetAllPods("Running");
  c->Settle();
}

std::string ConditionField(const Json& status, const char* type, const char* field) {
  const Json* c = FindCondition(status, type);
  return c == nullptr ? "<none>" : StringAt(*c, {field});
}

TEST(RunPolicyTest, Helpers) {
  Json status = {{"startTime", "2027-01-15T08:00:00Z"}, {"completionTime", "bad"}};
  EXPECT_EQ(DeadlineOf(60, status), testing::StartTime() + absl::Seconds(60));
  EXPECT_EQ(DeadlineOf(0, status), std::nullopt);
  EXPECT_EQ(TtlExpiryOf(60, status), std::nullopt);
  EXPECT_EQ(TtlSecondsOf(JobWithPolicy({{"ttlSecondsAfterFinished", 30}})), 30);
  EXPECT_EQ(TtlSecondsOf(JobWithPolicy({{"ttlSecondsAfterFinished", "30"}})), 0);
  std::optional<absl::Duration> requeue;
  RequeueAt(testing::StartTime() + absl::Seconds(90), testing::StartTime(), &requeue);
  EXPECT_EQ(requeue, absl::Seconds(90));
  RequeueAt(testing::StartTime() + absl::Seconds(200), testing::StartTime(), &requeue);
  EXPECT_EQ(requeue, absl::Seconds(90));
  RequeueAt(testing::StartTime() - absl::Seconds(5), testing::StartTime(), &requeue);
  EXPECT_EQ(requeue, absl::Seconds(1));
}

TEST(RunPolicyTest, ActiveDeadline) {
  Cluster c(JobWithPolicy({{"activeDeadlineSeconds", 600}}));
  c.Settle();
  // Not started yet: no deadline to wait for.
  EXPECT_FALSE(c.Reconcile().requeue_after.has_value());
  c.SetAllPods("Running");
  Plan plan = c.Reconcile();
  EXPECT_EQ(plan.requeue_after, absl::Seconds(600));
  c.Apply(plan);
  c.Advance(absl::Seconds(450));
  plan = c.Reconcile();
  EXPECT_TRUE(plan.NoWrites());
  EXPECT_EQ(plan.requeue_after, absl::Seconds(150));

  c.Advance(absl::Seconds(150));
  plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Failed");
  EXPECT_EQ((*plan.status)["completionTime"], FormatKubeTime(c.now()));
  EXPECT_EQ(ConditionField(*plan.status, "Failed", "reason"), "DeadlineExceeded");
  EXPECT_EQ(ConditionField(*plan.status, "Running", "status"), "False");
  EXPECT_EQ(plan.deletes.size(), 3u);
  ASSERT_EQ(plan.events.size(), 1u);
  EXPECT_EQ(plan.events[0].type, "Warning");
  EXPECT_EQ(plan.events[0].reason, "DeadlineExceeded");
  EXPECT_THAT(plan.events[0].message, HasSubstr("600s since 2027-01-15T08:00:00Z"));
  c.Apply(plan);
  c.Settle();
  EXPECT_THAT(c.PodNames(), IsEmpty());
}

TEST(RunPolicyTest, DeadlineKeepsCountingAcrossGangRestarts) {
  Cluster c(JobWithPolicy({{"activeDeadlineSeconds", 600}}));
  StartRunning(&c);
  std::string start = StringAt(c.status(), {"startTime"});
  c.Advance(absl::Seconds(500));
  c.FailPod("mlp-worker-0");
  c.Apply(c.Reconcile());
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  EXPECT_EQ(StringAt(c.status(), {"startTime"}), start);
  EXPECT_EQ(c.Reconcile().requeue_after, absl::Seconds(100));
}

TEST(RunPolicyTest, TtlAfterSuccess) {
  Cluster c(JobWithPolicy({{"ttlSecondsAfterFinished", 3600}}));
  StartRunning(&c);
  c.SetPodPhase("mlp-worker-0", "Succeeded");
  c.SetPodPhase("mlp-worker-1", "Succeeded");
  Plan plan = c.Reconcile();
  EXPECT_EQ(plan.requeue_after, absl::Seconds(3600));
  c.Apply(plan);
  c.FinishDeletions();
  c.Advance(absl::Seconds(3000));
  plan = c.Reconcile();
  EXPECT_TRUE(plan.NoWrites());
  EXPECT_EQ(plan.requeue_after, absl::Seconds(600));

  c.Advance(absl::Seconds(600));
  plan = c.Reconcile();
  ASSERT_TRUE(plan.delete_job.has_value());
  EXPECT_EQ(plan.delete_job->kind, "TrainingJob");
  EXPECT_EQ(plan.delete_job->name, "mlp");
  EXPECT_EQ(plan.delete_job->ns, "team-a");
  EXPECT_EQ(plan.delete_job->uid, testing::kJobUid);
  EXPECT_FALSE(plan.status.has_value());
  ASSERT_EQ(plan.events.size(), 1u);
  EXPECT_EQ(plan.events[0].reason, "TTLExpired");
  EXPECT_EQ(plan.events[0].type, "Normal");
  c.Apply(plan);
  EXPECT_TRUE(c.job_deleted());
  EXPECT_TRUE(c.Reconcile().NoWrites());
}

TEST(RunPolicyTest, TtlAfterFailureEvenWhenSpecNoLongerParses) {
  Cluster c(JobWithPolicy({{"ttlSecondsAfterFinished", 60}, {"backoffLimit", 0}}));
  StartRunning(&c);
  c.FailPod("mlp-worker-0");
  Plan plan = c.Reconcile();
  EXPECT_EQ((*plan.status)["phase"], "Failed");
  EXPECT_EQ(plan.requeue_after, absl::Seconds(60));
  c.Apply(plan);
  c.job()["spec"]["model"]["name"] = "nope";
  c.Advance(absl::Seconds(61));
  plan = c.Reconcile();
  EXPECT_TRUE(plan.delete_job.has_value());
  EXPECT_THAT(plan.events[0].message, HasSubstr("failed at 2027-01-15T08:00:00Z"));
}

TEST(RunPolicyTest, SuspendAndResume) {
  Cluster c(ShorthandJob(2));
  StartRunning(&c);
  c.FailPod("mlp-worker-1");
  c.Apply(c.Reconcile());
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  std::string start = StringAt(c.status(), {"startTime"});
  ASSERT_EQ(c.status()["restarts"], 1);

  c.Advance(absl::Minutes(1));
  testing::SetRunPolicy(&c.job(), "suspend", true);
  Plan plan = c.Reconcile();
  EXPECT_EQ(plan.deletes.size(), 3u);
  EXPECT_THAT(plan.creates, IsEmpty());
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Suspended");
  EXPECT_EQ((*plan.status)["restarts"], 1);
  EXPECT_EQ((*plan.status)["startTime"], start);
  EXPECT_EQ(ConditionField(*plan.status, "Suspended", "status"), "True");
  EXPECT_EQ(ConditionField(*plan.status, "Running", "status"), "False");
  EXPECT_EQ(ConditionField(*plan.status, "Running", "reason"), "Suspended");
  ASSERT_EQ(plan.events.size(), 1u);
  EXPECT_EQ(plan.events[0].reason, "Suspended");
  c.Apply(plan);
  c.Settle();
  EXPECT_THAT(c.PodNames(), IsEmpty());
  // The killed pods reported Failed on their way out: not a restart.
  EXPECT_EQ(c.status()["restarts"], 1);
  EXPECT_NE(c.Object("Service", "mlp"), nullptr);
  EXPECT_NE(c.Object("Secret", "mlp-hptrain"), nullptr);

  c.Advance(absl::Minutes(1));
  testing::SetRunPolicy(&c.job(), "suspend", false);
  plan = c.Reconcile();
  EXPECT_EQ(plan.creates.size(), 3u);
  EXPECT_EQ((*plan.status)["phase"], "Pending");
  EXPECT_EQ(ConditionField(*plan.status, "Suspended", "status"), "False");
  EXPECT_EQ(ConditionField(*plan.status, "Suspended", "reason"), "Resumed");
  EXPECT_EQ(ConditionField(*plan.status, "Suspended", "lastTransitionTime"),
            FormatKubeTime(c.now()));
  ASSERT_EQ(plan.events.size(), 1u);
  EXPECT_EQ(plan.events[0].reason, "Resumed");
  c.Apply(plan);
  c.Settle();
  EXPECT_THAT(c.RestartGenerations(), ElementsAre("1", "1", "1"));
  c.SetAllPods("Running");
  c.Settle();
  EXPECT_EQ(c.status()["phase"], "Running");
  EXPECT_EQ(StringAt(c.status(), {"startTime"}), start);
  EXPECT_EQ(c.status()["restarts"], 1);
}

TEST(RunPolicyTest, SuspendedFromTheStartCreatesNothing) {
  Cluster c(JobWithPolicy({{"suspend", true}}));
  Plan plan = c.Reconcile();
  EXPECT_THAT(plan.creates, IsEmpty());
  EXPECT_EQ((*plan.status)["phase"], "Suspended");
  EXPECT_EQ(ConditionField(*plan.status, "Created", "status"), "<none>");
  EXPECT_EQ(ConditionField(*plan.status, "Running", "status"), "<none>");
  c.Apply(plan);
  EXPECT_EQ(c.Settle(), 1);

  testing::SetRunPolicy(&c.job(), "suspend", false);
  plan = c.Reconcile();
  EXPECT_EQ(plan.creates.size(), 5u);
  std::vector<std::string> reasons;
  for (const Event& e : plan.events) reasons.push_back(e.reason);
  EXPECT_THAT(reasons, ElementsAre("Resumed", "Created"));
}

}  // namespace
}  // namespace hptrain::reconcile
