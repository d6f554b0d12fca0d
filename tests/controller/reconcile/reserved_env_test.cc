// Reserved HPTRAIN_* variables (reserved_env.h): a worker or ps template that sets one is refused
// with the field path, by ParseTrainingJob (so by the webhook too) and by the reconciler, which
// fails the job with reason InvalidSpec; every job, not only spec.trainer ones.
#include "controller/reconcile/reserved_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "controller/reconcile/conditions.h"
#include "controller/reconcile/parsed_job.h"
#include "tests/controller/reconcile/testing/cluster.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile {
namespace {

using ::testing::IsEmpty;

constexpr char kReason[] = " reserved: hptrain sets the HPTRAIN_* variables";

// The message ParseTrainingJob refuses `job` with; "" when it accepts it.
std::string Refusal(const Json& job) {
  absl::StatusOr<ParsedJob> parsed = ParseTrainingJob(job);
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(parsed.status().message());
}

Json Var(const std::string& name) { return Json{{"name", name}, {"value", "1"}}; }

TEST(ReservedEnvTest, AWorkerTemplateVariableIsRefusedWithItsPath) {
  Json job = testing::ShorthandJob(2);
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["env"] =
      Json::array({Var("OMP_NUM_THREADS"), Var("HPTRAIN_RANK")});
  EXPECT_EQ(Refusal(job),
            std::string("spec.workers.template.spec.containers[0].env[1].name: HPTRAIN_RANK is") +
                kReason);
}

TEST(ReservedEnvTest, EveryGroupAndEveryContainerIsChecked) {
  Json job = testing::HeteroJob();
  Json& t4 = job["spec"]["workerGroups"][1]["template"]["spec"];
  t4["containers"].push_back(Json{{"name", "sidecar"}, {"image", "busybox"},
                                  {"env", Json::array({Var("HPTRAIN_ANYTHING")})}});
  EXPECT_EQ(Refusal(job), std::string("spec.workerGroups[1].template.spec.containers[1].env[0]"
                                      ".name: HPTRAIN_ANYTHING is") +
                              kReason);

  job = testing::HeteroJob();
  job["spec"]["workerGroups"][0]["template"]["spec"]["initContainers"] = Json::array(
      {Json{{"name", "fetch"}, {"image", "busybox"}, {"env", Json::array({Var("HPTRAIN_JOB")})}}});
  EXPECT_EQ(Refusal(job), std::string("spec.workerGroups[0].template.spec.initContainers[0]"
                                      ".env[0].name: HPTRAIN_JOB is") +
                              kReason);
}

TEST(ReservedEnvTest, ThePsTemplateIsChecked) {
  Json job = testing::HeteroJob();
  job["spec"]["ps"]["template"]["spec"]["containers"][0]["env"] =
      Json::array({Var("HPTRAIN_PS_SHARD")});
  EXPECT_EQ(Refusal(job),
            std::string("spec.ps.template.spec.containers[0].env[0].name: HPTRAIN_PS_SHARD is") +
                kReason);
}

TEST(ReservedEnvTest, AnEnvFromPrefixInTheReservedRangeIsRefused) {
  Json job = testing::ShorthandJob(2);
  Json& container = job["spec"]["workers"]["template"]["spec"]["containers"][0];
  container["envFrom"] = Json::array({Json{{"configMapRef", {{"name", "settings"}}}},
                                      Json{{"prefix", "HPTRAIN_"},
                                           {"secretRef", {{"name", "keys"}}}}});
  EXPECT_EQ(Refusal(job), std::string("spec.workers.template.spec.containers[0].envFrom[1]"
                                      ".prefix: HPTRAIN_ makes names that are") +
                              kReason);
}

TEST(ReservedEnvTest, OtherNamesAndUncheckableSourcesPass) {
  Json job = testing::ShorthandJob(2);
  Json& container = job["spec"]["workers"]["template"]["spec"]["containers"][0];
  // Only the prefix HPTRAIN_ is hptrain's: names merely containing it, another case, a prefix
  // without the underscore and an envFrom without a prefix (its keys are unknown here).
  container["env"] = Json::array({Var("MY_HPTRAIN_RANK"), Var("hptrain_rank"), Var("HPTRAIN")});
  container["envFrom"] = Json::array({Json{{"configMapRef", {{"name", "settings"}}}},
                                      Json{{"prefix", "APP_"}, {"secretRef", {{"name", "k"}}}}});
  EXPECT_EQ(Refusal(job), "");
  EXPECT_EQ(Refusal(testing::HeteroJob()), "");
  EXPECT_EQ(Refusal(testing::TrainerJob()), "");
}

TEST(ReservedEnvTest, TrainerJobsAreCheckedAlike) {
  Json job = testing::TrainerJob();
  job["spec"]["workerGroups"][1]["template"]["spec"]["containers"][0]["env"] =
      Json::array({Var("HPTRAIN_RESUME")});
  EXPECT_EQ(Refusal(job), std::string("spec.workerGroups[1].template.spec.containers[0].env[0]"
                                      ".name: HPTRAIN_RESUME is") +
                              kReason);
}

TEST(ReservedEnvTest, TheReconcilerFailsTheJobWithThePath) {
  Json job = testing::HeteroJob();
  job["spec"]["workerGroups"][0]["template"]["spec"]["containers"][0]["env"].push_back(
      Var("HPTRAIN_RANK"));
  const std::string message =
      std::string("spec.workerGroups[0].template.spec.containers[0].env[1].name: HPTRAIN_RANK is") +
      kReason;
  testing::Cluster c(job);
  Plan plan = c.Reconcile();
  EXPECT_THAT(plan.creates, IsEmpty());
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Failed");
  const Json* failed = FindCondition(*plan.status, "Failed");
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ((*failed)["reason"], "InvalidSpec");
  EXPECT_EQ((*failed)["message"], message);
  ASSERT_EQ(plan.events.size(), 1u);
  EXPECT_EQ(plan.events[0].type, "Warning");
  EXPECT_EQ(plan.events[0].reason, "InvalidSpec");
  EXPECT_EQ(plan.events[0].message, message);
}

TEST(ReservedEnvTest, CheckReservedEnvNamesTheTemplatePathItIsGiven) {
  Json pod_template = {{"spec", {{"containers", Json::array({Json{
                                                    {"name", "main"},
                                                    {"env", Json::array({Var("HPTRAIN_X")})}}})}}}};
  absl::Status status = CheckReservedEnv(pod_template, "here");
  EXPECT_EQ(status.message(),
            std::string("here.spec.containers[0].env[0].name: HPTRAIN_X is") + kReason);
  // Malformed templates are left to the pod builder, which names the field.
  EXPECT_TRUE(CheckReservedEnv(Json{{"spec", {{"containers", "x"}}}}, "here").ok());
  EXPECT_TRUE(CheckReservedEnv(Json::object(), "here").ok());
}

}  // namespace
}  // namespace hptrain::reconcile
