// TLS on the coordinator's gRPC (runtime/ps/tls_credentials.h): a TLS coordinator serves a client
// that trusts its CA and sends the job token, and refuses a plaintext client, a client trusting
// another CA, a wrong token over TLS and, with mutual TLS, a client without a certificate.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "runtime/base/atomic_file.h"
#include "runtime/ps/coordinator_client.h"
#include "runtime/ps/coordinator_service.h"
#include "runtime/ps/grpc_server.h"
#include "runtime/ps/tls_credentials.h"

namespace hptrain::ps {
namespace {

class Dir {
 public:
  Dir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/hptrain-tls-XXXXXX";
    path_ = mkdtemp(pattern.data());
  }
  ~Dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TlsMaterial Generate(const Dir& dir, bool mutual) {
  absl::Status generated = GenerateRunCertificates(dir.path(), {"127.0.0.1", "localhost"});
  EXPECT_TRUE(generated.ok()) << generated;
  auto tls = LoadTlsDirectory(dir.path(), mutual);
  EXPECT_TRUE(tls.ok()) << tls.status();
  return tls.ok() ? *tls : TlsMaterial{};
}

class TlsCoordinatorTest : public ::testing::Test {
 protected:
  void Start(bool mutual) {
    tls_ = Generate(server_dir_, mutual);
    CoordinatorConfig config;
    config.job = "tls";
    config.strategy = "ssgd";
    config.token = "secret";
    config.groups = {"a"};
    config.allocation = {8};
    config.global_batch = 8;
    service_ = std::make_unique<CoordinatorService>(config);
    auto started = StartGrpcServer("127.0.0.1", 0, {service_.get()}, "coordinator",
                                   MakeServerCredentials(tls_));
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    address_ = "127.0.0.1:" + std::to_string(server_.port);
  }
  void TearDown() override {
    if (server_.server) server_.server->Shutdown();
  }

  // GetJobStatus over a channel with `credentials`, sending `token`.
  grpc::Status Call(const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                    const std::string& token) {
    auto stub = hptrain::v1::Coordinator::NewStub(grpc::CreateChannel(address_, credentials));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    context.AddMetadata("authorization", "Bearer " + token);
    hptrain::v1::GetJobStatusRequest request;
    hptrain::v1::JobStatus response;
    return stub->GetJobStatus(&context, request, &response);
  }

  Dir server_dir_;
  TlsMaterial tls_;
  std::unique_ptr<CoordinatorService> service_;
  RunningServer server_;
  std::string address_;
};

TEST_F(TlsCoordinatorTest, ServesAClientThatTrustsItsCaAndSendsTheToken) {
  ASSERT_NO_FATAL_FAILURE(Start(false));
  grpc::Status status = Call(MakeChannelCredentials(tls_), "secret");
  EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
}

TEST_F(TlsCoordinatorTest, RefusesAPlaintextClient) {
  ASSERT_NO_FATAL_FAILURE(Start(false));
  grpc::Status status = Call(grpc::InsecureChannelCredentials(), "secret");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(TlsCoordinatorTest, RefusesAClientThatTrustsAnotherCa) {
  ASSERT_NO_FATAL_FAILURE(Start(false));
  Dir other_dir;
  TlsMaterial other = Generate(other_dir, false);
  ASSERT_NE(other.ca_pem, tls_.ca_pem);
  grpc::Status status = Call(MakeChannelCredentials(other), "secret");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(TlsCoordinatorTest, RefusesAWrongTokenOverTls) {
  ASSERT_NO_FATAL_FAILURE(Start(false));
  grpc::Status status = Call(MakeChannelCredentials(tls_), "not-the-token");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
}

TEST_F(TlsCoordinatorTest, MutualTlsRefusesAClientWithoutACertificate) {
  ASSERT_NO_FATAL_FAILURE(Start(true));
  TlsMaterial no_certificate = tls_;
  no_certificate.mutual = false;  // trusts the CA, presents nothing
  grpc::Status refused = Call(MakeChannelCredentials(no_certificate), "secret");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  grpc::Status served = Call(MakeChannelCredentials(tls_), "secret");
  EXPECT_TRUE(served.ok()) << served.error_code() << " " << served.error_message();
}

TEST_F(TlsCoordinatorTest, CoordinatorClientUsesTheProcessTls) {
  ASSERT_NO_FATAL_FAILURE(Start(false));
  ASSERT_TRUE(UseTls(server_dir_.path(), false).ok());
  CoordinatorClient client(address_, "secret");
  auto status = client.GetJobStatus();
  EXPECT_TRUE(status.ok()) << status.status();
}

TEST(TlsFiles, GeneratedFilesArePrivateAndPem) {
  Dir dir;
  ASSERT_TRUE(GenerateRunCertificates(dir.path(), {"127.0.0.1"}).ok());
  for (const char* name : {"ca.crt", "tls.crt", "tls.key"}) {
    struct stat st;
    ASSERT_EQ(stat((dir.path() + "/" + name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << name;
  }
  auto key = ReadFile(dir.path() + "/tls.key");
  ASSERT_TRUE(key.ok());
  EXPECT_NE(key->find("PRIVATE KEY-----"), std::string::npos);
  // No CA key is left behind: nothing else can sign for the run.
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++files;
  }
  EXPECT_EQ(files, 3u);
}

TEST(TlsFiles, MissingOrMalformedFilesNameTheFile) {
  Dir dir;
  auto missing = LoadTlsDirectory(dir.path(), false);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("ca.crt"), std::string::npos) << missing.status();

  ASSERT_TRUE(GenerateRunCertificates(dir.path(), {"127.0.0.1"}).ok());
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/tls.key", "not a key\n").ok());
  auto malformed = LoadTlsDirectory(dir.path(), false);
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(malformed.status().message().find("tls.key"), std::string::npos) << malformed.status();
  EXPECT_EQ(GenerateRunCertificates(dir.path(), {}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hptrain::ps
