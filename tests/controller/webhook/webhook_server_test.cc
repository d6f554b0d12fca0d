// The webhook's HTTPS server: it answers AdmissionReviews over TLS with the mounted pair, refuses
// clients that do not trust it, and picks up a renewed certificate without a restart.
#include "controller/webhook/webhook_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/time/clock.h"
#include "controller/webhook/admission.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/controller/kube/test_certs.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::webhook {
namespace {

using Json = nlohmann::json;
using kube::testing::MakeCa;
using kube::testing::MakeLeaf;
using kube::testing::TestCert;

class WebhookServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/hptrain-webhook-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // Writes the serving pair signed by `ca` (and that CA's certificate, for the clients).
  void WritePair(const TestCert& ca, const std::string& ca_file) {
    TestCert leaf = MakeLeaf(ca, "hptrain-webhook.hptrain-system.svc");
    Write(dir_ + "/tls.key", leaf.key_pem);
    Write(dir_ + "/tls.crt", leaf.cert_pem);
    Write(dir_ + "/" + ca_file, ca.cert_pem);
  }
  static void Write(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp) << text;
    ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
  }
  WebhookServerOptions Options() const {
    WebhookServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.cert_file = dir_ + "/tls.crt";
    options.key_file = dir_ + "/tls.key";
    options.reload_interval = absl::Milliseconds(50);
    return options;
  }
  // POSTs `body` trusting `ca_file`; the response, or null on a TLS or connection failure.
  httplib::Result Post(int port, const std::string& ca_file, const std::string& body) {
    httplib::SSLClient client("127.0.0.1", port);
    client.set_ca_cert_path((dir_ + "/" + ca_file).c_str());
    client.enable_server_certificate_verification(true);
    client.set_connection_timeout(2, 0);
    return client.Post(kValidatePath, body, "application/json");
  }
  void WriteBogusCa() { Write(dir_ + "/other-ca.crt", MakeCa("other-ca").cert_pem); }
  static std::string InvalidJobReview() {
    Json job = reconcile::testing::ShorthandJob(2);
    job["spec"]["optimizer"] = {{"type", "adam"}, {"lr", 0.001}, {"momentum", 0.9}};
    return Json{{"apiVersion", "admission.k8s.io/v1"},
                {"kind", "AdmissionReview"},
                {"request", {{"uid", "u-1"}, {"operation", "CREATE"}, {"object", job}}}}
        .dump();
  }

  std::string dir_;
};

TEST_F(WebhookServerTest, AnswersOverTlsAndRefusesUntrustingClients) {
  WritePair(MakeCa("webhook-ca"), "ca.crt");
  WriteBogusCa();
  WebhookServer server(Options());
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.port(), 0);

  httplib::Result result = Post(server.port(), "ca.crt", InvalidJobReview());
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  Json answer = Json::parse(result->body);
  EXPECT_EQ(answer["response"]["uid"], "u-1");
  EXPECT_EQ(answer["response"]["allowed"], false);
  EXPECT_EQ(answer["response"]["status"]["message"].get<std::string>().rfind(
                "spec.optimizer.momentum", 0),
            0u);

  result = Post(server.port(), "ca.crt", "{not json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400);

  // A client that trusts another CA does not get an answer.
  EXPECT_FALSE(Post(server.port(), "other-ca.crt", InvalidJobReview()));
  server.Stop();
  EXPECT_EQ(server.port(), 0);
}

TEST_F(WebhookServerTest, ARenewedCertificateIsServedWithoutARestart) {
  WritePair(MakeCa("first-ca"), "first-ca.crt");
  WebhookServer server(Options());
  ASSERT_TRUE(server.Start().ok());
  const int port = server.port();
  ASSERT_TRUE(Post(port, "first-ca.crt", InvalidJobReview()));

  WritePair(MakeCa("second-ca"), "second-ca.crt");  // cert-manager renewed it
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (server.loads() < 2 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_EQ(server.loads(), 2);
  EXPECT_EQ(server.port(), port);
  httplib::Result result = Post(port, "second-ca.crt", InvalidJobReview());
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  EXPECT_FALSE(Post(port, "first-ca.crt", InvalidJobReview()));
}

TEST_F(WebhookServerTest, MissingOrBrokenFilesAreAnErrorNamingTheFlag) {
  WebhookServer missing(Options());
  absl::Status status = missing.Start();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_EQ(std::string(status.message()).rfind("--webhook-cert-dir: ", 0), 0u) << status;

  Write(dir_ + "/tls.crt", "not a certificate");
  Write(dir_ + "/tls.key", "not a key");
  WebhookServer broken(Options());
  status = broken.Start();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_EQ(std::string(status.message()).rfind("--webhook-cert-dir: ", 0), 0u) << status;
}

}  // namespace
}  // namespace hptrain::webhook
