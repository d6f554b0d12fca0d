#include "controller/reconcile/parsed_job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/job/job_parser.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile {
namespace {

using ::testing::HasSubstr;
using testing::HeteroJob;
using ::testing::Not;
using testing::ShorthandJob;

TEST(ParseTrainingJobTest, ShorthandIsOneGroupNamedWorker) {
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(ShorthandJob(3));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->name, "mlp");
  EXPECT_EQ(job->ns, "team-a");
  EXPECT_EQ(job->uid, testing::kJobUid);
  EXPECT_EQ(job->generation, 1);
  EXPECT_TRUE(job->workers_shorthand);
  ASSERT_EQ(job->spec.worker_groups.size(), 1u);
  EXPECT_EQ(job->spec.worker_groups[0].name, "worker");
  EXPECT_EQ(job->spec.WorldSize(), 3);
  ASSERT_EQ(job->worker_templates.size(), 1u);
  EXPECT_EQ(job->worker_templates[0]["spec"]["containers"][0]["image"], testing::kImage);
  EXPECT_TRUE(job->ps_template.is_null());
  EXPECT_EQ(job->gang, GangScheduler::kNone);
  EXPECT_EQ(job->scheduler_name, "");
}

TEST(ParseTrainingJobTest, GroupsKeepTheirTemplatesInOrder) {
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(HeteroJob());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->workers_shorthand);
  ASSERT_EQ(job->worker_templates.size(), 2u);
  EXPECT_EQ(job->worker_templates[0]["spec"]["nodeSelector"]["nvidia.com/gpu.product"],
            "NVIDIA-A100-SXM4-40GB");
  EXPECT_EQ(job->worker_templates[1]["spec"]["nodeSelector"]["nvidia.com/gpu.product"], "Tesla-T4");
  EXPECT_EQ(job->ps_template["spec"]["containers"][0]["name"], "ps");
  EXPECT_EQ(job->spec.run_policy.backoff_limit, 2);
}

TEST(ParseTrainingJobTest, ManifestIsWhatTheRuntimeParses) {
  Json object = ShorthandJob(2);
  object["spec"]["schedulerName"] = "custom";
  object["spec"]["runPolicy"] = {{"backoffLimit", 5}, {"suspend", true}};
  object["status"] = {{"phase", "Running"}};
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(object);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->spec.run_policy.backoff_limit, 5);
  EXPECT_TRUE(job->spec.run_policy.suspend);

  Json manifest = Json::parse(job->manifest);
  EXPECT_EQ(manifest["metadata"], (Json{{"name", "mlp"}, {"namespace", "team-a"}}));
  EXPECT_FALSE(manifest["spec"].contains("runPolicy"));
  EXPECT_EQ(manifest["spec"]["schedulerName"], "custom");  // the runtime reads and ignores it
  EXPECT_FALSE(manifest.contains("status"));
  absl::StatusOr<job::JobSpec> runtime = job::ParseJobText(job->manifest);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  EXPECT_EQ(runtime->WorldSize(), 2);
  EXPECT_EQ(runtime->global_batch_size, 64);
  EXPECT_EQ(runtime->ns, "team-a");
}

TEST(ParseTrainingJobTest, SpecHashFollowsWhatPodsRunNotRunPolicy) {
  std::string base = ParseTrainingJob(ShorthandJob(2))->spec_hash;
  EXPECT_EQ(base.size(), 16u);
  EXPECT_EQ(ParseTrainingJob(ShorthandJob(2))->spec_hash, base);
  EXPECT_NE(ParseTrainingJob(ShorthandJob(3))->spec_hash, base);

  Json suspended = ShorthandJob(2);
  suspended["spec"]["runPolicy"] = {{"suspend", true}, {"backoffLimit", 9}};
  suspended["metadata"]["generation"] = 7;
  suspended["metadata"]["labels"]["other"] = "y";
  EXPECT_EQ(ParseTrainingJob(suspended)->spec_hash, base);
}

TEST(ParseTrainingJobTest, SpecHashIsFnv1a) {
  EXPECT_EQ(SpecHash(""), "cbf29ce484222325");
  EXPECT_EQ(SpecHash("a"), "af63dc4c8601ec8c");
}

TEST(ParseTrainingJobTest, ValidatorErrorsComeWithoutSourcePrefix) {
  Json object = ShorthandJob(2);
  object["spec"]["globalBatchSize"] = 1;
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(object);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(job.status().message()), ::testing::StartsWith("spec.globalBatchSize: "));

  object = ShorthandJob(2);
  object["spec"]["model"]["name"] = "gpt5";
  job = ParseTrainingJob(object);
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(std::string(job.status().message()), HasSubstr("unknown model \"gpt5\""));
}

TEST(ParseTrainingJobTest, GangScheduling) {
  Json object = ShorthandJob(2);
  object["spec"]["gangScheduling"] = {{"provider", "volcano"}};  // not enabled: off
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(object);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->gang, GangScheduler::kNone);
  EXPECT_EQ(job->scheduler_name, "");

  object["spec"]["gangScheduling"] = {{"enabled", true}};  // provider defaults to volcano
  job = ParseTrainingJob(object);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->gang, GangScheduler::kVolcano);
  EXPECT_EQ(job->scheduler_name, "volcano");

  object["spec"]["gangScheduling"] = {{"enabled", true}, {"provider", "scheduler-plugins"}};
  object["spec"]["schedulerName"] = "my-scheduler";
  job = ParseTrainingJob(object);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->gang, GangScheduler::kSchedulerPlugins);
  EXPECT_EQ(job->scheduler_name, "my-scheduler");

  // The runtime parser validates these keys, so both sides refuse the same manifests.
  object["spec"]["gangScheduling"] = {{"enabled", true}, {"provider", "yunikorn"}};
  EXPECT_THAT(std::string(ParseTrainingJob(object).status().message()),
              HasSubstr("spec.gangScheduling.provider: must be volcano or scheduler-plugins"));
  object["spec"]["gangScheduling"] = {{"enabled", true}, {"minMember", 2}};
  EXPECT_THAT(std::string(ParseTrainingJob(object).status().message()),
              HasSubstr("spec.gangScheduling.minMember"));
  object["spec"]["gangScheduling"] = {{"enabled", true}};
  object["spec"]["schedulerName"] = Json::array({1, 2});
  EXPECT_THAT(std::string(ParseTrainingJob(object).status().message()),
              HasSubstr("spec.schedulerName"));
}

TEST(ParseTrainingJobTest, NameMustSuitTheServiceAndPodHostnames) {
  Json object = ShorthandJob(2);
  object["metadata"]["name"] = "1job";
  EXPECT_THAT(std::string(ParseTrainingJob(object).status().message()),
              HasSubstr("metadata.name: \"1job\" must start with a letter"));

  object["metadata"]["name"] = std::string(54, 'a');  // + "-worker-9" = 63: fits
  object["spec"]["workers"]["replicas"] = 10;
  EXPECT_TRUE(ParseTrainingJob(object).ok());
  object["spec"]["workers"]["replicas"] = 11;
  object["spec"]["globalBatchSize"] = 64;
  EXPECT_THAT(std::string(ParseTrainingJob(object).status().message()),
              HasSubstr("metadata.name: too long"));
}

TEST(ParseTrainingJobTest, NotAnObject) {
  EXPECT_FALSE(ParseTrainingJob(Json::array()).ok());
  EXPECT_FALSE(ParseTrainingJob(Json()).ok());
}

}  // namespace
}  // namespace hptrain::reconcile
