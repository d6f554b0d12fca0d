// After a gang restart the step the new gang resumed from is recorded once, from worker 0 of the
// current gang (resume_record.h).
#include "controller/reconcile/resume_record.h"

#include <gtest/gtest.h>

#include "controller/reconcile/events.h"
#include "controller/reconcile/labels.h"
#include "tests/controller/reconcile/testing/cluster.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile {
namespace {

using testing::Cluster;
using testing::ShorthandJob;

Json CheckpointedJob() {
  Json job = ShorthandJob(2);
  job["spec"]["checkpoint"] = {{"path", "/ckpt/mlp.ckpt"},
                               {"intervalSteps", 10},
                               {"volume", {{"persistentVolumeClaim", {{"claimName", "ckpt"}}}}}};
  return job;
}

int CountEvents(const Cluster& c, const std::string& reason) {
  int n = 0;
  for (const Event& e : c.events()) n += e.reason == reason;
  return n;
}

// Runs the first gang, fails worker 1, and brings the second gang to Running.
void RestartOnce(Cluster* c) {
  c->Settle();
  c->SetAllPods("Running");
  c->Settle();
  c->FailPod("mlp-worker-1", "Error", 1);
  c->Settle(12);
  c->SetAllPods("Running");
  c->Settle();
  ASSERT_EQ(c->status()["restarts"], 1);
  ASSERT_EQ(c->status()["phase"], "Running");
}

TEST(ResumeRecordTest, WorkerZerosResumeStepIsRecordedOncePerRestart) {
  Cluster c(CheckpointedJob());
  ASSERT_NO_FATAL_FAILURE(RestartOnce(&c));
  EXPECT_FALSE(c.status().contains("resume"));  // not reported yet

  c.observed().worker_metrics["mlp-worker-1"].resumed_from_step = 40;  // not worker 0
  EXPECT_TRUE(c.Reconcile().NoWrites());
  c.observed().worker_metrics["mlp-worker-0"].resumed_from_step = 40;
  c.Settle();
  EXPECT_EQ(c.status()["resume"], Json::parse(R"({"restart": 1, "step": 40})"));
  ASSERT_EQ(CountEvents(c, kReasonCheckpointRestored), 1);
  EXPECT_EQ(c.events().back().message,
            "gang restart 1 resumed training from step 40 (checkpoint /ckpt/mlp.ckpt)");
  EXPECT_TRUE(c.Reconcile().NoWrites());  // once
}

TEST(ResumeRecordTest, NoCheckpointYetSaysTrainingStartedOver) {
  Cluster c(CheckpointedJob());
  ASSERT_NO_FATAL_FAILURE(RestartOnce(&c));
  c.observed().worker_metrics["mlp-worker-0"].resumed_from_step = 0;
  c.Settle();
  EXPECT_EQ(c.status()["resume"]["step"], 0);
  EXPECT_NE(c.events().back().message.find("training started over from step 0"),
            std::string::npos);
}

TEST(ResumeRecordTest, NothingForTheFirstGangOrWithoutCheckpoints) {
  Cluster first(CheckpointedJob());
  first.Settle();
  first.SetAllPods("Running");
  first.observed().worker_metrics["mlp-worker-0"].resumed_from_step = 0;
  first.Settle();
  EXPECT_FALSE(first.status().contains("resume"));

  Cluster plain(ShorthandJob(2));
  ASSERT_NO_FATAL_FAILURE(RestartOnce(&plain));
  plain.observed().worker_metrics["mlp-worker-0"].resumed_from_step = 12;
  plain.Settle();
  EXPECT_FALSE(plain.status().contains("resume"));
}

}  // namespace
}  // namespace hptrain::reconcile

namespace hptrain::reconcile {
namespace {

bool WorkersResume(testing::Cluster& c) {
  bool all = true;
  bool any = false;
  for (const std::string& name : c.PodNames()) {
    const Json& pod = *c.Pod(name);
    if (Label(pod, kRoleLabel) != kRoleWorker) continue;
    bool resumes = false;
    for (const Json& var : pod["spec"]["containers"][0]["env"]) {
      resumes = resumes || (var["name"] == "HPTRAIN_RESUME" && var["value"] == "1");
    }
    all = all && resumes;
    any = any || resumes;
  }
  EXPECT_EQ(all, any) << "some workers resume, some do not";
  return all;
}

TEST(SuspendResumeTest, TheGangAfterASuspensionOfAStartedJobResumes) {
  testing::Cluster c(CheckpointedJob());
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  testing::SetRunPolicy(&c.job(), "suspend", true);
  c.Settle(12);
  EXPECT_TRUE(c.PodNames().empty());
  testing::SetRunPolicy(&c.job(), "suspend", false);
  c.Settle(12);
  ASSERT_EQ(c.PodNames().size(), 3u);
  EXPECT_EQ(c.status()["restarts"], 0);
  EXPECT_TRUE(WorkersResume(c));
}

TEST(SuspendResumeTest, AJobSuspendedBeforeItStartedDoesNotPickUpAnOldCheckpoint) {
  Json job = CheckpointedJob();
  testing::SetRunPolicy(&job, "suspend", true);
  testing::Cluster c(job);
  c.Settle();
  testing::SetRunPolicy(&c.job(), "suspend", false);
  c.Settle(12);
  ASSERT_EQ(c.PodNames().size(), 3u);
  EXPECT_FALSE(WorkersResume(c));
}

}  // namespace
}  // namespace hptrain::reconcile
