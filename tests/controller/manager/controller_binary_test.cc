// hptrain-controller itself: --help, bad flags and config, the manifests' flags, and a run
// against the API server double from a kubeconfig file until SIGTERM, with /readyz, /metrics
// (checked by promtool) and the lease released on the way out.
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/controller/manager/controller_fixture.h"
#include "tests/controller/manager/subprocess.h"
#include "yaml-cpp/yaml.h"

namespace hptrain::manager::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// The controller's own variables, and those it would find a cluster with, are kept from the
// child so that only the command line configures it.
const std::vector<std::string> kUnset = {
    "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAME",
    "POD_NAMESPACE", "HPTRAIN_NAMESPACE", "HPTRAIN_LEADER_ELECT",
    "HPTRAIN_LEADER_ELECTION_NAMESPACE", "HPTRAIN_LEADER_ELECTION_ID", "HPTRAIN_METRICS_ADDRESS",
    "HPTRAIN_HEALTH_ADDRESS", "HPTRAIN_PROMETHEUS_URL", "HPTRAIN_WORKERS",
    "HPTRAIN_DEFAULT_IMAGE"};

const char* const kContractFlags[] = {
    "--kubeconfig",     "--namespace",      "--leader-elect",  "--leader-election-namespace",
    "--leader-election-id", "--metrics-address", "--health-address", "--prometheus-url",
    "--workers"};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Help() {
  std::string out;
  std::optional<int> code =
      RunToCompletion({HPTRAIN_CONTROLLER_BIN, "--help"}, &out, nullptr, kUnset);
  EXPECT_EQ(code, 0);
  return out;
}

// Runs the binary with `args` (and the variables `set`); expects exit 2 and exactly one stderr
// line naming `what`.
void ExpectBadInput(const std::vector<std::string>& args, const std::string& what,
                    const std::vector<std::string>& set = {}) {
  std::vector<std::string> argv = {HPTRAIN_CONTROLLER_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string err;
  std::optional<int> code = RunToCompletion(argv, nullptr, &err, kUnset, set);
  EXPECT_EQ(code, 2) << err;
  EXPECT_THAT(err, StartsWith("hptrain-controller: "));
  EXPECT_THAT(err, HasSubstr(what));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(ControllerBinaryTest, HelpListsEveryFlag) {
  std::string help = Help();
  EXPECT_THAT(help, StartsWith("usage: hptrain-controller"));
  for (const char* flag : kContractFlags) EXPECT_THAT(help, HasSubstr(absl::StrCat("  ", flag)));
  EXPECT_THAT(help, HasSubstr("$KUBECONFIG"));
}

TEST(ControllerBinaryTest, ManifestsPassOnlyFlagsTheBinaryDefines) {
  std::string help = Help();
  std::vector<std::string> flags;
  YAML::Node deployment = YAML::LoadFile(
      absl::StrCat(HPTRAIN_SOURCE_DIR, "/deploy/controller/deployment.yaml"));
  for (const YAML::Node& container : deployment["spec"]["template"]["spec"]["containers"]) {
    for (const YAML::Node& arg : container["args"]) {
      std::string text = arg.as<std::string>();
      flags.push_back(text.substr(0, text.find('=')));
    }
  }
  ASSERT_FALSE(flags.empty());
  std::string chart =
      ReadFile(absl::StrCat(HPTRAIN_SOURCE_DIR, "/charts/hptrain/templates/deployment.yaml"));
  std::regex chart_flag(R"(- (--[a-z-]+))");
  size_t from_chart = 0;
  for (std::sregex_iterator it(chart.begin(), chart.end(), chart_flag), end; it != end; ++it) {
    flags.push_back((*it)[1]);
    ++from_chart;
  }
  EXPECT_GT(from_chart, 0u);
  for (const std::string& flag : flags) {
    EXPECT_THAT(help, HasSubstr(absl::StrCat("  ", flag, " "))) << flag << " is not a flag";
  }
}

TEST(ControllerBinaryTest, BadFlagsAndConfigExitTwoWithOneLine) {
  ExpectBadInput({"--no-such-flag"}, "--no-such-flag");
  ExpectBadInput({"--workers=0"}, "--workers");
  ExpectBadInput({"--metrics-address=localhost"}, "--metrics-address");
  ExpectBadInput({"--kubeconfig=/nonexistent/kubeconfig"}, "/nonexistent/kubeconfig");
  ExpectBadInput({}, "$HPTRAIN_WORKERS", {"HPTRAIN_WORKERS=many"});
  // No kubeconfig in a pod: the service account is used (here: its files are missing).
  ExpectBadInput({}, "in-cluster config",
                 {"KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443",
                  "HOME=/nonexistent"});
}

class ControllerBinaryRunTest : public ControllerTest {
 protected:
  std::string WriteKubeconfig() {
    std::string path = absl::StrCat(::testing::TempDir(), "/hptrain-controller-kubeconfig-",
                                     getpid(), ".yaml");
    std::ofstream out(path);
    out << "apiVersion: v1\nkind: Config\n"
        << "clusters:\n- name: double\n  cluster:\n    server: " << server_->base_url() << "\n"
        << "users:\n- name: controller\n  user:\n    token: controller-token\n"
        << "contexts:\n- name: double\n  context:\n    cluster: double\n    user: controller\n"
        << "    namespace: " << kNs << "\n"
        << "current-context: double\n";
    return path;
  }
};

// The port in a "... on http://127.0.0.1:PORT/..." log line.
int PortOf(const std::string& line) {
  absl::string_view rest = line.substr(line.find("127.0.0.1:") + 10);
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(rest.substr(0, rest.find('/')), &port)) << line;
  return port;
}

TEST_F(ControllerBinaryRunTest, ReconcilesFromAKubeconfigAndStopsCleanlyOnSigterm) {
  std::string kubeconfig = WriteKubeconfig();
  Subprocess controller;
  ASSERT_TRUE(controller
                  .Start({HPTRAIN_CONTROLLER_BIN, "--kubeconfig", kubeconfig,
                          absl::StrCat("--namespace=", kNs), "--metrics-address=127.0.0.1:0",
                          "--health-address=127.0.0.1:0", "--leader-elect",
                          absl::StrCat("--leader-election-namespace=", kControllerNs)},
                         kUnset)
                  .ok());
  auto has = [](const char* what) {
    return [what](const std::string& line) {
      return absl::StrContains(line, what) && absl::StrContains(line, "127.0.0.1:");
    };
  };
  std::optional<std::string> metrics_line =
      controller.WaitForStderrLine(has("metrics on http://"), absl::Seconds(10));
  std::optional<std::string> health_line =
      controller.WaitForStderrLine(has("health on http://"), absl::Seconds(10));
  ASSERT_TRUE(metrics_line.has_value() && health_line.has_value()) << controller.stderr_text();
  httplib::Client metrics("127.0.0.1", PortOf(*metrics_line));
  httplib::Client health("127.0.0.1", PortOf(*health_line));

  ASSERT_TRUE(WaitFor([&] {
    auto ready = health.Get("/readyz");
    return ready && ready->status == 200;
  })) << controller.stderr_text();
  auto live = health.Get("/healthz");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);

  CreateJob(MlpJob("mlp"));
  ASSERT_TRUE(WaitFor([&] { return PodNames("mlp").size() == 3 && Phase("mlp") == "Pending"; }))
      << controller.stderr_text();
  EXPECT_EQ(Succeeded("create", "pods", kControllerUser), 3);
  absl::StatusOr<Json> lease = server_->Get("leases.coordination.k8s.io", kControllerNs,
                                            "hptrain-controller");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_FALSE((*lease)["spec"].value("holderIdentity", "").empty());

  auto scrape = metrics.Get("/metrics");
  ASSERT_TRUE(scrape);
  ASSERT_EQ(scrape->status, 200);
  for (const char* name :
       {"hptrain_controller_reconcile_duration_seconds_bucket", "hptrain_controller_reconcile_errors_total",
        "hptrain_controller_queue_depth", "hptrain_controller_is_leader 1",
        "hptrain_controller_rebalances_total"}) {
    EXPECT_THAT(scrape->body, HasSubstr(name));
  }
  std::string scraped = absl::StrCat(::testing::TempDir(), "/hptrain-controller-metrics-",
                                     getpid(), ".txt");
  std::ofstream(scraped) << scrape->body;
  int promtool = std::system(absl::StrCat("promtool check metrics < ", scraped).c_str());
  EXPECT_TRUE(WIFEXITED(promtool) && WEXITSTATUS(promtool) == 0) << scrape->body;

  controller.Signal(SIGTERM);
  std::optional<int> code = controller.Wait(absl::Seconds(15));
  EXPECT_EQ(code, 0) << controller.stderr_text();
  EXPECT_THAT(controller.stderr_text(), HasSubstr("stopped"));
  lease = server_->Get("leases.coordination.k8s.io", kControllerNs, "hptrain-controller");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ((*lease)["spec"].value("holderIdentity", ""), "");  // released for the next replica
  std::remove(kubeconfig.c_str());
  std::remove(scraped.c_str());
}

}  // namespace
}  // namespace hptrain::manager::testing
