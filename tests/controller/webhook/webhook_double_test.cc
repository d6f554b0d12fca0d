// The webhook registered with the API server double, as the chart registers it with a cluster:
// `kubectl apply` of a job the runtime would refuse is refused with the runtime validator's
// message, a valid one is stored, and with the webhook down the documented failurePolicy
// decides (Fail: refused with 500 InternalError; Ignore: stored, the controller then fails it
// with reason InvalidSpec).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>

#include "controller/reconcile/parsed_job.h"
#include "controller/webhook/webhook_server.h"
#include "tests/controller/apiserver/admission_webhook.h"
#include "tests/controller/apiserver/api_server_double.h"
#include "tests/controller/kube/test_certs.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::webhook {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class WebhookOnTheApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/hptrain-webhook-double-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    kube::testing::TestCert ca = kube::testing::MakeCa("webhook-ca");
    kube::testing::TestCert leaf = kube::testing::MakeLeaf(ca, "webhook");
    std::ofstream(dir_ + "/tls.crt") << leaf.cert_pem;
    std::ofstream(dir_ + "/tls.key") << leaf.key_pem;
    std::ofstream(dir_ + "/ca.crt") << ca.cert_pem;
    WebhookServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.cert_file = dir_ + "/tls.crt";
    options.key_file = dir_ + "/tls.key";
    webhook_ = std::make_unique<WebhookServer>(options);
    ASSERT_TRUE(webhook_->Start().ok());
  }
  void TearDown() override {
    webhook_->Stop();
    std::system(("rm -rf " + dir_).c_str());
  }
  void Register(const std::string& failure_policy) {
    hptrain::testing::AdmissionWebhookConfig config;
    config.port = webhook_->port();
    config.ca_file = dir_ + "/ca.crt";
    config.failure_policy = failure_policy;
    config.timeout = absl::Seconds(2);
    server_.AddAdmission("trainingjobs", hptrain::testing::AdmissionWebhook(config));
  }
  static Json Job(const std::string& name) {
    Json job = reconcile::testing::ShorthandJob(2);
    job["metadata"] = {{"name", name}, {"namespace", "team-a"}};
    return job;
  }
  static Json AdamWithMomentum(const std::string& name) {
    Json job = Job(name);
    job["spec"]["optimizer"] = {{"type", "adam"}, {"lr", 0.001}, {"momentum", 0.9}};
    return job;
  }

  std::string dir_;
  std::unique_ptr<WebhookServer> webhook_;
  hptrain::testing::ApiServerDouble server_;
};

TEST_F(WebhookOnTheApiServerTest, RefusesWithTheValidatorsMessageAndAdmitsValidJobs) {
  Register("Fail");
  const Json invalid = AdamWithMomentum("adam");
  const std::string expected(reconcile::ParseTrainingJob(invalid).status().message());
  absl::StatusOr<Json> created = server_.Create("trainingjobs", invalid);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(hptrain::testing::HttpCode(created.status()), 422);
  Json body = hptrain::testing::StatusBody(created.status());
  EXPECT_EQ(body["message"], "admission webhook \"validate.trainingjobs.hptrain.io\" denied the "
                             "request: " + expected);
  EXPECT_EQ(body["reason"], "Invalid");
  EXPECT_TRUE(server_.List("trainingjobs", "team-a").empty());

  absl::StatusOr<Json> valid = server_.Create("trainingjobs", Job("mlp"));
  EXPECT_TRUE(valid.ok()) << valid.status();
  EXPECT_EQ(server_.List("trainingjobs", "team-a").size(), 1u);
}

TEST_F(WebhookOnTheApiServerTest, RefusesATemplateThatSetsAReservedVariable) {
  Register("Fail");
  Json job = Job("reserved");
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["env"] =
      Json::parse(R"([{"name": "HPTRAIN_COORDINATOR", "value": "elsewhere:29400"}])");
  absl::StatusOr<Json> created = server_.Create("trainingjobs", job);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(hptrain::testing::HttpCode(created.status()), 422);
  Json body = hptrain::testing::StatusBody(created.status());
  EXPECT_EQ(body["message"],
            "admission webhook \"validate.trainingjobs.hptrain.io\" denied the request: "
            "spec.workers.template.spec.containers[0].env[0].name: HPTRAIN_COORDINATOR is "
            "reserved: hptrain sets the HPTRAIN_* variables");
  EXPECT_TRUE(server_.List("trainingjobs", "team-a").empty());
}

TEST_F(WebhookOnTheApiServerTest, RefusesARelativeDataPathAndACommandOnTheWorker) {
  Register("Fail");
  Json relative = Job("relative");
  relative["spec"]["dataset"] = {{"name", "mine"}, {"format", "npy"}, {"path", "data/x"}};
  Json command = Job("command");
  command["spec"]["workers"]["template"]["spec"]["containers"][0]["command"] =
      Json::array({"sleep", "1"});
  const std::pair<Json, std::string> cases[] = {
      {relative, "spec.dataset.path: must be an absolute path in a pod ("},
      {command, "spec.workers.template.spec.containers[0].command: is set by the controller ("}};
  for (const auto& [job, start] : cases) {
    absl::StatusOr<Json> created = server_.Create("trainingjobs", job);
    ASSERT_FALSE(created.ok()) << start;
    EXPECT_EQ(hptrain::testing::HttpCode(created.status()), 422);
    Json body = hptrain::testing::StatusBody(created.status());
    EXPECT_THAT(body["message"].get<std::string>(),
                StartsWith("admission webhook \"validate.trainingjobs.hptrain.io\" denied the "
                           "request: " + start));
  }
  EXPECT_TRUE(server_.List("trainingjobs", "team-a").empty());
}

TEST_F(WebhookOnTheApiServerTest, AWebhookThatIsDownFailsPerItsFailurePolicy) {
  webhook_->Stop();  // the controller's pods are gone, say
  Register("Fail");
  absl::StatusOr<Json> created = server_.Create("trainingjobs", Job("mlp"));
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(hptrain::testing::HttpCode(created.status()), 500);
  EXPECT_THAT(std::string(created.status().message()),
              HasSubstr("failed calling webhook \"validate.trainingjobs.hptrain.io\""));
  EXPECT_TRUE(server_.List("trainingjobs", "team-a").empty());
}

TEST_F(WebhookOnTheApiServerTest, IgnoreAdmitsEverythingWhileTheWebhookIsDown) {
  webhook_->Stop();
  Register("Ignore");
  EXPECT_TRUE(server_.Create("trainingjobs", AdamWithMomentum("adam")).ok());
  EXPECT_EQ(server_.List("trainingjobs", "team-a").size(), 1u);
}

}  // namespace
}  // namespace hptrain::webhook
