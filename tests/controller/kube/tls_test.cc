// The transport's TLS: server verification against the configured CA (and nothing else), and
// client certificates, against an in-process httplib::SSLServer with generated certificates.
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <thread>

#include "controller/kube/client.h"
#include "tests/controller/kube/test_certs.h"

namespace hptrain::kube {
namespace {

using ::hptrain::kube::testing::MakeCa;
using ::hptrain::kube::testing::MakeLeaf;
using ::hptrain::kube::testing::TestCert;

// An HTTPS server answering GET /version, optionally requiring a client certificate from
// `client_ca`.
class TlsServer {
 public:
  TlsServer(const TestCert& server_cert, const TestCert* client_ca) {
    X509_STORE* store = nullptr;
    if (client_ca != nullptr) {
      store = X509_STORE_new();
      X509_STORE_add_cert(store, client_ca->cert.get());
    }
    server_ =
        std::make_unique<httplib::SSLServer>(server_cert.cert.get(), server_cert.key.get(), store);
    server_->Get("/version", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(
          R"({"gitVersion":"v1.28.7","auth":")" + req.get_header_value("Authorization") + R"("})",
          "application/json");
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (port_ > 0 && !server_->is_running())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~TlsServer() {
    server_->stop();
    thread_.join();
  }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  bool valid() const { return server_->is_valid() && port_ > 0; }

 private:
  std::unique_ptr<httplib::SSLServer> server_;
  int port_ = -1;
  std::thread thread_;
};

absl::StatusOr<nlohmann::json> GetVersion(const Config& config) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::FromConfig(config);
  if (!client.ok()) return client.status();
  return (*client)->Raw("GET", "/version");
}

class KubeTlsTest : public ::testing::Test {
 protected:
  TestCert ca_ = MakeCa("cluster-ca");
  TestCert other_ca_ = MakeCa("someone-else");
  TestCert server_cert_ = MakeLeaf(ca_, "kube-apiserver");
};

TEST_F(KubeTlsTest, VerifiesTheServerAgainstTheConfiguredCa) {
  TlsServer server(server_cert_, nullptr);
  ASSERT_TRUE(server.valid());
  Config config;
  config.server = server.url();
  config.ca_pem = ca_.cert_pem;
  config.token = "secret";
  absl::StatusOr<nlohmann::json> version = GetVersion(config);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ((*version)["gitVersion"], "v1.28.7");
  EXPECT_EQ((*version)["auth"], "Bearer secret");
}

TEST_F(KubeTlsTest, RejectsAServerSignedByAnotherCa) {
  TlsServer server(server_cert_, nullptr);
  Config config;
  config.server = server.url();
  config.ca_pem = other_ca_.cert_pem;
  absl::StatusOr<nlohmann::json> version = GetVersion(config);
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(version.status().message().find("GET " + server.url() + "/version"), std::string::npos)
      << version.status();
  EXPECT_NE(version.status().message().find("certificate verification failed"), std::string::npos)
      << version.status();
}

TEST_F(KubeTlsTest, RejectsACertificateForAnotherHost) {
  TestCert elsewhere = MakeLeaf(ca_, "kube-apiserver", "DNS:elsewhere.example,IP:10.0.0.9");
  TlsServer server(elsewhere, nullptr);
  Config config;
  config.server = server.url();
  config.ca_pem = ca_.cert_pem;
  absl::StatusOr<nlohmann::json> version = GetVersion(config);
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(version.status().message().find("mismatch"), std::string::npos) << version.status();
}

TEST_F(KubeTlsTest, TrustsOnlyTheConfiguredCaNotTheSystemStore) {
  // Point OpenSSL's default trust file at the server's real CA: a client configured with
  // another CA must still refuse the server.
  char pattern[] = "/tmp/hptrain_kube_tls_XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  std::string bundle = std::string(pattern) + "/system.pem";
  std::ofstream(bundle) << ca_.cert_pem;
  ::setenv("SSL_CERT_FILE", bundle.c_str(), 1);
  TlsServer server(server_cert_, nullptr);
  Config config;
  config.server = server.url();
  config.ca_pem = other_ca_.cert_pem;
  absl::StatusOr<nlohmann::json> version = GetVersion(config);
  ::unsetenv("SSL_CERT_FILE");
  std::remove(bundle.c_str());
  ::rmdir(pattern);
  EXPECT_FALSE(version.ok());
}

TEST_F(KubeTlsTest, InsecureSkipsVerification) {
  TlsServer server(server_cert_, nullptr);
  Config config;
  config.server = server.url();
  config.insecure_skip_tls_verify = true;
  absl::StatusOr<nlohmann::json> version = GetVersion(config);
  ASSERT_TRUE(version.ok()) << version.status();
}

TEST_F(KubeTlsTest, PresentsTheClientCertificate) {
  TestCert client_cert = MakeLeaf(ca_, "system:admin");
  TlsServer server(server_cert_, &ca_);
  Config config;
  config.server = server.url();
  config.ca_pem = ca_.cert_pem;
  config.client_cert_pem = client_cert.cert_pem;
  config.client_key_pem = client_cert.key_pem;
  absl::StatusOr<nlohmann::json> version = GetVersion(config);
  ASSERT_TRUE(version.ok()) << version.status();

  config.client_cert_pem.clear();
  config.client_key_pem.clear();
  EXPECT_EQ(GetVersion(config).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(KubeTlsTest, BadPemFailsAtClientCreation) {
  Config config;
  config.server = "https://127.0.0.1:1";
  config.ca_pem = "not a certificate";
  absl::StatusOr<std::unique_ptr<Client>> client = Client::FromConfig(config);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(client.status().message().find("certificate authority"), std::string::npos);
}

}  // namespace
}  // namespace hptrain::kube
