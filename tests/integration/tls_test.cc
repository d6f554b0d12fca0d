// spec.security.tls through the real binaries: `hptrain run` generates a CA and a certificate for
// the run, its ps (two parameter-server shards) and workers train over mutual TLS, and while it
// runs its coordinator refuses a plaintext client, a client without a certificate and a wrong
// token over TLS, while /metrics stays plaintext. A worker told to use TLS without the files is bad
// input.
#include <sys/stat.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "runtime/ps/coordinator_service.h"
#include "runtime/ps/tls_credentials.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

// The value after `flag` on the command line of `pid`, "" if none.
std::string ArgumentOf(pid_t pid, const std::string& flag) {
  const std::string cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> args;
  size_t start = 0;
  while (start < cmdline.size()) {
    size_t end = cmdline.find('\0', start);
    if (end == std::string::npos) end = cmdline.size();
    args.push_back(cmdline.substr(start, end - start));
    start = end + 1;
  }
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) return args[i + 1];
  }
  return "";
}

grpc::Status GetJobStatus(const std::string& address,
                          const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                          const std::string& token) {
  auto stub = hptrain::v1::Coordinator::NewStub(grpc::CreateChannel(address, credentials));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  context.AddMetadata("authorization", "Bearer " + token);
  hptrain::v1::GetJobStatusRequest request;
  hptrain::v1::JobStatus response;
  return stub->GetJobStatus(&context, request, &response);
}

TEST(Tls, RunTrainsOverMutualTlsAndItsCoordinatorRefusesOtherClients) {
  TempDir dir;
  const std::string job =
      dir.Write("tls.yaml", SyntheticJob("tls-run", 2,
                                         "  maxSteps: 60\n"
                                         "  ps: {shards: 2}\n"
                                         "  testing: {slowdown: [8, 8]}\n"
                                         "  security: {tls: {enabled: true, mutual: true}}\n"));
  bool checked = false;
  grpc::Status plaintext, no_certificate, wrong_token, right;
  mode_t key_mode = 0;
  int metrics_status = -1;
  std::string tls_dir;
  ProcessResult r = RunProcess(
      {HptrainBinary(), "run", job, "--quiet", "--set", "spec.strategy.type=ps"}, 300, [&](pid_t) {
        if (checked) return;
        std::vector<pid_t> ps = FindProcesses({job, "--port-file"});
        if (ps.empty()) return;
        tls_dir = ArgumentOf(ps[0], "--tls-dir");
        const std::string port_file = ArgumentOf(ps[0], "--port-file");
        const std::string ports = ReadFile(port_file);
        if (tls_dir.empty() || ports.find(' ') == std::string::npos) return;
        const std::string address = "127.0.0.1:" + ports.substr(0, ports.find(' '));
        // /metrics stays plaintext HTTP on its own port.
        httplib::Client metrics("127.0.0.1", std::stoi(ports.substr(ports.find(' ') + 1)));
        metrics.set_connection_timeout(2, 0);
        if (auto response = metrics.Get("/metrics")) metrics_status = response->status;
        auto tls = ps::LoadTlsDirectory(tls_dir, true);
        ASSERT_TRUE(tls.ok()) << tls.status();
        const std::string token = ReadFile(ArgumentOf(ps[0], "--token-file"));
        struct stat st;
        if (stat((tls_dir + "/tls.key").c_str(), &st) == 0) key_mode = st.st_mode & 0777;
        plaintext = GetJobStatus(address, grpc::InsecureChannelCredentials(), token);
        ps::TlsMaterial anonymous = *tls;
        anonymous.mutual = false;  // trusts the CA, presents no certificate
        no_certificate = GetJobStatus(address, ps::MakeChannelCredentials(anonymous), token);
        wrong_token = GetJobStatus(address, ps::MakeChannelCredentials(*tls), token + "x");
        right = GetJobStatus(address, ps::MakeChannelCredentials(*tls), token);
        checked = true;
      });
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(checked) << "never saw the ps serving";
  EXPECT_EQ(plaintext.error_code(), grpc::StatusCode::UNAVAILABLE) << plaintext.error_message();
  EXPECT_EQ(no_certificate.error_code(), grpc::StatusCode::UNAVAILABLE)
      << no_certificate.error_message();
  EXPECT_EQ(wrong_token.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << wrong_token.error_message();
  EXPECT_TRUE(right.ok()) << right.error_code() << " " << right.error_message();
  EXPECT_EQ(key_mode, 0600u);
  EXPECT_EQ(metrics_status, 200);
  // The run's key material goes with its run directory.
  EXPECT_FALSE(FileExists(tls_dir));
}

TEST(Tls, WorkerWithTlsButNoDirectoryIsBadInput) {
  TempDir dir;
  const std::string job =
      dir.Write("tls.yaml", SyntheticJob("tls-missing", 1, "  security: {tls: {enabled: true}}\n"));
  const std::string token = dir.Write("token", "secret");
  ProcessResult r = RunProcess({HptrainBinary(), "worker", "--job", job, "--rank", "0",
                                "--coordinator", "127.0.0.1:1", "--token-file", token});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  std::vector<std::string> lines = Lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("spec.security.tls.enabled needs --tls-dir"), std::string::npos) << r.err;

  ProcessResult missing =
      RunProcess({HptrainBinary(), "worker", "--job", job, "--rank", "0", "--coordinator",
                  "127.0.0.1:1", "--token-file", token, "--tls-dir", dir.path()});
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find(dir.path() + "/ca.crt"), std::string::npos) << missing.err;
}

TEST(Tls, BadTlsFieldsAreBadInput) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  security: {tls: {mutual: true}}\n",
       "spec.security.tls.enabled: must be true when mutual is set"},
      {"  security: {tls: {enabled: true, secretName: Not_A_Name}}\n",
       "spec.security.tls.secretName"},
      {"  security: {tls: {enabled: true, ca: x}}\n", "spec.security.tls.ca"},
  };
  for (const auto& [extra, message] : cases) {
    const std::string job = dir.Write("bad.yaml", SyntheticJob("tls-bad", 1, extra));
    ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 60);
    EXPECT_EQ(r.exit_code, 2) << extra << r.err;
    std::vector<std::string> lines = Lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_NE(lines[0].find(message), std::string::npos) << message << " not in: " << r.err;
  }
}

}  // namespace
}  // namespace hptrain::testing
