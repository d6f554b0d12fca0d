// The reconciler's phase machine: creation, running, success, invalid specs, spec changes,
// foreign objects, status fields.
#include "controller/reconcile/reconciler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "controller/reconcile/conditions.h"
#include "controller/reconcile/kube_time.h"
#include "controller/reconcile/labels.h"
#include "tests/controller/reconcile/testing/cluster.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile {
namespace {

using testing::Cluster;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::ShorthandJob;

std::vector<std::string> Reasons(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const Event& e : events) out.push_back(e.reason);
  return out;
}

std::vector<std::string> CreatedNames(const Plan& plan) {
  std::vector<std::string> out;
  for (const Json& o : plan.creates) out.push_back(StringAt(o, {"kind"}) + "/" + Name(o));
  return out;
}

std::vector<std::string> DeletedNames(const Plan& plan) {
  std::vector<std::string> out;
  for (const ObjectRef& r : plan.deletes) out.push_back(r.kind + "/" + r.name);
  return out;
}

const Json& ConditionOf(const Json& status, const char* type) {
  static const Json kMissing;
  const Json* c = FindCondition(status, type);
  return c == nullptr ? kMissing : *c;
}

TEST(ReconcilerTest, FirstPassCreatesEverythingInOrder) {
  Cluster c(ShorthandJob(2));
  Plan plan = c.Reconcile();
  EXPECT_THAT(CreatedNames(plan), ElementsAre("Secret/mlp-hptrain", "Service/mlp", "Pod/mlp-ps-0",
                                              "Pod/mlp-worker-0", "Pod/mlp-worker-1"));
  EXPECT_THAT(plan.deletes, IsEmpty());
  ASSERT_TRUE(plan.status.has_value());
  const Json& s = *plan.status;
  EXPECT_EQ(s["phase"], "Pending");
  EXPECT_EQ(s["observedGeneration"], 1);
  EXPECT_EQ(s["replicas"], 2);
  EXPECT_EQ(s["desiredWorkers"], 2);
  EXPECT_EQ(s["readyWorkers"], 0);
  EXPECT_EQ(s["restarts"], 0);
  EXPECT_EQ(s["selector"], "hptrain.io/job=mlp,hptrain.io/role=worker");
  EXPECT_EQ(s["strategy"], "ssgd");
  EXPECT_FALSE(s.contains("startTime"));
  EXPECT_EQ(ConditionOf(s, "Created")["status"], "True");
  EXPECT_EQ(ConditionOf(s, "Running"), Json());
  ASSERT_EQ(plan.events.size(), 1u);
  EXPECT_EQ(plan.events[0].type, "Normal");
  EXPECT_EQ(plan.events[0].reason, "Created");
  EXPECT_FALSE(plan.requeue_after.has_value());
  EXPECT_FALSE(plan.delete_job.has_value());
  ASSERT_EQ(s["workers"].size(), 2u);
  EXPECT_EQ(s["workers"][1], Json::parse(R"({"name": "mlp-worker-1", "group": "worker",
      "rank": 1, "node": "", "device": "cpu", "phase": "Pending", "samplesPerSecond": 0.0,
      "batchSize": 32})"));

  // Same input, same Plan.
  EXPECT_EQ(c.Reconcile(), plan);
  // After applying it, nothing more to do.
  c.Apply(plan);
  Plan next = c.Reconcile();
  EXPECT_TRUE(next.NoWrites()) << next.DebugString();
}

// Checkpoints that no restarted gang could read are worth a warning; with a volume they resume.
TEST(ReconcilerTest, CheckpointsWithoutAVolumeWarnThatRestartsStartOver) {
  Json job = ShorthandJob(2);
  job["spec"]["checkpoint"] = {{"path", "/checkpoints/mlp.ckpt"}};
  Plan plan = Cluster(job).Reconcile();
  EXPECT_THAT(Reasons(plan.events), ElementsAre("Created", "NoSharedCheckpoint"));
  EXPECT_EQ(plan.events[1].type, "Warning");
  job["spec"]["checkpoint"]["volume"] = {{"persistentVolumeClaim", {{"claimName", "ckpt"}}}};
  EXPECT_THAT(Reasons(Cluster(job).Reconcile().events), ElementsAre("Created"));
}

TEST(ReconcilerTest, RunningOnceEveryPodRuns) {
  Cluster c(ShorthandJob(2));
  c.Settle();
  c.SetPodPhase("mlp-ps-0", "Running");
  c.SetPodPhase("mlp-worker-0", "Running");
  Plan plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Pending");
  EXPECT_EQ((*plan.status)["readyWorkers"], 1);
  EXPECT_THAT(plan.events, IsEmpty());
  c.Apply(plan);

  c.Advance(absl::Seconds(30));
  c.SetPodPhase("mlp-worker-1", "Running");
  plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  const Json& s = *plan.status;
  EXPECT_EQ(s["phase"], "Running");
  EXPECT_EQ(s["startTime"], FormatKubeTime(c.now()));
  EXPECT_EQ(s["readyWorkers"], 2);
  EXPECT_EQ(ConditionOf(s, "Running")["status"], "True");
  EXPECT_EQ(ConditionOf(s, "Running")["lastTransitionTime"], FormatKubeTime(c.now()));
  EXPECT_THAT(Reasons(plan.events), ElementsAre("Running"));
  EXPECT_EQ(s["workers"][0]["phase"], "Running");
  EXPECT_NE(s["workers"][0]["node"], "");
  c.Apply(plan);

  // Later passes change nothing: startTime and lastTransitionTime stay.
  c.Advance(absl::Minutes(10));
  EXPECT_TRUE(c.Reconcile().NoWrites()) << c.Reconcile().DebugString();
}

TEST(ReconcilerTest, PsFinishingEarlyIsNotAFailure) {
  Cluster c(ShorthandJob(2));
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  c.SetPodPhase("mlp-ps-0", "Succeeded");
  Plan plan = c.Reconcile();
  EXPECT_THAT(plan.deletes, IsEmpty());
  EXPECT_TRUE(plan.NoWrites()) << plan.DebugString();
  EXPECT_EQ(c.status()["phase"], "Running");
}

TEST(ReconcilerTest, SucceededWhenEveryWorkerSucceeded) {
  Cluster c(ShorthandJob(2));
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  c.Advance(absl::Hours(1));
  c.SetPodPhase("mlp-worker-0", "Succeeded");
  EXPECT_EQ(c.Reconcile().status.value_or(Json())["phase"], "Running");
  c.SetPodPhase("mlp-worker-1", "Succeeded");
  Plan plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Succeeded");
  EXPECT_EQ((*plan.status)["completionTime"], FormatKubeTime(c.now()));
  EXPECT_EQ(ConditionOf(*plan.status, "Succeeded")["status"], "True");
  EXPECT_EQ(ConditionOf(*plan.status, "Running")["status"], "False");
  EXPECT_EQ(ConditionOf(*plan.status, "Running")["reason"], "Succeeded");
  EXPECT_THAT(DeletedNames(plan), ElementsAre("Pod/mlp-ps-0"));
  EXPECT_THAT(plan.creates, IsEmpty());
  EXPECT_THAT(Reasons(plan.events), ElementsAre("Succeeded"));
  EXPECT_EQ(plan.events[0].message, "all 2 workers finished successfully");
  c.Apply(plan);
  c.FinishDeletions();
  // Terminal: nothing more, the workers stay for their logs, no TTL.
  Plan after = c.Reconcile();
  EXPECT_TRUE(after.NoWrites()) << after.DebugString();
  EXPECT_FALSE(after.requeue_after.has_value());
  EXPECT_THAT(c.PodNames(), ElementsAre("mlp-worker-0", "mlp-worker-1"));
}

TEST(ReconcilerTest, InvalidSpecFailsWithoutCreatingAnything) {
  for (const char* field : {"globalBatchSize", "model"}) {
    SCOPED_TRACE(field);
    Json job = ShorthandJob(4);
    if (std::string(field) == "model") {
      job["spec"]["model"] = {{"name", "transformer-xl"}};
    } else {
      job["spec"]["globalBatchSize"] = 3;  // < 4 workers
    }
    Cluster c(job);
    Plan plan = c.Reconcile();
    EXPECT_THAT(plan.creates, IsEmpty());
    ASSERT_TRUE(plan.status.has_value());
    const Json& s = *plan.status;
    EXPECT_EQ(s["phase"], "Failed");
    EXPECT_EQ(s["observedGeneration"], 1);
    const Json& failed = ConditionOf(s, "Failed");
    EXPECT_EQ(failed["status"], "True");
    EXPECT_EQ(failed["reason"], "InvalidSpec");
    ASSERT_EQ(plan.events.size(), 1u);
    EXPECT_EQ(plan.events[0].type, "Warning");
    EXPECT_EQ(plan.events[0].reason, "InvalidSpec");
    EXPECT_EQ(plan.events[0].message, failed["message"]);
    if (std::string(field) == "model") {
      EXPECT_THAT(plan.events[0].message, HasSubstr("spec.model.name: unknown model"));
    } else {
      EXPECT_THAT(plan.events[0].message, HasSubstr("spec.globalBatchSize"));
    }
    c.Apply(plan);
    EXPECT_TRUE(c.Reconcile().NoWrites());
    EXPECT_EQ(c.events().size(), 1u);
  }
}

TEST(ReconcilerTest, SpecEditedIntoInvalidDeletesPods) {
  Cluster c(ShorthandJob(2));
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  c.job()["spec"]["globalBatchSize"] = 1;
  c.job()["metadata"]["generation"] = 2;
  Plan plan = c.Reconcile();
  EXPECT_THAT(DeletedNames(plan),
              ElementsAre("Pod/mlp-ps-0", "Pod/mlp-worker-0", "Pod/mlp-worker-1"));
  EXPECT_EQ((*plan.status)["phase"], "Failed");
  EXPECT_EQ((*plan.status)["observedGeneration"], 2);
  EXPECT_EQ(ConditionOf(*plan.status, "Running")["reason"], "InvalidSpec");
  c.Apply(plan);
  EXPECT_EQ(c.Settle(), 2);
  EXPECT_THAT(c.PodNames(), IsEmpty());
  // Terminal: fixing the spec does not revive it.
  c.job()["spec"]["globalBatchSize"] = 64;
  EXPECT_TRUE(c.Reconcile().NoWrites());
}

TEST(ReconcilerTest, ScalingRecreatesTheGangWithoutCountingARestart) {
  Cluster c(ShorthandJob(2));
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  std::string old_hash = Annotation(*c.Pod("mlp-worker-0"), kSpecHashAnnotation);
  testing::Scale(&c.job(), 3);
  Plan plan = c.Reconcile();
  EXPECT_THAT(DeletedNames(plan), ElementsAre("Pod/mlp-ps-0", "Pod/mlp-worker-0",
                                              "Pod/mlp-worker-1", "Secret/mlp-hptrain"));
  EXPECT_THAT(plan.creates, IsEmpty());
  EXPECT_THAT(Reasons(plan.events), ElementsAre("SpecChanged"));
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Pending");
  EXPECT_EQ((*plan.status)["replicas"], 3);
  EXPECT_EQ((*plan.status)["restarts"], 0);
  EXPECT_EQ(ConditionOf(*plan.status, "Running")["reason"], "SpecChanged");

  c.Apply(plan);
  c.Settle();
  EXPECT_THAT(c.PodNames(),
              ElementsAre("mlp-ps-0", "mlp-worker-0", "mlp-worker-1", "mlp-worker-2"));
  std::string new_hash = Annotation(*c.Pod("mlp-worker-2"), kSpecHashAnnotation);
  EXPECT_NE(new_hash, old_hash);
  EXPECT_EQ(Annotation(*c.Object("Secret", "mlp-hptrain"), kSpecHashAnnotation), new_hash);
  EXPECT_EQ(c.status()["restarts"], 0);
  EXPECT_THAT(Reasons(c.events()), ElementsAre("Created", "Running", "SpecChanged"));
  c.SetAllPods("Running");
  c.Settle();
  EXPECT_EQ(c.status()["phase"], "Running");
  EXPECT_EQ(c.status()["readyWorkers"], 3);
}

TEST(ReconcilerTest, RunPolicyEditDoesNotTouchPods) {
  Cluster c(ShorthandJob(2));
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  testing::SetRunPolicy(&c.job(), "backoffLimit", 7);
  Plan plan = c.Reconcile();
  EXPECT_THAT(plan.deletes, IsEmpty());
  EXPECT_THAT(plan.creates, IsEmpty());
  EXPECT_THAT(plan.events, IsEmpty());
  ASSERT_TRUE(plan.status.has_value());  // observedGeneration moves
  EXPECT_EQ((*plan.status)["observedGeneration"], 2);
}

TEST(ReconcilerTest, ForeignObjectsAreNeitherAdoptedNorReplaced) {
  Cluster c(ShorthandJob(2));
  // Left over from an earlier job of the same name, being garbage collected.
  Json stray = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"name", "mlp-worker-1"},
                  {"namespace", "team-a"},
                  {"uid", "x"},
                  {"labels", {{"hptrain.io/job", "mlp"}}},
                  {"ownerReferences", Json::array({OwnerReference("mlp", "old")})}}},
                {"status", {{"phase", "Failed"}}}};
  c.observed().pods.push_back(stray);
  Plan plan = c.Reconcile();
  EXPECT_THAT(plan.deletes, IsEmpty());
  EXPECT_THAT(CreatedNames(plan),
              ElementsAre("Secret/mlp-hptrain", "Service/mlp", "Pod/mlp-ps-0", "Pod/mlp-worker-0"));
  EXPECT_EQ((*plan.status)["restarts"], 0);
  c.Apply(plan);
  EXPECT_TRUE(c.Reconcile().NoWrites());
  // Once it is gone, the missing worker is created.
  c.observed().pods.erase(c.observed().pods.begin());
  EXPECT_THAT(CreatedNames(c.Reconcile()), ElementsAre("Pod/mlp-worker-1"));
}

TEST(ReconcilerTest, ForeignSecretBlocksPods) {
  Cluster c(ShorthandJob(2));
  c.observed().secrets.push_back({{"metadata", {{"name", "mlp-hptrain"}, {"uid", "s"}}}});
  Plan plan = c.Reconcile();
  EXPECT_THAT(CreatedNames(plan), ElementsAre("Service/mlp"));
  EXPECT_THAT(plan.deletes, IsEmpty());
}

TEST(ReconcilerTest, MissingTokenCreatesNoSecretAndNoPods) {
  Cluster c(ShorthandJob(2));
  c.observed().token.clear();
  EXPECT_THAT(CreatedNames(c.Reconcile()), ElementsAre("Service/mlp"));
}

// A pod missing before the gang ever ran in full is created (it is one still being made); once
// the gang has run, a missing pod restarts it (gang_restart_test.cc).
TEST(ReconcilerTest, PodMissingBeforeTheGangRanIsCreated) {
  Cluster c(ShorthandJob(2));
  c.Settle();
  c.SetPodPhase("mlp-ps-0", "Running");
  c.SetPodPhase("mlp-worker-0", "Running");
  c.Settle();
  ASSERT_EQ(c.status()["phase"], "Pending");
  c.observed().pods.erase(c.observed().pods.begin() + 2);  // mlp-worker-1 vanishes
  Plan plan = c.Reconcile();
  EXPECT_THAT(CreatedNames(plan), ElementsAre("Pod/mlp-worker-1"));
  EXPECT_THAT(plan.events, IsEmpty());
  c.Apply(plan);
  EXPECT_EQ(c.status()["phase"], "Pending");
  EXPECT_EQ(c.status()["restarts"], 0);
}

TEST(ReconcilerTest, JobBeingDeletedIsLeftAlone) {
  Cluster c(ShorthandJob(2));
  c.job()["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z";
  EXPECT_TRUE(c.Reconcile().NoWrites());
}

TEST(ReconcilerTest, StatusKeepsOthersFieldsAndTakesMetrics) {
  Cluster c(ShorthandJob(2));
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  Json& status = c.job()["status"];
  status["allocationGeneration"] = 4;
  status["lastRebalanceTime"] = "2027-01-15T07:00:00Z";
  status["workers"][0]["batchSize"] = 40;
  status["workers"][1]["batchSize"] = 24;
  status["custom"] = "kept";
  c.observed().worker_metrics["mlp-worker-0"] = {120.5, 300, 2};
  c.observed().worker_metrics["mlp-worker-1"] = {80.0, 299, 2};
  Plan plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  const Json& s = *plan.status;
  EXPECT_EQ(s["allocationGeneration"], 4);
  EXPECT_EQ(s["lastRebalanceTime"], "2027-01-15T07:00:00Z");
  EXPECT_EQ(s["custom"], "kept");
  EXPECT_EQ(s["workers"][0]["batchSize"], 40);
  EXPECT_EQ(s["workers"][1]["batchSize"], 24);
  EXPECT_EQ(s["workers"][0]["samplesPerSecond"], 120.5);
  EXPECT_EQ(s["samplesPerSecond"], 200.5);
  EXPECT_EQ(s["step"], 300);
  EXPECT_EQ(s["epoch"], 2);
  c.Apply(plan);

  // Without fresh metrics running workers keep their last throughput and step.
  c.observed().worker_metrics.clear();
  EXPECT_TRUE(c.Reconcile().NoWrites());
  // A worker that stops running reads 0.
  c.SetPodPhase("mlp-worker-1", "Pending");
  plan = c.Reconcile();
  EXPECT_EQ((*plan.status)["workers"][1]["samplesPerSecond"], 0.0);
  EXPECT_EQ((*plan.status)["samplesPerSecond"], 120.5);
  EXPECT_EQ((*plan.status)["step"], 300);

  // Batch sizes that no longer add up to the global batch fall back to the initial split.
  c.job()["status"]["workers"][1]["batchSize"] = 1;
  plan = c.Reconcile();
  EXPECT_EQ((*plan.status)["workers"][0]["batchSize"], 32);
  EXPECT_EQ((*plan.status)["workers"][1]["batchSize"], 32);
}

TEST(ReconcilerTest, StatusTakesTheMeanTrainingLossAndRankZerosMetric) {
  Cluster c(ShorthandJob(3));
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  // Before any step or evaluation the workers read 0 for both: nothing is reported.
  for (int r = 0; r < 3; ++r) {
    WorkerMetrics& m = c.observed().worker_metrics["mlp-worker-" + std::to_string(r)];
    m.step = 0;
    m.train_loss = 0.0;
    m.eval_accuracy = 0.0;
  }
  Plan plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_FALSE(plan.status->contains("trainLoss")) << plan.status->dump();
  EXPECT_FALSE(plan.status->contains("evaluation")) << plan.status->dump();
  c.Apply(plan);

  // Workers 0 and 2 did steps (worker 1 has not yet): the mean of their losses; rank 0's
  // accuracy, whatever the others report.
  c.observed().worker_metrics["mlp-worker-0"] = {10, 7, 0, -1, 1.5, 0.75, {}};
  c.observed().worker_metrics["mlp-worker-2"] = {10, 6, 0, -1, 0.5, 0.25, {}};
  plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["trainLoss"], 1.0);
  EXPECT_EQ((*plan.status)["evaluation"], (Json{{"metric", "accuracy"}, {"value", 0.75}}));
  c.Apply(plan);

  // hptrain_eval_metric{metric="accuracy"} wins over hptrain_eval_accuracy; without fresh
  // readings the last values stay.
  c.observed().worker_metrics["mlp-worker-0"].eval_metrics = {{"accuracy", 0.8}, {"top5", 0.99}};
  plan = c.Reconcile();
  EXPECT_EQ((*plan.status)["evaluation"]["value"], 0.8);
  c.Apply(plan);
  c.observed().worker_metrics.clear();
  EXPECT_TRUE(c.Reconcile().NoWrites());
  EXPECT_EQ(c.job()["status"]["trainLoss"], 1.0);
  EXPECT_EQ(c.job()["status"]["evaluation"]["value"], 0.8);
}

TEST(ReconcilerTest, TheEvaluationNamesTheTasksPrimaryMetric) {
  EXPECT_EQ(PrimaryMetric("classification"), "accuracy");
  EXPECT_EQ(PrimaryMetric("multilabel"), "f1");
  EXPECT_EQ(PrimaryMetric("regression"), "rmse");
  EXPECT_EQ(PrimaryMetric("torchscript"), "metric");

  Json job = ShorthandJob(2);
  job["spec"]["task"] = "multilabel";
  Cluster c(job);
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  // A multilabel job's accuracy gauge is not its metric.
  c.observed().worker_metrics["mlp-worker-0"] = {10, 7, 0, -1, 0.3, 0.9, {{"map", 0.4}}};
  Plan plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_FALSE(plan.status->contains("evaluation")) << plan.status->dump();
  c.Apply(plan);
  c.observed().worker_metrics["mlp-worker-0"].eval_metrics["f1"] = 0.6;
  plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["evaluation"], (Json{{"metric", "f1"}, {"value", 0.6}}));
}

TEST(ReconcilerTest, HeterogeneousWorkersReportGroupAndDevice) {
  Cluster c(testing::HeteroJob());
  Plan plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  const Json& workers = (*plan.status)["workers"];
  ASSERT_EQ(workers.size(), 3u);
  EXPECT_EQ(workers[0]["group"], "a100");
  EXPECT_EQ(workers[0]["device"], "gpu x1 (NVIDIA-A100-SXM4-40GB)");
  EXPECT_EQ(workers[2]["group"], "t4");
  EXPECT_EQ(workers[2]["device"], "gpu x1 (Tesla-T4)");
  EXPECT_EQ(workers[2]["batchSize"], 170);  // 512 split 171/171/170
  EXPECT_EQ((*plan.status)["strategy"], "hps");
  EXPECT_EQ((*plan.status)["observedGeneration"], 3);
}

std::vector<std::string> ServiceNames(Cluster& c) {
  std::vector<std::string> out;
  for (const Json& service : c.observed().services) out.push_back(Name(service));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ReconcilerTest, PsShardsGetTheirPodsAndServices) {
  Cluster c(testing::ShardedJob("hps", 2));
  Plan plan = c.Reconcile();
  EXPECT_THAT(
      CreatedNames(plan),
      ElementsAre("Secret/mlp-hptrain", "Service/mlp", "Service/mlp-ps-0", "Service/mlp-ps-1",
                  "Pod/mlp-ps-0", "Pod/mlp-ps-1", "Pod/mlp-worker-0", "Pod/mlp-worker-1"));
  ASSERT_EQ(plan.events.size(), 1u);
  EXPECT_EQ(plan.events[0].message,
            "created 2 ps pods, 2 worker pods, Services mlp, mlp-ps-0, mlp-ps-1 and Secret "
            "mlp-hptrain");
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["desiredWorkers"], 2);
  EXPECT_EQ((*plan.status)["workers"].size(), 2u);
  c.Apply(plan);
  EXPECT_TRUE(c.Reconcile().NoWrites()) << c.Reconcile().DebugString();

  // Running only once both shards run too.
  c.SetPodPhase("mlp-ps-0", "Running");
  c.SetPodPhase("mlp-worker-0", "Running");
  c.SetPodPhase("mlp-worker-1", "Running");
  c.Settle();
  EXPECT_EQ(c.status()["phase"], "Pending");
  c.SetPodPhase("mlp-ps-1", "Running");
  c.Settle();
  EXPECT_EQ(c.status()["phase"], "Running");

  // The workers' success is the job's; every shard is then deleted, the Services stay.
  c.SetPodPhase("mlp-worker-0", "Succeeded");
  c.SetPodPhase("mlp-worker-1", "Succeeded");
  plan = c.Reconcile();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Succeeded");
  EXPECT_THAT(DeletedNames(plan), ElementsAre("Pod/mlp-ps-0", "Pod/mlp-ps-1"));
  c.Apply(plan);
  c.FinishDeletions();
  EXPECT_THAT(c.PodNames(), ElementsAre("mlp-worker-0", "mlp-worker-1"));
  EXPECT_THAT(ServiceNames(c), ElementsAre("mlp", "mlp-ps-0", "mlp-ps-1"));
}

TEST(ReconcilerTest, SsgdGetsNoShardServices) {
  Cluster c(ShorthandJob(2));
  c.Settle();
  EXPECT_THAT(ServiceNames(c), ElementsAre("mlp"));
  EXPECT_THAT(c.PodNames(), ElementsAre("mlp-ps-0", "mlp-worker-0", "mlp-worker-1"));
  EXPECT_EQ(c.events()[0].message,
            "created the ps pod, 2 worker pods, Service mlp and Secret mlp-hptrain");
}

TEST(ReconcilerTest, FewerShardsDeleteTheirPodAndService) {
  Cluster c(testing::ShardedJob("ps", 3));
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  EXPECT_THAT(ServiceNames(c), ElementsAre("mlp", "mlp-ps-0", "mlp-ps-1", "mlp-ps-2"));

  c.job()["spec"]["ps"]["shards"] = 2;
  c.job()["metadata"]["generation"] = 2;
  Plan plan = c.Reconcile();
  EXPECT_THAT(DeletedNames(plan),
              ElementsAre("Pod/mlp-ps-0", "Pod/mlp-ps-1", "Pod/mlp-ps-2", "Pod/mlp-worker-0",
                          "Pod/mlp-worker-1", "Secret/mlp-hptrain", "Service/mlp-ps-2"));
  EXPECT_EQ((*plan.status)["restarts"], 0);
  c.Apply(plan);
  c.Settle();
  EXPECT_THAT(c.PodNames(), ElementsAre("mlp-ps-0", "mlp-ps-1", "mlp-worker-0", "mlp-worker-1"));
  EXPECT_THAT(ServiceNames(c), ElementsAre("mlp", "mlp-ps-0", "mlp-ps-1"));

  // A strategy without a parameter server keeps the coordinator's pod and no shard Service.
  c.job()["spec"]["strategy"] = {{"type", "ssgd"}};
  c.job()["spec"].erase("ps");
  c.job()["metadata"]["generation"] = 3;
  c.Settle();
  EXPECT_THAT(c.PodNames(), ElementsAre("mlp-ps-0", "mlp-worker-0", "mlp-worker-1"));
  EXPECT_THAT(ServiceNames(c), ElementsAre("mlp"));
}

TEST(ReconcilerTest, ShardsAboveOneNeedAParameterServerStrategy) {
  Json job = ShorthandJob(2);
  job["spec"]["ps"] = {{"shards", 2}};
  Cluster c(job);
  Plan plan = c.Reconcile();
  EXPECT_THAT(plan.creates, IsEmpty());
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Failed");
  EXPECT_EQ(ConditionOf(*plan.status, "Failed")["message"],
            "spec.ps.shards: 2 needs a parameter-server strategy (ps, hps, mp2), not ssgd");
}

}  // namespace
}  // namespace hptrain::reconcile
