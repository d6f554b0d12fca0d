#include "controller/promql/prometheus_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "tests/controller/kube/test_certs.h"
#include "tests/controller/promql/test_server.h"

namespace hptrain::promql {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

constexpr char kTwoSeries[] = R"({"status":"success","data":{"resultType":"vector","result":[
  {"metric":{"__name__":"up","job":"worker","instance":"10.0.0.1:9400"},"value":[1712000000.123,"1"]},
  {"metric":{"job":"worker","instance":"10.0.0.2:9400"},"value":[1712000001,"0.25"]}]}})";

class PrometheusClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      absl::MutexLock lock(&mu_);
      ++requests_;
      path_ = req.path;
      target_ = req.target;
      query_ = req.has_param("query") ? req.get_param_value("query") : "<none>";
      authorization_ =
          req.has_header("Authorization") ? req.get_header_value("Authorization") : "<none>";
      accept_ = req.get_header_value("Accept");
      res.status = status_;
      res.set_content(body_, content_type_);
    };
    server_.server().Get("/api/v1/query", handler);
    server_.server().Get("/prom/api/v1/query", handler);
    server_.server().Get("/slow/api/v1/query",
                         [this](const httplib::Request&, httplib::Response& res) {
                           server_.WaitForRelease(absl::Seconds(10));
                           res.set_content(kTwoSeries, "application/json");
                         });
    server_.Start();
  }

  void Respond(int status, std::string body, std::string content_type = "application/json") {
    absl::MutexLock lock(&mu_);
    status_ = status;
    body_ = std::move(body);
    content_type_ = std::move(content_type);
  }

  std::unique_ptr<PrometheusClient> NewClient(PrometheusOptions options = {}) {
    if (options.url.empty()) options.url = server_.url();
    absl::StatusOr<std::unique_ptr<PrometheusClient>> client = PrometheusClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  absl::StatusOr<std::vector<Sample>> QueryWith(int status, std::string body,
                                                const std::string& expr = "up") {
    Respond(status, std::move(body));
    std::unique_ptr<PrometheusClient> client = NewClient();
    if (client == nullptr) return absl::InternalError("no client");
    return client->Query(expr);
  }

  testing::TestServer server_;
  absl::Mutex mu_;
  int status_ ABSL_GUARDED_BY(mu_) = 200;
  std::string body_ ABSL_GUARDED_BY(mu_);
  std::string content_type_ ABSL_GUARDED_BY(mu_) = "application/json";
  int requests_ ABSL_GUARDED_BY(mu_) = 0;
  std::string path_ ABSL_GUARDED_BY(mu_);
  std::string target_ ABSL_GUARDED_BY(mu_);
  std::string query_ ABSL_GUARDED_BY(mu_);
  std::string authorization_ ABSL_GUARDED_BY(mu_);
  std::string accept_ ABSL_GUARDED_BY(mu_);
};

TEST_F(PrometheusClientTest, VectorWithTwoSeries) {
  absl::StatusOr<std::vector<Sample>> samples = QueryWith(200, kTwoSeries);
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 2u);
  EXPECT_THAT((*samples)[0].labels,
              ElementsAre(Pair("__name__", "up"), Pair("instance", "10.0.0.1:9400"),
                          Pair("job", "worker")));
  EXPECT_EQ(NameOf((*samples)[0]), "up");
  EXPECT_EQ((*samples)[0].value, 1.0);
  EXPECT_DOUBLE_EQ((*samples)[0].timestamp_seconds, 1712000000.123);
  EXPECT_THAT((*samples)[1].labels,
              ElementsAre(Pair("instance", "10.0.0.2:9400"), Pair("job", "worker")));
  EXPECT_EQ(NameOf((*samples)[1]), "");
  EXPECT_EQ((*samples)[1].value, 0.25);
  EXPECT_EQ((*samples)[1].timestamp_seconds, 1712000001.0);
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(path_, "/api/v1/query");
  EXPECT_EQ(accept_, "application/json");
  EXPECT_EQ(authorization_, "<none>");
}

TEST_F(PrometheusClientTest, Scalar) {
  absl::StatusOr<std::vector<Sample>> samples = QueryWith(
      200, R"({"status":"success","data":{"resultType":"scalar","result":[1712000002.5,"42"]}})");
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 1u);
  EXPECT_THAT((*samples)[0].labels, IsEmpty());
  EXPECT_EQ((*samples)[0].value, 42.0);
  EXPECT_EQ((*samples)[0].timestamp_seconds, 1712000002.5);
}

TEST_F(PrometheusClientTest, EmptyVector) {
  absl::StatusOr<std::vector<Sample>> samples =
      QueryWith(200, R"({"status":"success","data":{"resultType":"vector","result":[]}})");
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_THAT(*samples, IsEmpty());
}

TEST_F(PrometheusClientTest, SpecialValuesAndWarnings) {
  absl::StatusOr<std::vector<Sample>> samples = QueryWith(200, R"({"status":"success",
    "warnings":["some warning"],
    "data":{"resultType":"vector","result":[
      {"metric":{"k":"nan"},"value":[1,"NaN"]},
      {"metric":{"k":"pinf"},"value":[1,"+Inf"]},
      {"metric":{"k":"ninf"},"value":[1,"-Inf"]},
      {"metric":{"k":"exp"},"value":[1,"-1.5e-7"]}]}})");
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 4u);
  EXPECT_TRUE(std::isnan((*samples)[0].value));
  EXPECT_EQ((*samples)[1].value, INFINITY);
  EXPECT_EQ((*samples)[2].value, -INFINITY);
  EXPECT_EQ((*samples)[3].value, -1.5e-7);
}

TEST_F(PrometheusClientTest, RangeAndStringResultsAreNotInstantVectors) {
  for (const char* body :
       {R"({"status":"success","data":{"resultType":"matrix","result":[
          {"metric":{"job":"w"},"values":[[1,"1"],[2,"2"]]}]}})",
        R"({"status":"success","data":{"resultType":"string","result":[1,"hello"]}})"}) {
    absl::StatusOr<std::vector<Sample>> samples = QueryWith(200, body);
    ASSERT_FALSE(samples.ok()) << body;
    EXPECT_EQ(samples.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(samples.status().message(), HasSubstr("expected an instant vector"));
  }
}

TEST_F(PrometheusClientTest, ErrorBodies) {
  struct Case {
    int status;
    const char* body;
    absl::StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {400,
       R"({"status":"error","errorType":"bad_data","error":"1:5: parse error: unclosed left parenthesis"})",
       absl::StatusCode::kInvalidArgument,
       "prometheus: bad_data: 1:5: parse error: unclosed left parenthesis"},
      {422, R"({"status":"error","errorType":"execution","error":"many-to-many matching"})",
       absl::StatusCode::kInvalidArgument, "prometheus: execution: many-to-many matching"},
      {503,
       R"({"status":"error","errorType":"timeout","error":"query timed out in query execution"})",
       absl::StatusCode::kUnavailable, "prometheus: timeout: query timed out in query execution"},
      {500, R"({"status":"error","errorType":"internal","error":"boom"})",
       absl::StatusCode::kUnavailable, "prometheus: internal: boom"},
      {502, "<html>Bad Gateway</html>", absl::StatusCode::kUnavailable,
       "prometheus: HTTP 502: <html>Bad Gateway</html>"},
      {400, "not json", absl::StatusCode::kInvalidArgument, "prometheus: HTTP 400: not json"},
      {200, R"({"status":"error","errorType":"unavailable","error":"odd"})",
       absl::StatusCode::kUnavailable, "prometheus: unavailable: odd"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    absl::StatusOr<std::vector<Sample>> samples = QueryWith(c.status, c.body);
    ASSERT_FALSE(samples.ok());
    EXPECT_EQ(samples.status().code(), c.code) << samples.status();
    EXPECT_EQ(samples.status().message(), c.message);
  }
}

TEST_F(PrometheusClientTest, NotJsonIsInternal) {
  absl::StatusOr<std::vector<Sample>> samples = QueryWith(200, "<html>hello</html>");
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(samples.status().message(), HasSubstr("not JSON: <html>hello</html>"));
}

TEST_F(PrometheusClientTest, WrongShapesNameWhatIsWrong) {
  struct Case {
    const char* body;
    const char* what;
  };
  const Case cases[] = {
      {R"([1,2])", "status: not \"success\""},
      {R"({"data":{}})", "status: not \"success\""},
      {R"({"status":"success"})", "data: not an object"},
      {R"({"status":"success","data":{"result":[]}})", "data.resultType: not a string"},
      {R"({"status":"success","data":{"resultType":"vector"}})", "data.result: missing"},
      {R"({"status":"success","data":{"resultType":"vector","result":{}}})",
       "data.result: not an array"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"1"]}]}})",
       "data.result[0]: no \"metric\" object"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}})",
       "data.result[0].metric.a: not a string"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}})",
       "data.result[0]: no \"value\""},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1,{}]}]}})",
       "native histogram"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]},{"metric":{},"value":[1,1]}]}})",
       "data.result[1].value[1]: not a string"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":["1","1"]}]}})",
       "data.result[0].value[0]: not a number"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}})",
       "data.result[0].value: not a [time, value] pair"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"one"]}]}})",
       "data.result[0].value[1]: not a float: \"one\""},
      {R"({"status":"success","data":{"resultType":"scalar","result":"1"}})",
       "data.result: not a [time, value] pair"},
      {R"({"status":"success","data":{"resultType":"table","result":[]}})",
       "data.resultType: unknown \"table\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    absl::StatusOr<std::vector<Sample>> samples = QueryWith(200, c.body);
    ASSERT_FALSE(samples.ok());
    EXPECT_EQ(samples.status().code(), absl::StatusCode::kInternal) << samples.status();
    EXPECT_THAT(samples.status().message(), HasSubstr("prometheus: bad response: "));
    EXPECT_THAT(samples.status().message(), HasSubstr(c.what));
  }
}

TEST_F(PrometheusClientTest, QueryIsUrlEncodedAndArrivesIntact) {
  const std::string expr =
      "sum by (job) (rate(hptrain_step_total{job=\"a b\",rank=~\"1|2\"}[5m])) + 1 > 0.5 "
      "and on() vector(1) # 100% & ?x=y/z é";
  absl::StatusOr<std::vector<Sample>> samples = QueryWith(200, kTwoSeries, expr);
  ASSERT_TRUE(samples.ok()) << samples.status();
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(requests_, 1);
  EXPECT_EQ(query_, expr);
  std::string prefix = "/api/v1/query?query=";
  ASSERT_EQ(target_.rfind(prefix, 0), 0u) << target_;
  std::string encoded = target_.substr(prefix.size());
  for (char c : encoded) {
    EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) ||
                std::string("%-_.~").find(c) != std::string::npos)
        << "raw '" << c << "' in " << target_;
  }
}

TEST_F(PrometheusClientTest, PathPrefix) {
  Respond(200, kTwoSeries);
  PrometheusOptions options;
  options.url = server_.url() + "/prom/";
  std::unique_ptr<PrometheusClient> client = NewClient(options);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->url(), server_.url() + "/prom/");
  absl::StatusOr<std::vector<Sample>> samples = client->Query("up");
  ASSERT_TRUE(samples.ok()) << samples.status();
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(path_, "/prom/api/v1/query");
  EXPECT_EQ(query_, "up");
}

TEST_F(PrometheusClientTest, SendsTheBearerToken) {
  Respond(200, kTwoSeries);
  PrometheusOptions options;
  options.bearer_token = "s3cret.token";
  std::unique_ptr<PrometheusClient> client = NewClient(options);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Query("up").ok());
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(authorization_, "Bearer s3cret.token");
}

TEST_F(PrometheusClientTest, SlowServerIsUnavailableAfterTheTimeout) {
  PrometheusOptions options;
  options.url = server_.url() + "/slow";
  options.timeout = absl::Milliseconds(300);
  std::unique_ptr<PrometheusClient> client = NewClient(options);
  ASSERT_NE(client, nullptr);
  absl::StatusOr<std::vector<Sample>> samples = client->Query("up");
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(samples.status().message(),
              HasSubstr(absl::StrCat("GET ", server_.url(), "/slow/api/v1/query: ")));
}

TEST_F(PrometheusClientTest, UnreachableServerIsUnavailable) {
  PrometheusOptions options;
  options.url = absl::StrCat("http://127.0.0.1:", testing::UnusedPort());
  std::unique_ptr<PrometheusClient> client = NewClient(options);
  ASSERT_NE(client, nullptr);
  absl::StatusOr<std::vector<Sample>> samples = client->Query("up");
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(samples.status().message(), HasSubstr(options.url + "/api/v1/query"));
}

TEST_F(PrometheusClientTest, ConcurrentQueries) {
  Respond(200, kTwoSeries);
  std::unique_ptr<PrometheusClient> client = NewClient();
  ASSERT_NE(client, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        absl::StatusOr<std::vector<Sample>> samples = client->Query("up");
        if (samples.ok() && samples->size() == 2) ++ok;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 20);
}

TEST(PrometheusClientCreateTest, RejectsBadOptions) {
  for (const char* url :
       {"", "localhost:9090", "ftp://h:9090", "http://", "http://h:99999", "http://h:9090/?x=1",
        "http://u@h:9090", "http://h:abc", "http://h:9090/#f"}) {
    PrometheusOptions options;
    options.url = url;
    absl::StatusOr<std::unique_ptr<PrometheusClient>> client = PrometheusClient::Create(options);
    ASSERT_FALSE(client.ok()) << url;
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument) << url;
    EXPECT_THAT(client.status().message(), HasSubstr(absl::StrCat("\"", url, "\""))) << url;
  }
  PrometheusOptions options;
  options.url = "http://h:9090";
  options.timeout = absl::ZeroDuration();
  EXPECT_EQ(PrometheusClient::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.timeout = absl::Seconds(1);
  options.ca_file = "/nonexistent/ca.crt";
  absl::StatusOr<std::unique_ptr<PrometheusClient>> client = PrometheusClient::Create(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(client.status().message(), HasSubstr("/nonexistent/ca.crt"));
  options.ca_file.clear();
  EXPECT_TRUE(PrometheusClient::Create(options).ok());
}

// HTTPS against a server whose certificate only the test CA vouches for.
class PrometheusClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kube::testing::TestCert ca = kube::testing::MakeCa("promql test CA");
    kube::testing::TestCert leaf = kube::testing::MakeLeaf(ca, "127.0.0.1");
    std::string dir = ::testing::TempDir();
    std::string base = absl::StrCat(dir, "/promql_tls_", getpid());
    ca_path_ = base + "_ca.pem";
    cert_path_ = base + "_cert.pem";
    key_path_ = base + "_key.pem";
    std::ofstream(ca_path_) << ca.cert_pem;
    std::ofstream(cert_path_) << leaf.cert_pem;
    std::ofstream(key_path_) << leaf.key_pem;
    server_ = std::make_unique<testing::TestServer>(cert_path_, key_path_);
    server_->server().Get("/api/v1/query", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(kTwoSeries, "application/json");
    });
    server_->Start();
  }
  void TearDown() override {
    server_.reset();
    std::remove(ca_path_.c_str());
    std::remove(cert_path_.c_str());
    std::remove(key_path_.c_str());
  }

  absl::StatusOr<std::vector<Sample>> Query(const std::string& ca_file, bool insecure) {
    PrometheusOptions options;
    options.url = server_->url();
    options.ca_file = ca_file;
    options.insecure_skip_tls_verify = insecure;
    options.timeout = absl::Seconds(5);
    absl::StatusOr<std::unique_ptr<PrometheusClient>> client = PrometheusClient::Create(options);
    if (!client.ok()) return client.status();
    return (*client)->Query("up");
  }

  std::string ca_path_, cert_path_, key_path_;
  std::unique_ptr<testing::TestServer> server_;
};

TEST_F(PrometheusClientTlsTest, TrustsTheConfiguredCa) {
  absl::StatusOr<std::vector<Sample>> samples = Query(ca_path_, false);
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(samples->size(), 2u);
}

TEST_F(PrometheusClientTlsTest, RejectsAnUnknownCa) {
  absl::StatusOr<std::vector<Sample>> samples = Query("", false);
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(samples.status().message(), HasSubstr(server_->url()));
}

TEST_F(PrometheusClientTlsTest, InsecureSkipsVerification) {
  absl::StatusOr<std::vector<Sample>> samples = Query("", true);
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(samples->size(), 2u);
}

}  // namespace
}  // namespace hptrain::promql
