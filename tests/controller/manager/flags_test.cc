#include "controller/manager/flags.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hptrain::manager {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

absl::StatusOr<ControllerFlags> Parse(const std::vector<std::string>& args,
                                      std::map<std::string, std::string> env = {}) {
  return ParseControllerFlags(args, Env(std::move(env)));
}

TEST(ControllerFlagsTest, DefaultsMatchTheContract) {
  absl::StatusOr<ControllerFlags> flags = Parse({});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_TRUE(flags->namespaces.empty());
  EXPECT_FALSE(flags->leader_elect);
  EXPECT_EQ(flags->leader_election_id, "hptrain-controller");
  EXPECT_EQ(flags->metrics_address, ":8080");
  EXPECT_EQ(flags->health_address, ":8081");
  EXPECT_EQ(flags->webhook_address, "0");  // no webhook unless asked for (the chart asks)
  EXPECT_EQ(flags->webhook_cert_dir, "/etc/hptrain/webhook");
  EXPECT_EQ(flags->workers, 2);
  EXPECT_EQ(flags->default_image, DefaultImage());
  EXPECT_THAT(DefaultImage(), ::testing::StartsWith("hptrain/runtime:"));
}

TEST(ControllerFlagsTest, ParsesBothValueFormsRepeatedListsAndBooleans) {
  absl::StatusOr<ControllerFlags> flags =
      Parse({"--kubeconfig", "/k", "--namespace=a,b", "--namespace", " c ", "--leader-elect",
             "--leader-election-namespace=ops", "--leader-election-id", "lease",
             "--metrics-address=127.0.0.1:9000", "--health-address", "0",
             "--prometheus-url=http://prom:9090", "--workers=4", "--default-image=img:1",
             "--webhook-address=:9443", "--webhook-cert-dir", "/certs"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->webhook_address, ":9443");
  EXPECT_EQ(flags->webhook_cert_dir, "/certs");
  EXPECT_EQ(flags->kubeconfig, "/k");
  EXPECT_THAT(flags->namespaces, ElementsAre("a", "b", "c"));
  EXPECT_TRUE(flags->leader_elect);
  EXPECT_EQ(flags->leader_election_namespace, "ops");
  EXPECT_EQ(flags->leader_election_id, "lease");
  EXPECT_EQ(flags->metrics_address, "127.0.0.1:9000");
  EXPECT_EQ(flags->health_address, "0");
  EXPECT_EQ(flags->prometheus_url, "http://prom:9090");
  EXPECT_EQ(flags->workers, 4);
  EXPECT_EQ(flags->default_image, "img:1");
  flags = Parse({"--leader-elect=false"});
  ASSERT_TRUE(flags.ok());
  EXPECT_FALSE(flags->leader_elect);
}

TEST(ControllerFlagsTest, EnvironmentFillsWhatTheCommandLineLeavesOut) {
  absl::StatusOr<ControllerFlags> flags =
      Parse({"--workers=3"}, {{"HPTRAIN_NAMESPACE", "x,y"},
                              {"HPTRAIN_LEADER_ELECT", "true"},
                              {"HPTRAIN_WORKERS", "7"},
                              {"HPTRAIN_PROMETHEUS_URL", "https://p"},
                              {"KUBECONFIG", "/ignored-here"}});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_THAT(flags->namespaces, ElementsAre("x", "y"));
  EXPECT_TRUE(flags->leader_elect);
  EXPECT_EQ(flags->workers, 3);  // the command line wins
  EXPECT_EQ(flags->prometheus_url, "https://p");
  EXPECT_EQ(flags->kubeconfig, "");  // $KUBECONFIG is kube::LoadDefaultConfig's to read

  absl::StatusOr<ControllerFlags> bad = Parse({}, {{"HPTRAIN_LEADER_ELECT", "maybe"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("$HPTRAIN_LEADER_ELECT"));
}

TEST(ControllerFlagsTest, RejectsWhatCannotBeRunWithOneLineNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--bogus"}, "unknown flag --bogus"},
           {{"positional"}, "unexpected argument"},
           {{"--workers"}, "--workers needs a value"},
           {{"--workers=two"}, "--workers: expected an integer"},
           {{"--workers=0"}, "--workers: must be at least 1"},
           {{"--metrics-address=8080"}, "--metrics-address"},
           {{"--health-address=host:99999"}, "--health-address"},
           {{"--webhook-address=9443"}, "--webhook-address"},
           {{"--prometheus-url=prom:9090"}, "--prometheus-url"},
           {{"--leader-elect=sure"}, "--leader-elect"},
       }) {
    absl::StatusOr<ControllerFlags> flags = Parse(c.args);
    ASSERT_FALSE(flags.ok()) << c.args[0];
    EXPECT_EQ(flags.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(flags.status().message(), HasSubstr(c.message));
    EXPECT_EQ(std::string(flags.status().message()).find('\n'), std::string::npos);
  }
}

TEST(ControllerFlagsTest, HelpIsRequestedWithoutFailingOnOtherFlags) {
  absl::StatusOr<ControllerFlags> flags = Parse({"--workers=0", "-h"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_TRUE(flags->help);
  std::string help = ControllerHelp();
  EXPECT_THAT(help, HasSubstr("--leader-election-namespace NS"));
  EXPECT_THAT(help, HasSubstr("[$HPTRAIN_METRICS_ADDRESS]"));
}

TEST(ControllerFlagsTest, ListenAddresses) {
  absl::StatusOr<std::optional<ListenAddress>> any = ParseListenAddress("--x", ":8080");
  ASSERT_TRUE(any.ok() && any->has_value());
  EXPECT_EQ((*any)->host, "0.0.0.0");
  EXPECT_EQ((*any)->port, 8080);
  absl::StatusOr<std::optional<ListenAddress>> v6 = ParseListenAddress("--x", "[::1]:0");
  ASSERT_TRUE(v6.ok() && v6->has_value());
  EXPECT_EQ((*v6)->host, "::1");
  EXPECT_EQ((*v6)->port, 0);
  absl::StatusOr<std::optional<ListenAddress>> off = ParseListenAddress("--x", "0");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->has_value());
  EXPECT_FALSE(ParseListenAddress("--x", "[::1:80").ok());
  EXPECT_FALSE(ParseListenAddress("--x", "host:-1").ok());
}

}  // namespace
}  // namespace hptrain::manager
