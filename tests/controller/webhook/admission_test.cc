// The admission webhook's decisions (controller/webhook/admission.h): the kinds of job the CRD
// schema lets through but the runtime or the controller refuses (a validator rule, a relative
// path a pod cannot resolve, a command on the container the controller rewrites) are denied
// with the same message as the reconciler's, its field path as the cause,
// every example manifest is admitted, and updates that leave the spec alone always pass.
#include "controller/webhook/admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "controller/reconcile/parsed_job.h"
#include "tests/controller/apiserver/json_util.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::webhook {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

Json Review(const std::string& operation, const Json& object, const Json& old = Json()) {
  Json request = {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                  {"kind", {{"group", "hptrain.io"}, {"version", "v1alpha1"},
                            {"kind", "TrainingJob"}}},
                  {"resource", {{"group", "hptrain.io"}, {"version", "v1alpha1"},
                                {"resource", "trainingjobs"}}},
                  {"namespace", "team-a"},
                  {"operation", operation},
                  {"object", object}};
  if (!old.is_null()) request["oldObject"] = old;
  return Json{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"},
              {"request", std::move(request)}};
}

// A job as `kubectl apply` sends it: no server-set metadata.
Json Submitted() {
  Json job = reconcile::testing::ShorthandJob(2);
  job["metadata"] = {{"name", "mlp"}, {"namespace", "team-a"}};
  return job;
}

Json Response(const Json& review) {
  absl::StatusOr<Json> answer = ReviewTrainingJob(review);
  EXPECT_TRUE(answer.ok()) << answer.status();
  if (!answer.ok()) return Json();
  EXPECT_EQ((*answer)["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ((*answer)["kind"], "AdmissionReview");
  EXPECT_EQ((*answer)["response"]["uid"], review["request"]["uid"]);
  return (*answer)["response"];
}

// The reconciler's verdict on `job`: "" when it would run it.
std::string RuntimeMessage(const Json& job) {
  absl::StatusOr<reconcile::ParsedJob> parsed = reconcile::ParseTrainingJob(job);
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

struct InvalidCase {
  const char* name;
  void (*edit)(Json* spec);
  const char* field;  // the field path the message starts with
};

const InvalidCase kInvalid[] = {
    {"group batch sizes that do not sum to globalBatchSize",
     [](Json* spec) {
       spec->erase("workers");
       (*spec)["workerGroups"] = Json::parse(R"([
         {"name": "fast", "replicas": 1, "batchSize": 40},
         {"name": "slow", "replicas": 1, "batchSize": 20}])");
     },
     "spec.globalBatchSize"},
    {"fewer samples than workers",
     [](Json* spec) {
       (*spec)["dataset"]["synthetic"]["samples"] = 3;
       (*spec)["workers"]["replicas"] = 4;
     },
     "spec.dataset.synthetic.samples"},
    {"momentum on adam",
     [](Json* spec) { (*spec)["optimizer"] = {{"type", "adam"}, {"lr", 0.001}, {"momentum", 0.9}}; },
     "spec.optimizer.momentum"},
    {"schedule parameters without a schedule type",
     [](Json* spec) { (*spec)["optimizer"]["schedule"] = {{"stepSize", 10}, {"gamma", 0.5}}; },
     "spec.optimizer.schedule"},
    {"minBatch times workers above globalBatchSize",
     [](Json* spec) {
       (*spec)["workers"]["replicas"] = 4;
       (*spec)["rebalance"] = {{"enabled", true}, {"minBatch", 20}};
     },
     "spec.rebalance.minBatch"},
    // Paths a pod could not resolve (`hptrain run` resolves them against its directory).
    {"a relative data set path",
     [](Json* spec) {
       (*spec)["dataset"] = {{"name", "mine"}, {"format", "npy"}, {"path", "data/x"}};
     },
     "spec.dataset.path"},
    {"a relative TorchScript module",
     [](Json* spec) { (*spec)["model"] = {{"torchscript", "lenet5.pt"}}; },
     "spec.model.torchscript"},
    {"a relative predictor",
     [](Json* spec) {
       (*spec)["strategy"] = {{"type", "mp2"}, {"pushRatio", 0.1},
                              {"predictor", "examples/predictors/lenet5-fashion-mnist.mp2p"}};
     },
     "spec.strategy.predictor"},
    // The container the controller rewrites.
    {"a command on the worker container",
     [](Json* spec) {
       Json& container = (*spec)["workers"]["template"]["spec"]["containers"][0];
       container["command"] = Json::array({"python3", "x.py"});
     },
     "spec.workers.template.spec.containers[0].command"},
    {"args on the worker container",
     [](Json* spec) {
       Json& container = (*spec)["workers"]["template"]["spec"]["containers"][0];
       container["args"] = Json::array({"--threads=4"});
     },
     "spec.workers.template.spec.containers[0].args"},
};

TEST(AdmissionTest, EachJobTheRuntimeRefusesIsDeniedWithItsMessage) {
  for (const InvalidCase& c : kInvalid) {
    SCOPED_TRACE(c.name);
    Json job = Submitted();
    c.edit(&job["spec"]);
    const std::string expected = RuntimeMessage(job);
    ASSERT_FALSE(expected.empty()) << "the runtime accepts it";
    EXPECT_THAT(expected, StartsWith(c.field));
    Json response = Response(Review("CREATE", job));
    EXPECT_EQ(response["allowed"], false);
    EXPECT_EQ(response["status"]["code"], 422);
    EXPECT_EQ(response["status"]["reason"], "Invalid");
    EXPECT_EQ(response["status"]["message"], expected);
    EXPECT_THAT(response["status"]["details"]["causes"][0]["field"].get<std::string>(),
                StartsWith(c.field));
    // The same spec as an update of a valid job is denied too.
    response = Response(Review("UPDATE", job, Submitted()));
    EXPECT_EQ(response["allowed"], false);
  }
}

TEST(AdmissionTest, AReservedVariableInATemplateIsDeniedWithItsFieldPath) {
  Json job = Submitted();
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["env"] = Json::parse(
      R"([{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "HPTRAIN_RANK", "value": "3"}])");
  const std::string field = "spec.workers.template.spec.containers[0].env[1].name";
  const std::string message =
      field + ": HPTRAIN_RANK is reserved: hptrain sets the HPTRAIN_* variables";
  EXPECT_EQ(RuntimeMessage(job), message);
  Json response = Response(Review("CREATE", job));
  EXPECT_EQ(response["allowed"], false);
  EXPECT_EQ(response["status"]["code"], 422);
  EXPECT_EQ(response["status"]["message"], message);
  EXPECT_EQ(response["status"]["details"]["causes"][0]["field"], field);
  EXPECT_EQ(Response(Review("UPDATE", job, Submitted()))["allowed"], false);

  Json ps = Submitted();
  ps["spec"]["ps"] = Json::parse(R"({"template": {"spec": {"containers": [
      {"name": "ps", "image": "hptrain/runtime:test",
       "env": [{"name": "HPTRAIN_PS_PORT", "value": "1"}]}]}}})");
  response = Response(Review("CREATE", ps));
  EXPECT_EQ(response["allowed"], false);
  EXPECT_EQ(response["status"]["details"]["causes"][0]["field"],
            "spec.ps.template.spec.containers[0].env[0].name");
}

TEST(AdmissionTest, AJobThatRunsTheUsersProgramIsAdmitted) {
  Json job = reconcile::testing::TrainerJob();
  job["metadata"] = {{"name", "lm"}, {"namespace", "team-a"}};
  EXPECT_EQ(Response(Review("CREATE", job))["allowed"], true);
}

TEST(AdmissionTest, EveryExampleIsAdmitted) {
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(HPTRAIN_EXAMPLES_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<std::vector<Json>> documents =
        hptrain::testing::YamlDocumentsToJson(text.str());
    ASSERT_TRUE(documents.ok()) << entry.path() << ": " << documents.status();
    for (const Json& object : *documents) {
      if (object.value("kind", "") != "TrainingJob") continue;
      ++examples;
      Json response = Response(Review("CREATE", object));
      EXPECT_EQ(response["allowed"], true) << entry.path() << ": " << response.dump();
    }
  }
  EXPECT_GE(examples, 6);
}

TEST(AdmissionTest, AnUpdateThatKeepsTheSpecPassesEvenForAnInvalidOne) {
  Json invalid = Submitted();
  invalid["spec"]["optimizer"] = {{"type", "adam"}, {"lr", 0.001}, {"momentum", 0.9}};
  Json relabelled = invalid;
  relabelled["metadata"]["labels"] = {{"team", "b"}};
  EXPECT_EQ(Response(Review("UPDATE", relabelled, invalid))["allowed"], true);
  EXPECT_EQ(Response(Review("DELETE", Json(), invalid))["allowed"], true);
}

TEST(AdmissionTest, CheckpointsWithoutAVolumeAreAdmittedWithAWarning) {
  Json job = Submitted();
  job["spec"]["checkpoint"] = {{"path", "/ckpt/mlp.ckpt"}, {"intervalSteps", 10}};
  Json response = Response(Review("CREATE", job));
  EXPECT_EQ(response["allowed"], true);
  ASSERT_EQ(response["warnings"].size(), 1u);
  EXPECT_THAT(response["warnings"][0].get<std::string>(), HasSubstr("spec.checkpoint.volume"));
  job["spec"]["checkpoint"]["volume"] = {{"persistentVolumeClaim", {{"claimName", "ckpt"}}}};
  EXPECT_FALSE(Response(Review("CREATE", job)).contains("warnings"));
}

TEST(AdmissionTest, GenerateNameIsCheckedWithTheSuffixTheServerAdds) {
  Json job = Submitted();
  job["metadata"].erase("name");
  job["metadata"]["generateName"] = "mlp-";
  EXPECT_EQ(Response(Review("CREATE", job))["allowed"], true);
  job["metadata"]["generateName"] = std::string(70, 'a');
  EXPECT_EQ(Response(Review("CREATE", job))["allowed"], false);
}

TEST(AdmissionTest, NotAnAdmissionReviewIsAnError) {
  EXPECT_FALSE(ReviewTrainingJob(Json::parse("[1]")).ok());
  EXPECT_FALSE(ReviewTrainingJob(Json{{"apiVersion", "admission.k8s.io/v1beta1"},
                                      {"kind", "AdmissionReview"}})
                   .ok());
  Json no_uid = Review("CREATE", Submitted());
  no_uid["request"].erase("uid");
  absl::StatusOr<Json> answer = ReviewTrainingJob(no_uid);
  ASSERT_FALSE(answer.ok());
  EXPECT_THAT(std::string(answer.status().message()), HasSubstr("request.uid"));
  Json no_object = Review("CREATE", Submitted());
  no_object["request"].erase("object");
  EXPECT_FALSE(ReviewTrainingJob(no_object).ok());
}

}  // namespace
}  // namespace hptrain::webhook
