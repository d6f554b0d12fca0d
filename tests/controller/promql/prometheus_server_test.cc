// PrometheusClient against a real Prometheus (Debian's `prometheus` package), which scrapes a
// page served by the test: the text format, the scrape and the API as the controller meets them
// in a cluster. Skipped when no prometheus binary is on PATH.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "controller/promql/prometheus_client.h"
#include "tests/controller/promql/test_server.h"

extern char** environ;

namespace hptrain::promql {
namespace {

using ::testing::HasSubstr;

constexpr char kJob[] = "hptrain-promql-test";
constexpr char kPage[] =
    "# HELP hptrain_test_step Current step.\n"
    "# TYPE hptrain_test_step gauge\n"
    "hptrain_test_step{rank=\"3\",path=\"a\\\"b\\\\c\"} 1234.5\n"
    "# TYPE hptrain_test_special gauge\n"
    "hptrain_test_special{kind=\"inf\"} +Inf\n";

std::string FindOnPath(const std::string& name) {
  const char* path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path == nullptr ? "" : path, ':')) {
    if (dir.empty()) continue;
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// A Prometheus child process, stopped (SIGTERM, then SIGKILL after 10 s) and its temp dir removed
// when the test ends however it ends.
class PrometheusProcess {
 public:
  ~PrometheusProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      absl::Time give_up = absl::Now() + absl::Seconds(10);
      while (waitpid(pid_, &status, WNOHANG) == 0) {
        if (absl::Now() > give_up) {
          kill(pid_, SIGKILL);
          waitpid(pid_, &status, 0);
          break;
        }
        absl::SleepFor(absl::Milliseconds(20));
      }
    }
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  // Writes the config scraping `target` ("host:port") every second and starts the server on
  // 127.0.0.1:`port`. Returns false (with a gtest failure) when it cannot start.
  bool Start(const std::string& binary, const std::string& target, int port) {
    char tmpl[] = "/tmp/hptrain-promql-test-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      ADD_FAILURE() << "mkdtemp failed";
      return false;
    }
    dir_ = tmpl;
    std::string config = dir_ + "/prometheus.yml";
    std::ofstream(config) << absl::StrCat(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n",
        "scrape_configs:\n  - job_name: ", kJob, "\n    static_configs:\n      - targets: ['",
        target, "']\n");
    log_ = dir_ + "/prometheus.log";
    std::vector<std::string> args = {
        binary, "--config.file=" + config, "--storage.tsdb.path=" + dir_ + "/data",
        absl::StrCat("--web.listen-address=127.0.0.1:", port), "--log.level=info"};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    int rc = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = 0;
      ADD_FAILURE() << "cannot start " << binary << ": " << strerror(rc);
      return false;
    }
    return true;
  }

  // False once the process has exited (then reaped).
  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == 0) return true;
    pid_ = 0;
    return false;
  }

  std::string Log() const { return ReadFile(log_); }

 private:
  pid_t pid_ = 0;
  std::string dir_;
  std::string log_;
};

TEST(PrometheusServerTest, QueriesWhatPrometheusScraped) {
  std::string binary = FindOnPath("prometheus");
  if (binary.empty()) {
    std::cout << "prometheus is not on PATH (Debian package \"prometheus\"); skipping the real "
                 "server test\n";
    GTEST_SKIP() << "prometheus is not installed";
  }

  testing::TestServer target;
  target.server().Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kPage, "text/plain; version=0.0.4; charset=utf-8");
  });
  target.Start();
  std::string instance = absl::StrCat("127.0.0.1:", target.port());

  int port = testing::UnusedPort();
  PrometheusProcess prometheus;
  ASSERT_TRUE(prometheus.Start(binary, instance, port));

  PrometheusOptions options;
  options.url = absl::StrCat("http://127.0.0.1:", port);
  options.timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<PrometheusClient>> created = PrometheusClient::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  const PrometheusClient& client = **created;

  // Up to 30 s for the server to start and scrape the target once.
  const std::string up_query = absl::StrCat("up{job=\"", kJob, "\"}");
  absl::StatusOr<std::vector<Sample>> up;
  absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (true) {
    ASSERT_TRUE(prometheus.Running()) << "prometheus exited:\n" << prometheus.Log();
    up = client.Query(up_query);
    if (up.ok() && up->size() == 1 && (*up)[0].value == 1.0) break;
    ASSERT_LT(absl::Now(), give_up)
        << "target never up; last answer: "
        << (up.ok() ? absl::StrCat(up->size(), " samples") : up.status().ToString()) << "\n"
        << prometheus.Log();
    absl::SleepFor(absl::Milliseconds(250));
  }
  EXPECT_EQ((*up)[0].labels.at("instance"), instance);
  EXPECT_EQ(NameOf((*up)[0]), "up");

  absl::StatusOr<std::vector<Sample>> step = client.Query("hptrain_test_step");
  ASSERT_TRUE(step.ok()) << step.status();
  ASSERT_EQ(step->size(), 1u);
  const Sample& s = (*step)[0];
  EXPECT_EQ(NameOf(s), "hptrain_test_step");
  EXPECT_EQ(s.labels.at("job"), kJob);
  EXPECT_EQ(s.labels.at("instance"), instance);
  EXPECT_EQ(s.labels.at("rank"), "3");
  EXPECT_EQ(s.labels.at("path"), "a\"b\\c");
  EXPECT_EQ(s.labels.size(), 5u);
  EXPECT_EQ(s.value, 1234.5);
  EXPECT_GT(s.timestamp_seconds, 1.6e9);

  // A selector with quotes, escapes and a regex, through the URL encoding and PromQL's parser.
  absl::StatusOr<std::vector<Sample>> selected =
      client.Query("hptrain_test_step{path=\"a\\\"b\\\\c\", rank=~\"3|4\"} + 0.5");
  ASSERT_TRUE(selected.ok()) << selected.status();
  ASSERT_EQ(selected->size(), 1u);
  EXPECT_EQ((*selected)[0].value, 1235.0);
  EXPECT_EQ(NameOf((*selected)[0]), "");  // arithmetic drops the name

  absl::StatusOr<std::vector<Sample>> special = client.Query("hptrain_test_special");
  ASSERT_TRUE(special.ok()) << special.status();
  ASSERT_EQ(special->size(), 1u);
  EXPECT_EQ((*special)[0].value, INFINITY);

  absl::StatusOr<std::vector<Sample>> scalar = client.Query("scalar(hptrain_test_step) * 2");
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  ASSERT_EQ(scalar->size(), 1u);
  EXPECT_TRUE((*scalar)[0].labels.empty());
  EXPECT_EQ((*scalar)[0].value, 2469.0);

  absl::StatusOr<std::vector<Sample>> none = client.Query("hptrain_test_step{rank=\"99\"}");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());

  absl::StatusOr<std::vector<Sample>> range = client.Query("hptrain_test_step[10s]");
  ASSERT_FALSE(range.ok());
  EXPECT_EQ(range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(range.status().message(), HasSubstr("expected an instant vector"));

  absl::StatusOr<std::vector<Sample>> bad = client.Query("sum(");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("prometheus: bad_data: "));
}

}  // namespace
}  // namespace hptrain::promql
