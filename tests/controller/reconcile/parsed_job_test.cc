#include "controller/reconcile/parsed_job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "controller/reconcile/pod_paths.h"
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

// Every file a pod reads is named by an absolute path on Kubernetes: a relative one would
// resolve under the container's working directory (/tmp, a scratch volume in hptrain's images).
// Each such path field, relative, is refused with its field path and its value; absolute,
// accepted. A file the pods write may be relative (it lands in the scratch /tmp).
struct PathCase {
  const char* field;
  const char* relative;
  const char* absolute;
  void (*set)(Json* spec, const char* path);
};

const PathCase kPathCases[] = {
    {"spec.model.torchscript", "models/lenet5.pt", "/models/lenet5.pt",
     [](Json* spec, const char* path) { (*spec)["model"] = {{"torchscript", path}}; }},
    {"spec.dataset.path", "data/x", "/data/x",
     [](Json* spec, const char* path) {
       (*spec)["dataset"] = {{"name", "mine"}, {"format", "npy"}, {"path", path}};
     }},
    {"spec.strategy.predictor", "examples/predictors/lenet5-fashion-mnist.mp2p",
     "/usr/share/hptrain/predictors/lenet5-fashion-mnist.mp2p",
     [](Json* spec, const char* path) {
       (*spec)["strategy"] = {{"type", "mp2"}, {"pushRatio", 0.1}, {"predictor", path}};
     }},
};

TEST(ParseTrainingJobTest, RelativePathsAreRefusedWithTheirFieldPath) {
  for (const PathCase& c : kPathCases) {
    SCOPED_TRACE(c.field);
    Json object = ShorthandJob(2);
    c.set(&object["spec"], c.relative);
    absl::StatusOr<ParsedJob> job = ParseTrainingJob(object);
    ASSERT_FALSE(job.ok()) << "a relative " << c.field << " is accepted";
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(job.status().message());
    EXPECT_THAT(message, ::testing::StartsWith(absl::StrCat(
                             c.field, ": must be an absolute path in a pod (")));
    EXPECT_THAT(message, ::testing::EndsWith(absl::StrCat("got \"", c.relative, "\"")));
    EXPECT_EQ(message.find('\n'), std::string::npos);

    object = ShorthandJob(2);
    c.set(&object["spec"], c.absolute);
    job = ParseTrainingJob(object);
    EXPECT_TRUE(job.ok()) << job.status();
  }
}

TEST(ParseTrainingJobTest, ThePredictorZeroNamesNoFileAndOutputsMayBeRelative) {
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(testing::ShardedJob("mp2", 1));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->spec.strategy.String("predictor"), "zero");
  Json object = ShorthandJob(2);
  object["spec"]["collect"] = {{"path", "snapshots.mp2d"}};
  object["spec"]["checkpoint"] = {{"path", "mlp.ckpt"}};
  job = ParseTrainingJob(object);
  EXPECT_TRUE(job.ok()) << job.status();
}

TEST(ParseTrainingJobTest, TheRelativePathMessageNamesTheShippedPredictor) {
  Json object = ShorthandJob(2);
  kPathCases[2].set(&object["spec"], "lenet5.mp2p");
  EXPECT_THAT(std::string(ParseTrainingJob(object).status().message()),
              HasSubstr(kShippedPredictorPath));
}

// The container the controller rewrites (named like its role, else the first) may not set
// command anywhere, nor args where it runs hptrain; other containers may.
TEST(ParseTrainingJobTest, CommandOnTheRewrittenContainerIsRefused) {
  Json object = ShorthandJob(2);
  object["spec"]["workers"]["template"]["spec"]["containers"][0]["command"] =
      Json::array({"sleep", "infinity"});
  EXPECT_EQ(ParseTrainingJob(object).status().message(),
            "spec.workers.template.spec.containers[0].command: is set by the controller (it runs "
            "`hptrain worker`, which reads the job's spec from the job Secret); remove it");

  // A sidecar first: the container named "worker" is the rewritten one.
  object = testing::HeteroJob();
  Json& containers = object["spec"]["workerGroups"][0]["template"]["spec"]["containers"];
  containers.insert(containers.begin(), Json::parse(R"({"name": "log-shipper",
      "image": "fluent-bit:3", "command": ["/fluent-bit/bin/fluent-bit"], "args": ["-c", "x"]})"));
  ASSERT_TRUE(ParseTrainingJob(object).ok()) << ParseTrainingJob(object).status();
  containers[1]["args"] = Json::array({"--verbose"});
  EXPECT_EQ(ParseTrainingJob(object).status().message(),
            "spec.workerGroups[0].template.spec.containers[1].args: is set by the controller "
            "(`hptrain worker` takes every setting from the job's spec); remove it");

  // No container named "worker": the first is the rewritten one.
  object = testing::HeteroJob();
  object["spec"]["workerGroups"][1]["template"]["spec"]["containers"][0]["command"] =
      Json::array({"hptrain", "worker"});
  EXPECT_THAT(std::string(ParseTrainingJob(object).status().message()),
              ::testing::StartsWith("spec.workerGroups[1].template.spec.containers[0].command: "
                                    "is set by the controller"));

  // The ps template's "ps" container.
  object = testing::HeteroJob();
  object["spec"]["ps"]["template"]["spec"]["containers"][0]["args"] = Json::array({"--linger=9"});
  EXPECT_THAT(std::string(ParseTrainingJob(object).status().message()),
              ::testing::StartsWith("spec.ps.template.spec.containers[0].args: is set by the "
                                    "controller (`hptrain ps` takes"));

  // An empty list, or null, sets nothing.
  object = ShorthandJob(2);
  object["spec"]["workers"]["template"]["spec"]["containers"][0]["command"] = Json::array();
  object["spec"]["workers"]["template"]["spec"]["containers"][0]["args"] = nullptr;
  EXPECT_TRUE(ParseTrainingJob(object).ok()) << ParseTrainingJob(object).status();
}

TEST(ParseTrainingJobTest, ATrainerJobsTemplateMayAddArgsButNotACommand) {
  // TrainerJob's group "big" adds args after spec.trainer.args.
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(testing::TrainerJob());
  ASSERT_TRUE(job.ok()) << job.status();
  Json object = testing::TrainerJob();
  object["spec"]["workerGroups"][1]["template"]["spec"]["containers"][0]["command"] =
      Json::array({"python3", "other.py"});
  EXPECT_EQ(ParseTrainingJob(object).status().message(),
            "spec.workerGroups[1].template.spec.containers[0].command: is set by the controller "
            "(to spec.trainer.command); remove it");
}

TEST(ParseTrainingJobTest, NotAnObject) {
  EXPECT_FALSE(ParseTrainingJob(Json::array()).ok());
  EXPECT_FALSE(ParseTrainingJob(Json()).ok());
}

}  // namespace
}  // namespace hptrain::reconcile
