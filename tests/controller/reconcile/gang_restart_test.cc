// Gang restarts and their counter: counting once per failed generation, robust to replays and
// to a controller killed at any point of a Plan; backoffLimit.
#include "controller/reconcile/gang_restart.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

#include "controller/reconcile/conditions.h"
#include "controller/reconcile/labels.h"
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

// A job with `backoff_limit`, all pods created and running.
Cluster RunningJob(int backoff_limit = 3) {
  Json job = ShorthandJob(2);
  job["spec"]["runPolicy"] = {{"backoffLimit", backoff_limit}};
  Cluster c(job);
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  return c;
}

int64_t Restarts(const Cluster& c) { return IntAt(c.status(), {"restarts"}, -1); }

TEST(GangRestartTest, OneFailedPodRestartsTheWholeGang) {
  Cluster c = RunningJob();
  c.FailPod("mlp-worker-1", "OOMKilled", 137);
  Plan plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["restarts"], 1);
  EXPECT_EQ((*plan.status)["phase"], "Pending");
  const Json* running = FindCondition(*plan.status, kConditionRunning);
  ASSERT_NE(running, nullptr);
  EXPECT_EQ((*running)["status"], "False");
  EXPECT_EQ((*running)["reason"], "GangRestart");
  ASSERT_EQ(plan.deletes.size(), 3u);
  for (const ObjectRef& ref : plan.deletes) {
    EXPECT_EQ(ref.kind, "Pod");
    EXPECT_EQ(ref.uid, Uid(*c.Pod(ref.name)));
  }
  EXPECT_THAT(plan.creates, IsEmpty());
  ASSERT_EQ(plan.events.size(), 1u);
  EXPECT_EQ(plan.events[0].type, "Warning");
  EXPECT_EQ(plan.events[0].reason, "GangRestart");
  EXPECT_EQ(plan.events[0].message,
            "pod mlp-worker-1 failed (container worker: OOMKilled, exit code 137); restarting "
            "all pods (restart 1 of at most 3)");

  c.Apply(plan);
  c.Settle();
  EXPECT_EQ(Restarts(c), 1);
  EXPECT_THAT(c.RestartGenerations(), ElementsAre("1", "1", "1"));
  c.SetAllPods("Running");
  c.Settle();
  EXPECT_EQ(c.status()["phase"], "Running");
  EXPECT_EQ(Restarts(c), 1);
}

TEST(GangRestartTest, FailedPsShardRestartsEveryShard) {
  Cluster c(testing::ShardedJob("mp2", 2));
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  c.FailPod("mlp-ps-1");
  Plan plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["restarts"], 1);
  std::vector<std::string> deleted;
  for (const ObjectRef& ref : plan.deletes) deleted.push_back(ref.kind + "/" + ref.name);
  EXPECT_THAT(deleted,
              ElementsAre("Pod/mlp-ps-0", "Pod/mlp-ps-1", "Pod/mlp-worker-0", "Pod/mlp-worker-1"));
  c.Apply(plan);
  c.Settle();
  EXPECT_THAT(c.PodNames(), ElementsAre("mlp-ps-0", "mlp-ps-1", "mlp-worker-0", "mlp-worker-1"));
  EXPECT_THAT(c.RestartGenerations(), ElementsAre("1", "1", "1", "1"));
  EXPECT_NE(c.Object("Service", "mlp-ps-1"), nullptr);  // Services outlive a gang restart
}

TEST(GangRestartTest, SeveralFailuresInOneGenerationCountOnce) {
  Cluster c = RunningJob();
  c.FailPod("mlp-worker-0");
  c.FailPod("mlp-worker-1");
  c.FailPod("mlp-ps-0");
  Plan plan = c.Reconcile();
  EXPECT_EQ((*plan.status)["restarts"], 1);
  c.Apply(plan);
  c.Settle();
  EXPECT_EQ(Restarts(c), 1);
  EXPECT_THAT(c.RestartGenerations(), ElementsAre("1", "1", "1"));
}

TEST(GangRestartTest, ReplayingThePlanGivesTheSamePlan) {
  Cluster c = RunningJob();
  c.FailPod("mlp-worker-0");
  Plan first = c.Reconcile();
  EXPECT_EQ(c.Reconcile(), first);  // crash before anything was applied
}

// Kills the controller after each possible prefix of the restart Plan, then lets it run on.
TEST(GangRestartTest, CrashAtAnyPointCountsOnce) {
  for (int status = 0; status <= 1; ++status) {
    for (size_t deletes = 0; deletes <= 3; ++deletes) {
      if (status == 0 && deletes > 0) continue;  // status always goes first
      SCOPED_TRACE(::testing::Message() << "status " << status << " deletes " << deletes);
      Cluster c = RunningJob();
      c.FailPod("mlp-worker-1");
      Plan plan = c.Reconcile();
      c.Apply(plan, status == 1, deletes, 0);
      c.Settle();
      EXPECT_EQ(Restarts(c), 1);
      EXPECT_THAT(c.RestartGenerations(), ElementsAre("1", "1", "1"));
      int gang_restarts = 0;
      for (const Event& e : c.events()) gang_restarts += e.reason == "GangRestart";
      EXPECT_LE(gang_restarts, 1);
    }
  }
}

TEST(GangRestartTest, CrashWhileRecreatingCreatesTheRest) {
  Cluster c = RunningJob();
  c.FailPod("mlp-worker-1");
  c.Apply(c.Reconcile());
  c.FinishDeletions();
  Plan create = c.Reconcile();
  ASSERT_EQ(create.creates.size(), 3u);
  c.Apply(create, true, 0, 1);  // only the ps pod was created
  Plan rest = c.Reconcile();
  EXPECT_EQ(rest.creates.size(), 2u);
  EXPECT_FALSE(rest.status.has_value() && (*rest.status)["restarts"] != 1);
  c.Apply(rest);
  c.Settle();
  EXPECT_EQ(Restarts(c), 1);
  EXPECT_THAT(c.RestartGenerations(), ElementsAre("1", "1", "1"));
}

TEST(GangRestartTest, StatusWrittenPodsNotDeletedIsNotCountedAgain) {
  Cluster c = RunningJob();
  c.FailPod("mlp-worker-1");
  Plan plan = c.Reconcile();
  c.Apply(plan, /*status=*/true, /*deletes=*/0, /*creates=*/0);
  Plan replay = c.Reconcile();
  EXPECT_FALSE(replay.status.has_value() && (*replay.status)["restarts"] != 1);
  EXPECT_EQ(replay.deletes.size(), 3u);  // the generation-0 pods are stale now
  EXPECT_THAT(replay.events, IsEmpty());
}

// A pod on its way out (deleted while the gang is still starting, e.g. by a restart's own
// deletions) may report Failed: it is neither counted nor deleted again. (Once a gang has run in
// full, a pod being deleted is a lost pod: ADeletedPodOfARunningGangRestartsTheGang.)
TEST(GangRestartTest, TerminatingFailedPodIsNotCounted) {
  Cluster c(ShorthandJob(2));
  c.Settle();
  c.SetPodPhase("mlp-ps-0", "Running");
  c.Settle();
  ASSERT_EQ(c.status()["phase"], "Pending");
  c.FailPod("mlp-worker-0");
  (*c.Pod("mlp-worker-0"))["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z";
  Plan plan = c.Reconcile();
  EXPECT_FALSE(plan.status.has_value() && (*plan.status)["restarts"] != 0);
  EXPECT_THAT(plan.deletes, IsEmpty());  // not deleted twice
  c.FinishDeletions();
  c.Settle();
  EXPECT_EQ(Restarts(c), 0);
  EXPECT_THAT(c.PodNames(), ElementsAre("mlp-ps-0", "mlp-worker-0", "mlp-worker-1"));
}

TEST(GangRestartTest, OlderGenerationFailureIsDeletedNotCounted) {
  Cluster c = RunningJob();
  c.job()["status"]["restarts"] = 2;  // status ahead of the pods: they are all stale
  c.FailPod("mlp-worker-1");
  Plan plan = c.Reconcile();
  EXPECT_EQ(plan.deletes.size(), 3u);
  EXPECT_TRUE(!plan.status.has_value() || (*plan.status)["restarts"] == 2);
  EXPECT_THAT(plan.events, IsEmpty());
  c.Apply(plan);
  c.Settle();
  EXPECT_EQ(Restarts(c), 2);
  EXPECT_THAT(c.RestartGenerations(), ElementsAre("2", "2", "2"));
}

TEST(GangRestartTest, LostStatusDoesNotResetTheBudget) {
  Cluster c = RunningJob();
  c.FailPod("mlp-worker-0");
  c.Apply(c.Reconcile());
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  ASSERT_EQ(Restarts(c), 1);
  c.job()["status"].erase("restarts");  // e.g. restored from a backup without status
  Plan plan = c.Reconcile();
  EXPECT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["restarts"], 1);
  EXPECT_THAT(plan.deletes, IsEmpty());
  c.Apply(plan);
  c.FailPod("mlp-worker-1");
  EXPECT_EQ((*c.Reconcile().status)["restarts"], 2);
}

TEST(GangRestartTest, BackoffLimitExceeded) {
  Cluster c = RunningJob(/*backoff_limit=*/1);
  c.FailPod("mlp-worker-0");
  c.Apply(c.Reconcile());
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  ASSERT_EQ(Restarts(c), 1);

  c.Advance(absl::Minutes(3));
  c.FailPod("mlp-worker-1", "Error", 3);
  Plan plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  const Json& s = *plan.status;
  EXPECT_EQ(s["phase"], "Failed");
  // The restarts that happened: never more than backoffLimit.
  EXPECT_EQ(s["restarts"], 1);
  EXPECT_EQ(s["completionTime"], "2027-01-15T08:03:00Z");
  const Json* failed = FindCondition(s, kConditionFailed);
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ((*failed)["status"], "True");
  EXPECT_EQ((*failed)["reason"], "BackoffLimitExceeded");
  EXPECT_THAT((*failed)["message"].get<std::string>(),
              HasSubstr("pod mlp-worker-1 failed (container worker: Error, exit code 3) after 1 "
                        "gang restarts; runPolicy.backoffLimit is 1"));
  // The failed pod stays, with its logs; the others go.
  EXPECT_EQ(plan.deletes.size(), 2u);
  EXPECT_THAT(plan.creates, IsEmpty());
  ASSERT_EQ(plan.events.size(), 1u);
  EXPECT_EQ(plan.events[0].reason, "BackoffLimitExceeded");
  EXPECT_EQ(plan.events[0].type, "Warning");
  c.Apply(plan);
  EXPECT_EQ(c.Settle(), 2);
  EXPECT_THAT(c.PodNames(), ElementsAre("mlp-worker-1"));
  EXPECT_EQ(Restarts(c), 1);
}

// runPolicy.restartPolicy ExitCode (the default): exit 2 is bad input and 130 an interrupted
// run; neither is retried. The failed pod is kept, the others deleted, no restart counted.
TEST(GangRestartTest, ExitCodesNoRetryCanFixFailTheJobAtOnce) {
  for (int code : {2, 130}) {
    Cluster c = RunningJob();
    c.FailPod("mlp-worker-0", "Error", code);
    Plan plan = c.Reconcile();
    ASSERT_TRUE(plan.status.has_value());
    EXPECT_EQ((*plan.status)["phase"], "Failed") << code;
    EXPECT_EQ((*plan.status)["restarts"], 0) << code;
    const Json* failed = FindCondition(*plan.status, kConditionFailed);
    ASSERT_NE(failed, nullptr);
    EXPECT_EQ((*failed)["reason"], "BadInput");
    EXPECT_THAT((*failed)["message"].get<std::string>(),
                HasSubstr(absl::StrCat("exit code ", code)));
    ASSERT_EQ(plan.events.size(), 1u);
    EXPECT_EQ(plan.events[0].reason, "BadInput");
    c.Apply(plan);
    c.Settle();
    EXPECT_THAT(c.PodNames(), ElementsAre("mlp-worker-0")) << code;
    // Terminal: later passes keep the failed pod and create nothing.
    EXPECT_TRUE(c.Reconcile().NoWrites());
  }
}

TEST(GangRestartTest, ExitOneAndSignalsRestartUnderExitCode) {
  for (int code : {1, 137, 143}) {
    Cluster c = RunningJob();
    c.FailPod("mlp-worker-1", "Error", code);
    Plan plan = c.Reconcile();
    EXPECT_EQ((*plan.status)["restarts"], 1) << code;
    EXPECT_EQ((*plan.status)["phase"], "Pending") << code;
  }
}

TEST(GangRestartTest, OnFailureRetriesEveryExitCode) {
  Json job = ShorthandJob(2);
  job["spec"]["runPolicy"] = {{"backoffLimit", 3}, {"restartPolicy", "OnFailure"}};
  Cluster c(job);
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  c.FailPod("mlp-worker-0", "Error", 2);
  Plan plan = c.Reconcile();
  EXPECT_EQ((*plan.status)["restarts"], 1);
  EXPECT_EQ((*plan.status)["phase"], "Pending");
}

TEST(GangRestartTest, NeverFailsOnTheFirstFailure) {
  Json job = ShorthandJob(2);
  job["spec"]["runPolicy"] = {{"backoffLimit", 3}, {"restartPolicy", "Never"}};
  Cluster c(job);
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  c.FailPod("mlp-worker-0", "Error", 1);
  Plan plan = c.Reconcile();
  EXPECT_EQ((*plan.status)["phase"], "Failed");
  EXPECT_EQ((*plan.status)["restarts"], 0);
  EXPECT_EQ(FindCondition(*plan.status, kConditionFailed)->at("reason"), "PodFailed");
}

// A pod of a gang that ran in full is deleted by hand (or evicted, or lost with its node): a
// new rank could not join the running ring, so the whole gang restarts (and resumes from its
// checkpoint), counted as a restart.
TEST(GangRestartTest, ADeletedPodOfARunningGangRestartsTheGang) {
  Cluster c = RunningJob();
  ASSERT_EQ(c.status()["phase"], "Running");
  auto& pods = c.observed().pods;
  pods.erase(std::remove_if(pods.begin(), pods.end(),
                            [](const Json& p) { return Name(p) == "mlp-worker-1"; }),
             pods.end());
  Plan plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["restarts"], 1);
  EXPECT_EQ((*plan.status)["phase"], "Pending");
  EXPECT_THAT(plan.creates, IsEmpty()) << "never a lone replacement";
  EXPECT_EQ(plan.deletes.size(), 2u);
  ASSERT_EQ(plan.events.size(), 1u);
  EXPECT_EQ(plan.events[0].reason, "GangRestart");
  EXPECT_THAT(plan.events[0].message,
              HasSubstr("pod mlp-worker-1 of the running gang was deleted or lost"));
  c.Apply(plan);
  c.Settle();
  EXPECT_THAT(c.RestartGenerations(), ElementsAre("1", "1", "1"));
}

TEST(GangRestartTest, APodBeingDeletedUnderARunningGangRestartsTheGang) {
  Cluster c = RunningJob();
  (*c.Pod("mlp-ps-0"))["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z";
  Plan plan = c.Reconcile();
  EXPECT_EQ((*plan.status)["restarts"], 1);
  EXPECT_THAT(plan.creates, IsEmpty());
}

TEST(GangRestartTest, BackoffLimitZeroFailsOnFirstFailure) {
  Cluster c = RunningJob(/*backoff_limit=*/0);
  c.FailPod("mlp-ps-0");
  Plan plan = c.Reconcile();
  EXPECT_EQ((*plan.status)["phase"], "Failed");
  EXPECT_EQ(FindCondition(*plan.status, kConditionFailed)->at("reason"), "BackoffLimitExceeded");
}

TEST(GangRestartTest, PendingPodFailingBeforeRunningAlsoRestarts) {
  Json job = ShorthandJob(2);
  Cluster c(job);
  c.Settle();
  c.FailPod("mlp-worker-0", "ErrImagePull", 1);
  Plan plan = c.Reconcile();
  EXPECT_EQ((*plan.status)["restarts"], 1);
  // Never ran: no Running condition is invented.
  EXPECT_EQ(FindCondition(*plan.status, kConditionRunning), nullptr);
}

TEST(AssessGangTest, SortsPodsIntoCurrentAndStale) {
  Json job = ShorthandJob(1);
  auto pod = [](const char* name, const char* gen, const char* hash, const char* phase) {
    return Json{
        {"metadata",
         {{"name", name},
          {"annotations", {{"hptrain.io/restart-generation", gen}, {"hptrain.io/spec-hash", hash}}},
          {"ownerReferences", Json::array({OwnerReference("mlp", testing::kJobUid)})}}},
        {"status", {{"phase", phase}}}};
  };
  std::vector<Json> pods = {pod("mlp-ps-0", "1", "h", "Failed"),
                            pod("mlp-worker-0", "0", "h", "Failed"),
                            pod("mlp-worker-5", "1", "h", "Running")};
  ObservedPods observed = ObservePods(pods, job);
  GangAssessment gang = AssessGang(0, observed, {"mlp-ps-0", "mlp-worker-0"}, "h");
  EXPECT_EQ(gang.restarts, 1);  // from the pods
  ASSERT_EQ(gang.current.size(), 1u);
  EXPECT_EQ(gang.current[0]->name, "mlp-ps-0");
  ASSERT_NE(gang.failed, nullptr);
  EXPECT_EQ(gang.failed->name, "mlp-ps-0");
  ASSERT_EQ(gang.stale.size(), 2u);
  EXPECT_EQ(gang.stale[0]->name, "mlp-worker-0");  // older generation
  EXPECT_EQ(gang.stale[1]->name, "mlp-worker-5");  // not desired
  EXPECT_EQ(AssessGang(0, observed, {"mlp-ps-0"}, "other").current.size(), 0u);
  EXPECT_EQ(RestartsInForce(4, observed), 4);
}

}  // namespace
}  // namespace hptrain::reconcile
