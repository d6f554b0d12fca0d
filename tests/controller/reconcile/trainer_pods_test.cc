// The pods of a job with spec.trainer (desired_objects.h): each worker runs the user's program
// (command, args, workingDir) in the user's image, with the HPTRAIN_* environment `hptrain
// worker` reads; the ps pods still run `hptrain ps`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "absl/strings/escaping.h"
#include "controller/reconcile/desired_objects.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile {
namespace {

using testing::TrainerJob;

constexpr char kUserImage[] = "registry.example/team-a/lm:3";
RuntimeImage Runtime() {
  RuntimeImage image("hptrain/runtime:0.1.0");
  image.pull_policy = "IfNotPresent";
  image.pull_secrets = {"registry-key"};
  return image;
}

absl::StatusOr<DesiredObjects> TryBuild(const Json& object, int64_t restart_generation = 0,
                                        const RuntimeImage& default_image = Runtime()) {
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(object);
  if (!job.ok()) return job.status();
  return BuildDesiredObjects(*job, "tok", restart_generation, default_image);
}

DesiredObjects Build(const Json& object, int64_t restart_generation = 0) {
  absl::StatusOr<DesiredObjects> desired = TryBuild(object, restart_generation);
  EXPECT_TRUE(desired.ok()) << desired.status();
  return desired.ok() ? *desired : DesiredObjects{};
}

// The same job without spec.trainer: the built-in trainer, with a model of its own, and without
// the groups' own args (`hptrain worker` takes none: rewritten_container.h).
Json BuiltIn(Json job) {
  job["spec"].erase("trainer");
  job["spec"]["model"] = {{"name", "mlp"}, {"hidden", {16}}};
  for (Json& group : job["spec"]["workerGroups"]) {
    for (Json& container : group["template"]["spec"]["containers"]) container.erase("args");
  }
  return job;
}

const Json& MainContainer(const Json& pod) { return pod["spec"]["containers"][0]; }

std::map<std::string, std::string> EnvOf(const Json& container) {
  std::map<std::string, std::string> env;
  for (const Json& var : container["env"]) {
    env[var["name"].get<std::string>()] = var.value("value", "<from>");
  }
  return env;
}

TEST(TrainerPodsTest, WorkersRunTheUsersProgramInTheUsersImage) {
  DesiredObjects d = Build(TrainerJob());
  ASSERT_EQ(d.pods.size(), 4u);  // lm-ps-0, then the three workers
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE(rank);
    const Json& pod = d.pods[1 + rank];
    EXPECT_EQ(Name(pod), "lm-worker-" + std::to_string(rank));
    ASSERT_EQ(pod["spec"]["containers"].size(), 1u);
    const Json& c = MainContainer(pod);
    EXPECT_EQ(c["name"], "worker");  // group "small" named it "trainer"
    EXPECT_EQ(c["image"], kUserImage);
    // The default image's pull policy and secrets belong to the default image.
    EXPECT_FALSE(c.contains("imagePullPolicy"));
    EXPECT_FALSE(pod["spec"].contains("imagePullSecrets"));
    EXPECT_EQ(c["command"], Json::array({"python3", "-u", "train_lm.py"}));
    // spec.trainer.args, then the template's own (group "big" has some).
    Json args = Json::array({"--corpus", "/data/corpus.txt"});
    if (rank < 2) args.insert(args.end(), {"--log-every", "10"});
    EXPECT_EQ(c["args"], args);
    EXPECT_EQ(c["workingDir"], "/app");
  }
}

TEST(TrainerPodsTest, WorkersGetTheEnvironmentOfHptrainWorker) {
  DesiredObjects d = Build(TrainerJob());
  DesiredObjects built_in = Build(BuiltIn(TrainerJob()));
  ASSERT_EQ(d.pods.size(), 4u);
  ASSERT_EQ(built_in.pods.size(), 4u);
  const char* groups[] = {"big", "big", "small"};
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE(rank);
    const Json& c = MainContainer(d.pods[1 + rank]);
    std::map<std::string, std::string> want = {
        {"HPTRAIN_JOB", "/etc/hptrain/job.yaml"},
        {"HPTRAIN_TOKEN_FILE", "/etc/hptrain/token"},
        {"HPTRAIN_COORDINATOR", "lm-ps-0.lm.team-a.svc:29400"},
        {"HPTRAIN_RANK", std::to_string(rank)},
        {"HPTRAIN_GROUP", groups[rank]},
        {"HPTRAIN_NODE_NAME", "<from>"},
        {"HPTRAIN_PS_HOST", "0.0.0.0"},
        {"HPTRAIN_PS_PORT", "29400"},
        {"HPTRAIN_METRICS_HOST", "0.0.0.0"},
        {"HPTRAIN_METRICS_PORT", "9090"},
        {"HPTRAIN_BIND_HOST", "0.0.0.0"}};
    if (rank < 2) want["PYTHONUNBUFFERED"] = "1";
    EXPECT_EQ(EnvOf(c), want);
    for (const Json& var : c["env"]) {
      if (var["name"] != "HPTRAIN_NODE_NAME") continue;
      EXPECT_EQ(var["valueFrom"], Json::parse(R"({"fieldRef": {"fieldPath": "spec.nodeName"}})"));
    }
    // Exactly what the built-in trainer's worker gets, in the same order.
    EXPECT_EQ(c["env"], MainContainer(built_in.pods[1 + rank])["env"]);
    // HPTRAIN_JOB and HPTRAIN_TOKEN_FILE are files of the mounted Secret.
    EXPECT_EQ(c["volumeMounts"][0], Json::parse(R"({"name": "hptrain-job",
                                                    "mountPath": "/etc/hptrain",
                                                    "readOnly": true})"));
    EXPECT_EQ(c["ports"], Json::parse(R"([{"name": "metrics", "containerPort": 9090,
                                           "protocol": "TCP"}])"));
  }
  // The job file the program reads names its own spec.trainer.
  std::string manifest;
  ASSERT_TRUE(absl::Base64Unescape(d.secret["data"]["job.yaml"].get<std::string>(), &manifest));
  const Json job_file = Json::parse(manifest);
  EXPECT_EQ(job_file["spec"]["trainer"], TrainerJob()["spec"]["trainer"]);
}

TEST(TrainerPodsTest, ResumeAndTlsReachTheProgramAsForHptrainWorker) {
  Json job = TrainerJob();
  job["spec"]["checkpoint"] = {{"path", "/ckpt/lm.ckpt"}};
  job["spec"]["security"] = {{"tls", {{"enabled", true}, {"secretName", "lm-tls"}}}};
  for (int64_t generation : {0, 1}) {
    SCOPED_TRACE(generation);
    DesiredObjects d = Build(job, generation);
    DesiredObjects built_in = Build(BuiltIn(job), generation);
    ASSERT_EQ(d.pods.size(), 4u);
    for (int rank = 0; rank < 3; ++rank) {
      const Json& c = MainContainer(d.pods[1 + rank]);
      std::map<std::string, std::string> env = EnvOf(c);
      EXPECT_EQ(env["HPTRAIN_TLS_DIR"], "/etc/hptrain/tls");
      if (generation == 0) {
        EXPECT_EQ(env.count("HPTRAIN_RESUME"), 0u);  // a first gang never resumes
      } else {
        EXPECT_EQ(env["HPTRAIN_RESUME"], "1");
      }
      EXPECT_EQ(c["env"], MainContainer(built_in.pods[1 + rank])["env"]);
    }
  }
}

TEST(TrainerPodsTest, WorkersGetReadinessButNoLivenessProbeOfTheirOwn) {
  DesiredObjects d = Build(TrainerJob());
  const Json& c = MainContainer(d.pods[1]);
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_FALSE(c.contains("livenessProbe"));
  // The built-in worker and the ps keep theirs; a template's own probe stays.
  EXPECT_EQ(MainContainer(Build(BuiltIn(TrainerJob())).pods[1])["livenessProbe"]["httpGet"]["path"],
            "/healthz");
  EXPECT_EQ(MainContainer(d.pods[0])["livenessProbe"]["httpGet"]["path"], "/healthz");
  Json job = TrainerJob();
  const Json probe = Json::parse(R"({"exec": {"command": ["true"]}, "periodSeconds": 60})");
  job["spec"]["workerGroups"][0]["template"]["spec"]["containers"][0]["livenessProbe"] = probe;
  EXPECT_EQ(MainContainer(Build(job).pods[1])["livenessProbe"], probe);
}

TEST(TrainerPodsTest, ThePsPodRunsHptrainPsInTheRuntimeImage) {
  DesiredObjects d = Build(TrainerJob());
  const Json& ps = d.pods[0];
  EXPECT_EQ(Name(ps), "lm-ps-0");
  const Json& c = MainContainer(ps);
  EXPECT_EQ(c["name"], "ps");
  EXPECT_EQ(c["command"], Json::array({"hptrain", "ps"}));
  EXPECT_FALSE(c.contains("args"));
  EXPECT_FALSE(c.contains("workingDir"));
  // Not the first group's image, which holds the user's program.
  EXPECT_EQ(c["image"], Runtime().image);
  EXPECT_EQ(c["imagePullPolicy"], Runtime().pull_policy);
  EXPECT_EQ(ps["spec"]["imagePullSecrets"], Json::parse(R"([{"name": "registry-key"}])"));
  std::map<std::string, std::string> env = EnvOf(c);
  EXPECT_EQ(env["HPTRAIN_RANK"], "0");
  EXPECT_EQ(env["HPTRAIN_COORDINATOR"], "lm-ps-0.lm.team-a.svc:29400");
  // The ps pod of the same job on the built-in trainer: the same but for the image, which is
  // then the first group's.
  Json built_in_ps = Build(BuiltIn(TrainerJob())).pods[0];
  EXPECT_EQ(MainContainer(built_in_ps)["image"], kUserImage);
  EXPECT_EQ(MainContainer(built_in_ps)["command"], c["command"]);
  EXPECT_EQ(MainContainer(built_in_ps)["env"], c["env"]);

  // spec.ps.template decides, as for every job.
  Json job = TrainerJob();
  job["spec"]["ps"] = Json::parse(R"({"template": {"spec": {"containers": [
                                       {"name": "ps", "image": "registry.example/hptrain:1"}]}}})");
  EXPECT_EQ(MainContainer(Build(job).pods[0])["image"], "registry.example/hptrain:1");
  // Without either, the ps pod has no image, and the error says where to put one.
  absl::StatusOr<DesiredObjects> none = TryBuild(TrainerJob(), 0, RuntimeImage());
  EXPECT_EQ(none.status().message(), "spec.ps.template.spec.containers[0].image: required");
}

TEST(TrainerPodsTest, TheDefaultImageRunsTheProgramWhenTheTemplateNamesNone) {
  Json job = TrainerJob();
  job["spec"]["workerGroups"][1]["template"]["spec"]["containers"][0].erase("image");
  DesiredObjects d = Build(job);
  ASSERT_EQ(d.pods.size(), 4u);
  EXPECT_EQ(MainContainer(d.pods[3])["image"], Runtime().image);
  EXPECT_EQ(MainContainer(d.pods[3])["command"], Json::array({"python3", "-u", "train_lm.py"}));
  EXPECT_EQ(MainContainer(d.pods[1])["image"], kUserImage);
}

TEST(TrainerPodsTest, AWorkingDirOfTheTemplateStaysUnlessTheTrainerSetsOne) {
  Json job = TrainerJob();
  job["spec"]["workerGroups"][0]["template"]["spec"]["containers"][0]["workingDir"] = "/srv";
  EXPECT_EQ(MainContainer(Build(job).pods[1])["workingDir"], "/app");
  job["spec"]["trainer"].erase("workingDir");
  DesiredObjects d = Build(job);
  EXPECT_EQ(MainContainer(d.pods[1])["workingDir"], "/srv");
  EXPECT_FALSE(MainContainer(d.pods[3]).contains("workingDir"));
}

TEST(TrainerPodsTest, TemplateArgsThatAreNotAListAreRefusedWithTheirPath) {
  Json job = TrainerJob();
  job["spec"]["workerGroups"][1]["template"]["spec"]["containers"][0]["args"] = "--fast";
  absl::StatusOr<DesiredObjects> d = TryBuild(job);
  EXPECT_EQ(d.status().message(),
            "spec.workerGroups[1].template.spec.containers[0].args: must be a list");
}

}  // namespace
}  // namespace hptrain::reconcile
