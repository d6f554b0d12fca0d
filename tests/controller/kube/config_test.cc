#include "controller/kube/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/controller/kube/test_certs.h"

namespace hptrain::kube {
namespace {

using ::hptrain::kube::testing::MakeCa;
using ::hptrain::kube::testing::MakeLeaf;
using ::hptrain::kube::testing::TestCert;

class KubeConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/hptrain_kube_config_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::string command = absl::StrCat("rm -rf '", dir_, "'");
    ASSERT_EQ(std::system(command.c_str()), 0);
  }

  std::string Write(const std::string& name, const std::string& contents) {
    std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream(path) << contents;
    return path;
  }

  // A kubeconfig with one context "dev" -> cluster "c" and user "u"; `cluster` and `user` are
  // the YAML bodies (already indented by 4).
  std::string Kubeconfig(const std::string& cluster, const std::string& user,
                         const std::string& current = "dev") {
    return absl::StrCat("apiVersion: v1\nkind: Config\ncurrent-context: ", current,
                        "\nclusters:\n- name: c\n  cluster:\n", cluster,
                        "\nusers:\n- name: u\n  user:\n", user,
                        "\ncontexts:\n- name: dev\n  context:\n    cluster: c\n    user: u\n"
                        "    namespace: team-a\n");
  }

  std::string dir_;
};

TEST_F(KubeConfigTest, TokenAndInlineCertificateAuthority) {
  TestCert ca = MakeCa("cluster-ca");
  std::string path = Write("config", Kubeconfig(absl::StrCat("    server: https://10.0.0.1:6443\n"
                                                             "    certificate-authority-data: ",
                                                             absl::Base64Escape(ca.cert_pem)),
                                                "    token: abc.def"));
  absl::StatusOr<Config> config = LoadKubeconfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "https://10.0.0.1:6443");
  EXPECT_EQ(config->token, "abc.def");
  EXPECT_EQ(config->ca_pem, ca.cert_pem);
  EXPECT_EQ(config->default_namespace, "team-a");
  EXPECT_FALSE(config->insecure_skip_tls_verify);
  EXPECT_EQ(config->source, absl::StrCat("kubeconfig ", path));
}

TEST_F(KubeConfigTest, TokenFileAndCaFileResolveAgainstTheKubeconfigDirectory) {
  TestCert ca = MakeCa("cluster-ca");
  Write("token", "  file-token\n");
  Write("ca.crt", ca.cert_pem);
  std::string path = Write("config", Kubeconfig("    server: https://k8s.example:443\n"
                                                "    certificate-authority: ca.crt",
                                                "    tokenFile: token"));
  absl::StatusOr<Config> config = LoadKubeconfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->token, "file-token");
  EXPECT_EQ(config->token_file, absl::StrCat(dir_, "/token"));
  EXPECT_EQ(config->ca_pem, ca.cert_pem);
}

TEST_F(KubeConfigTest, ClientCertificateData) {
  TestCert ca = MakeCa("ca");
  TestCert client = MakeLeaf(ca, "admin");
  std::string path = Write(
      "config",
      Kubeconfig("    server: https://127.0.0.1:6443\n    insecure-skip-tls-verify: true",
                 absl::StrCat("    client-certificate-data: ", absl::Base64Escape(client.cert_pem),
                              "\n    client-key-data: ", absl::Base64Escape(client.key_pem))));
  absl::StatusOr<Config> config = LoadKubeconfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->client_cert_pem, client.cert_pem);
  EXPECT_EQ(config->client_key_pem, client.key_pem);
  EXPECT_TRUE(config->insecure_skip_tls_verify);
  EXPECT_TRUE(config->token.empty());
}

TEST_F(KubeConfigTest, MismatchedClientKeyIsRejected) {
  TestCert ca = MakeCa("ca");
  TestCert a = MakeLeaf(ca, "a");
  TestCert b = MakeLeaf(ca, "b");
  std::string path =
      Write("config",
            Kubeconfig("    server: https://127.0.0.1:6443",
                       absl::StrCat("    client-certificate-data: ", absl::Base64Escape(a.cert_pem),
                                    "\n    client-key-data: ", absl::Base64Escape(b.key_pem))));
  absl::StatusOr<Config> config = LoadKubeconfig(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("does not match"), std::string::npos) << config.status();
}

TEST_F(KubeConfigTest, MissingContextNamesIt) {
  std::string path =
      Write("config", Kubeconfig("    server: https://127.0.0.1:6443", "    token: t", "prod"));
  absl::StatusOr<Config> config = LoadKubeconfig(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound) << config.status();
  EXPECT_EQ(std::string(config.status().message()),
            absl::StrCat("kubeconfig ", path, ": context \"prod\" not found"));
  // An explicit context wins over current-context.
  EXPECT_TRUE(LoadKubeconfig(path, "dev").ok());
}

TEST_F(KubeConfigTest, MissingCurrentContextAndServerAreClearErrors) {
  std::string no_current =
      Write("a", absl::StrReplaceAll(Kubeconfig("    server: https://x", "    token: t"),
                                     {{"current-context: dev\n", ""}}));
  absl::StatusOr<Config> config = LoadKubeconfig(no_current);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("current-context is not set"), std::string::npos);

  std::string no_server =
      Write("b", Kubeconfig("    insecure-skip-tls-verify: true", "    token: t"));
  config = LoadKubeconfig(no_server);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("clusters[\"c\"].cluster.server is not set"),
            std::string::npos)
      << config.status();
}

TEST_F(KubeConfigTest, BadBase64AndUnsupportedExecNameTheField) {
  std::string bad = Write("a", Kubeconfig("    server: https://x:1\n"
                                          "    certificate-authority-data: '***'",
                                          "    token: t"));
  absl::StatusOr<Config> config = LoadKubeconfig(bad);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find(
                "clusters[\"c\"].cluster.certificate-authority-data: not valid base64"),
            std::string::npos)
      << config.status();

  std::string exec =
      Write("b", Kubeconfig("    server: https://x:1", "    exec:\n      command: aws"));
  config = LoadKubeconfig(exec);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(config.status().message().find("users[\"u\"].user.exec is not supported"),
            std::string::npos);

  config = LoadKubeconfig(absl::StrCat(dir_, "/missing"));
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);

  std::string garbage = Write("c", "clusters: [unclosed");
  EXPECT_EQ(LoadKubeconfig(garbage).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(KubeConfigTest, InClusterFromServiceAccountDirectory) {
  TestCert ca = MakeCa("cluster-ca");
  Write("token", "sa-token\n");
  Write("ca.crt", ca.cert_pem);
  Write("namespace", "hptrain-system");
  InClusterOptions options;
  options.root = dir_;
  options.host = "10.96.0.1";
  options.port = "443";
  absl::StatusOr<Config> config = InClusterConfig(options);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->token, "sa-token");
  EXPECT_EQ(config->token_file, absl::StrCat(dir_, "/token"));
  EXPECT_EQ(config->ca_pem, ca.cert_pem);
  EXPECT_EQ(config->default_namespace, "hptrain-system");

  options.host = "fd00::1";
  config = InClusterConfig(options);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "https://[fd00::1]:443");
}

TEST_F(KubeConfigTest, InClusterWithoutEnvironmentOrTokenFails) {
  InClusterOptions options;
  options.root = dir_;
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  absl::StatusOr<Config> config = InClusterConfig(options);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("KUBERNETES_SERVICE_HOST"), std::string::npos);

  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  config = InClusterConfig(options);  // no token file in dir_
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(config.status().message().find("service-account token"), std::string::npos);
}

TEST(KubeServerUrlTest, ParsesSchemesPortsAndPrefixes) {
  absl::StatusOr<ServerAddress> a = ParseServerUrl("https://k8s.example");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->https);
  EXPECT_EQ(a->host, "k8s.example");
  EXPECT_EQ(a->port, 443);
  absl::StatusOr<ServerAddress> b = ParseServerUrl("http://127.0.0.1:8001/k8s/clusters/c1/");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->https);
  EXPECT_EQ(b->port, 8001);
  EXPECT_EQ(b->base_path, "/k8s/clusters/c1");
  absl::StatusOr<ServerAddress> c = ParseServerUrl("https://[::1]:6443");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 6443);
  EXPECT_FALSE(ParseServerUrl("ftp://x").ok());
  EXPECT_FALSE(ParseServerUrl("https://x:99999").ok());
  EXPECT_FALSE(ParseServerUrl("https://:80").ok());
}

}  // namespace
}  // namespace hptrain::kube
