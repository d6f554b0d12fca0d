#include "controller/promql/scrape.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/metrics/http_server.h"
#include "runtime/metrics/registry.h"
#include "tests/controller/promql/test_server.h"

namespace hptrain::promql {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::StartsWith;

class PromqlScrapeMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.server().Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      absl::MutexLock lock(&mu_);
      accept_ = req.get_header_value("Accept");
      res.status = status_;
      res.set_content(page_, "text/plain; version=0.0.4; charset=utf-8");
    });
    server_.server().Get("/slow", [this](const httplib::Request&, httplib::Response& res) {
      server_.WaitForRelease(absl::Seconds(10));
      res.set_content("a 1\n", "text/plain");
    });
    server_.Start();
  }

  void Serve(int status, std::string page) {
    absl::MutexLock lock(&mu_);
    status_ = status;
    page_ = std::move(page);
  }

  std::string MetricsUrl() const { return server_.url() + "/metrics"; }

  testing::TestServer server_;
  absl::Mutex mu_;
  int status_ ABSL_GUARDED_BY(mu_) = 200;
  std::string page_ ABSL_GUARDED_BY(mu_);
  std::string accept_ ABSL_GUARDED_BY(mu_);
};

TEST_F(PromqlScrapeMetricsTest, ReadsThePage) {
  Serve(200,
        "# HELP hptrain_step Current step.\n# TYPE hptrain_step gauge\n"
        "hptrain_step{trainingjob=\"mnist\",rank=\"0\"} 17\nhptrain_loss 0.5 1712000000000\n");
  absl::StatusOr<std::vector<Sample>> samples = ScrapeMetrics(MetricsUrl(), absl::Seconds(5));
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 2u);
  EXPECT_THAT((*samples)[0].labels, ElementsAre(Pair("__name__", "hptrain_step"),
                                                Pair("rank", "0"), Pair("trainingjob", "mnist")));
  EXPECT_EQ((*samples)[0].value, 17.0);
  EXPECT_EQ((*samples)[1].timestamp_seconds, 1712000000.0);
  absl::MutexLock lock(&mu_);
  EXPECT_THAT(accept_, HasSubstr("text/plain"));
}

TEST_F(PromqlScrapeMetricsTest, NotFoundIsUnavailableNamingUrlAndStatus) {
  std::string url = server_.url() + "/nope";
  absl::StatusOr<std::vector<Sample>> samples = ScrapeMetrics(url, absl::Seconds(5));
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(samples.status().message(), HasSubstr(url));
  EXPECT_THAT(samples.status().message(), HasSubstr("404"));
}

TEST_F(PromqlScrapeMetricsTest, ServerErrorIsUnavailable) {
  Serve(503, "a 1\n");
  absl::StatusOr<std::vector<Sample>> samples = ScrapeMetrics(MetricsUrl(), absl::Seconds(5));
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(samples.status().message(), HasSubstr("HTTP 503"));
}

TEST_F(PromqlScrapeMetricsTest, MalformedPageNamesUrlAndLine) {
  Serve(200, "# TYPE a gauge\na 1\nb{rank=3} 2\n");
  absl::StatusOr<std::vector<Sample>> samples = ScrapeMetrics(MetricsUrl(), absl::Seconds(5));
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(samples.status().message()), StartsWith(MetricsUrl() + ": line 3: "));
  EXPECT_THAT(samples.status().message(), HasSubstr("label \"rank\""));
}

TEST_F(PromqlScrapeMetricsTest, SlowServerIsUnavailable) {
  std::string url = server_.url() + "/slow";
  absl::StatusOr<std::vector<Sample>> samples = ScrapeMetrics(url, absl::Milliseconds(300));
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(samples.status().message(), HasSubstr(url));
}

TEST(PromqlScrapeMetricsStandaloneTest, UnreachableAndBadUrls) {
  std::string url = absl::StrCat("http://127.0.0.1:", testing::UnusedPort(), "/metrics");
  absl::StatusOr<std::vector<Sample>> samples = ScrapeMetrics(url, absl::Seconds(2));
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(samples.status().message(), HasSubstr(url));

  samples = ScrapeMetrics("127.0.0.1:9400/metrics", absl::Seconds(2));
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(samples.status().message(), HasSubstr("127.0.0.1:9400/metrics"));
}

// End to end with the runtime's own endpoint: what the controller scrapes from a worker.
TEST(PromqlScrapeMetricsStandaloneTest, ReadsTheRuntimeMetricsServer) {
  metrics::Registry registry({{"trainingjob", "mnist"}, {"rank", "2"}});
  registry.Gauge("hptrain_step", "Current step.")->Get()->Set(99);
  registry.Counter("hptrain_comm_bytes_total", "Bytes.", {"direction"})
      ->WithLabels({"sent"})
      ->Inc(4096);
  metrics::MetricsServer server(&registry);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  absl::StatusOr<std::vector<Sample>> samples =
      ScrapeMetrics(absl::StrCat("http://127.0.0.1:", server.port(), "/metrics"), absl::Seconds(5));
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 2u);
  EXPECT_THAT((*samples)[0].labels,
              ElementsAre(Pair("__name__", "hptrain_comm_bytes_total"), Pair("direction", "sent"),
                          Pair("rank", "2"), Pair("trainingjob", "mnist")));
  EXPECT_EQ((*samples)[0].value, 4096.0);
  EXPECT_EQ(NameOf((*samples)[1]), "hptrain_step");
  EXPECT_EQ((*samples)[1].value, 99.0);
  server.Stop();
}

}  // namespace
}  // namespace hptrain::promql
