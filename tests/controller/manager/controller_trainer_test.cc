// Jobs that run the user's own program (spec.trainer) under a real Controller against the API
// server double: the worker pods it creates run the program in the user's image with the
// HPTRAIN_* environment, the ps pod runs `hptrain ps`, and a template that sets a reserved
// HPTRAIN_* variable fails the job (InvalidSpec, with the field path) without creating anything.
#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/manager/controller_fixture.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::manager::testing {
namespace {

using ::testing::ElementsAre;

// reconcile::testing::TrainerJob as a user submits it, in kNs.
Json TrainerJob(const std::string& name) {
  Json job = reconcile::testing::TrainerJob();
  job["metadata"] = {{"name", name}, {"namespace", kNs}};
  return job;
}

const Json* PodNamed(const std::vector<Json>& pods, const std::string& name) {
  for (const Json& pod : pods) {
    if (pod["metadata"]["name"] == name) return &pod;
  }
  return nullptr;
}

std::map<std::string, std::string> EnvOf(const Json& container) {
  std::map<std::string, std::string> env;
  for (const Json& var : container["env"]) {
    env[var["name"].get<std::string>()] =
        var.contains("value") ? var["value"].get<std::string>()
                              : var["valueFrom"]["fieldRef"]["fieldPath"].get<std::string>();
  }
  return env;
}

TEST_F(ControllerTest, ATrainerJobsWorkersRunTheUsersProgram) {
  StartController();
  CreateJob(TrainerJob("lm"));
  ASSERT_TRUE(WaitFor([&] { return PodNames("lm").size() == 4; })) << Status("lm").dump();
  EXPECT_THAT(PodNames("lm"), ElementsAre("lm-ps-0", "lm-worker-0", "lm-worker-1", "lm-worker-2"));
  const std::vector<Json> pods = Owned("pods", "lm");
  const char* groups[] = {"big", "big", "small"};
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE(rank);
    const Json* pod = PodNamed(pods, "lm-worker-" + std::to_string(rank));
    ASSERT_NE(pod, nullptr);
    const Json& c = (*pod)["spec"]["containers"][0];
    EXPECT_EQ(c["name"], "worker");
    EXPECT_EQ(c["image"], "registry.example/team-a/lm:3");
    EXPECT_EQ(c["command"], Json::array({"python3", "-u", "train_lm.py"}));
    Json args = Json::array({"--corpus", "/data/corpus.txt"});
    if (rank < 2) args.insert(args.end(), {"--log-every", "10"});
    EXPECT_EQ(c["args"], args);
    EXPECT_EQ(c["workingDir"], "/app");
    std::map<std::string, std::string> want = {
        {"HPTRAIN_JOB", "/etc/hptrain/job.yaml"},
        {"HPTRAIN_TOKEN_FILE", "/etc/hptrain/token"},
        {"HPTRAIN_COORDINATOR", std::string("lm-ps-0.lm.") + kNs + ".svc:29400"},
        {"HPTRAIN_RANK", std::to_string(rank)},
        {"HPTRAIN_GROUP", groups[rank]},
        {"HPTRAIN_NODE_NAME", "spec.nodeName"},
        {"HPTRAIN_PS_HOST", "0.0.0.0"},
        {"HPTRAIN_PS_PORT", "29400"},
        {"HPTRAIN_METRICS_HOST", "0.0.0.0"},
        {"HPTRAIN_METRICS_PORT", "9090"},
        {"HPTRAIN_BIND_HOST", "0.0.0.0"}};
    if (rank < 2) want["PYTHONUNBUFFERED"] = "1";
    EXPECT_EQ(EnvOf(c), want);
  }
  const Json* ps = PodNamed(pods, "lm-ps-0");
  ASSERT_NE(ps, nullptr);
  const Json& c = (*ps)["spec"]["containers"][0];
  EXPECT_EQ(c["command"], Json::array({"hptrain", "ps"}));
  EXPECT_EQ(c["image"], kImage);  // the controller's default image, not the user's
  EXPECT_FALSE(c.contains("args"));

  // It runs and succeeds like any job.
  SetPods("lm", "Running");
  ASSERT_TRUE(WaitFor([&] { return Phase("lm") == "Running"; })) << Status("lm").dump();
  SetPods("lm", "Succeeded", "worker");
  EXPECT_TRUE(WaitFor([&] { return Phase("lm") == "Succeeded"; })) << Status("lm").dump();
}

TEST_F(ControllerTest, ATemplateThatSetsAReservedVariableFailsTheJob) {
  StartController();
  Json job = TrainerJob("lm");
  job["spec"]["workerGroups"][1]["template"]["spec"]["containers"][0]["env"] =
      Json::parse(R"([{"name": "TZ", "value": "UTC"}, {"name": "HPTRAIN_RANK", "value": "0"}])");
  Json built_in = MlpJob("mlp");
  built_in["spec"]["workers"]["template"]["spec"]["containers"][0]["env"] =
      Json::parse(R"([{"name": "HPTRAIN_METRICS_PORT", "value": "8080"}])");
  CreateJob(job);
  CreateJob(built_in);

  const std::map<std::string, std::string> messages = {
      {"lm", "spec.workerGroups[1].template.spec.containers[0].env[1].name: HPTRAIN_RANK is "
             "reserved: hptrain sets the HPTRAIN_* variables"},
      {"mlp", "spec.workers.template.spec.containers[0].env[0].name: HPTRAIN_METRICS_PORT is "
              "reserved: hptrain sets the HPTRAIN_* variables"}};
  for (const auto& [name, message] : messages) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(WaitFor([&] { return Phase(name) == "Failed"; })) << Status(name).dump();
    Json failed = Condition(name, "Failed");
    EXPECT_EQ(failed["reason"], "InvalidSpec");
    EXPECT_EQ(failed["message"], message);
    ASSERT_TRUE(WaitFor([&] { return Events(name, "InvalidSpec").size() == 1; }));
    EXPECT_EQ(Events(name, "InvalidSpec")[0]["message"], message);
  }
  EXPECT_EQ(server_->RequestCount("create", "pods"), 0);
  EXPECT_TRUE(server_->List("pods", kNs).empty());
}

}  // namespace
}  // namespace hptrain::manager::testing
