#include "controller/promql/http_get.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "tests/controller/promql/test_server.h"

namespace hptrain::promql {
namespace {

using ::testing::HasSubstr;

TEST(PromqlParseHttpUrlTest, AcceptsHostPortAndPrefix) {
  absl::StatusOr<HttpUrl> url = ParseHttpUrl("http://prometheus:9090", false);
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_FALSE(url->https);
  EXPECT_EQ(url->host, "prometheus");
  EXPECT_EQ(url->port, 9090);
  EXPECT_EQ(url->path, "");
  EXPECT_EQ(url->origin, "http://prometheus:9090");

  url = ParseHttpUrl("HTTPS://prom.example.com/monitoring/prometheus//", false);
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_TRUE(url->https);
  EXPECT_EQ(url->port, 443);
  EXPECT_EQ(url->path, "/monitoring/prometheus");

  url = ParseHttpUrl("http://[::1]:8080/", false);
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 8080);
  EXPECT_EQ(url->path, "");

  url = ParseHttpUrl("http://10.0.0.7:9400/metrics?format=text", true);
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->port, 9400);
  EXPECT_EQ(url->path, "/metrics?format=text");

  url = ParseHttpUrl("http://h?x=1", true);
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->path, "/?x=1");
}

TEST(PromqlParseHttpUrlTest, RejectsMalformedUrls) {
  for (const char* bad :
       {"", "prometheus:9090", "ftp://h:21", "http://", "http://:9090", "http://h:", "http://h:0",
        "http://h:65536", "http://h:9o90", "http://h:-1", "http://user:pw@h:9090",
        "http://[::1:9090", "http://[::1]x", "http://h:9090/#frag", "http://h o:1",
        "http://h:9090/a b"}) {
    absl::StatusOr<HttpUrl> url = ParseHttpUrl(bad, true);
    EXPECT_FALSE(url.ok()) << bad;
    EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(url.status().message(), HasSubstr(absl::StrCat("\"", bad, "\""))) << bad;
  }
  EXPECT_FALSE(ParseHttpUrl("http://h:9090/prefix?query=up", false).ok());
  EXPECT_TRUE(ParseHttpUrl("http://h:9090/prefix?query=up", true).ok());
}

TEST(PromqlEncodeQueryComponentTest, KeepsOnlyUnreservedCharacters) {
  EXPECT_EQ(EncodeQueryComponent("abcXYZ019-_.~"), "abcXYZ019-_.~");
  EXPECT_EQ(EncodeQueryComponent("sum(up{job=\"a b\"}) + 1"),
            "sum%28up%7Bjob%3D%22a%20b%22%7D%29%20%2B%201");
  EXPECT_EQ(EncodeQueryComponent("&#%/?\n"), "%26%23%25%2F%3F%0A");
  EXPECT_EQ(EncodeQueryComponent("é"), "%C3%A9");
  EXPECT_EQ(EncodeQueryComponent(""), "");
}

TEST(PromqlHttpGetTest, ConnectionRefusedIsUnavailableNamingTheUrl) {
  int port = testing::UnusedPort();
  absl::StatusOr<HttpUrl> url = ParseHttpUrl(absl::StrCat("http://127.0.0.1:", port), false);
  ASSERT_TRUE(url.ok());
  HttpGetRequest request;
  request.target = "/metrics?secret=1";
  request.timeout = absl::Seconds(2);
  absl::StatusOr<HttpGetResponse> response = HttpGet(*url, request);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(response.status().message(),
              HasSubstr(absl::StrCat("GET http://127.0.0.1:", port, "/metrics: cannot connect")));
  EXPECT_THAT(response.status().message(), ::testing::Not(HasSubstr("secret")));
}

TEST(PromqlHttpGetTest, ReturnsAnyStatusWithBodyAndHeaders) {
  testing::TestServer server;
  std::string seen_header;
  server.server().Get("/x", [&](const httplib::Request& req, httplib::Response& res) {
    seen_header = req.get_header_value("X-Test");
    res.status = 418;
    res.set_content("short and stout", "text/teapot");
  });
  server.Start();
  absl::StatusOr<HttpUrl> url = ParseHttpUrl(server.url(), false);
  ASSERT_TRUE(url.ok());
  HttpGetRequest request;
  request.target = "/x";
  request.headers.emplace_back("X-Test", "yes");
  absl::StatusOr<HttpGetResponse> response = HttpGet(*url, request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 418);
  EXPECT_EQ(response->body, "short and stout");
  EXPECT_EQ(response->content_type, "text/teapot");
  EXPECT_EQ(seen_header, "yes");
}

}  // namespace
}  // namespace hptrain::promql
