#include "runtime/metrics/http_server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "runtime/metrics/exposition.h"

namespace hptrain::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

httplib::Result Get(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  client.set_read_timeout(2);
  return client.Get(path.c_str());
}

TEST(MetricsServerTest, ServesMetricsHealthAndReadiness) {
  Registry registry({{"trainingjob", "j"}});
  registry.Counter("hptrain_comm_bytes_total", "Bytes.", {"direction"})
      ->WithLabels({"sent"})
      ->Inc(7);
  MetricsServer server(&registry);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  ASSERT_GT(server.port(), 0);
  EXPECT_TRUE(server.running());

  httplib::Result metrics = Get(server.port(), "/metrics");
  ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->get_header_value("Content-Type"), StartsWith("text/plain; version=0.0.4"));
  EXPECT_EQ(metrics->body, TextExposition(registry));
  EXPECT_THAT(metrics->body,
              HasSubstr("hptrain_comm_bytes_total{trainingjob=\"j\",direction=\"sent\"} 7\n"));

  httplib::Result health = Get(server.port(), "/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok");

  httplib::Result not_ready = Get(server.port(), "/readyz");
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->status, 503);
  server.SetReady(true);
  httplib::Result ready = Get(server.port(), "/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);

  httplib::Result missing = Get(server.port(), "/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);

  // Metrics updated after start show up in the next scrape.
  registry.Gauge("hptrain_step", "Step.")->Get()->Set(42);
  httplib::Result again = Get(server.port(), "/metrics");
  ASSERT_TRUE(again);
  EXPECT_THAT(again->body, HasSubstr("hptrain_step{trainingjob=\"j\"} 42\n"));
}

TEST(MetricsServerTest, CustomHandlerGetsPathAndParams) {
  MetricsServer server(nullptr);
  ASSERT_TRUE(server
                  .Handle("/debug/echo",
                          [](const HttpRequest& request) {
                            auto it = request.params.find("x");
                            return HttpResponse{
                                201,
                                request.path + " " + (it == request.params.end() ? "" : it->second),
                                "application/json"};
                          })
                  .ok());
  EXPECT_EQ(server.Handle("/debug/echo", nullptr).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(server.Handle("/metrics", nullptr).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(server.Handle("relative", nullptr).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  EXPECT_EQ(server.Handle("/late", nullptr).code(), absl::StatusCode::kFailedPrecondition);

  httplib::Result res = Get(server.port(), "/debug/echo?x=5");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 201);
  EXPECT_EQ(res->body, "/debug/echo 5");
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");

  httplib::Result metrics = Get(server.port(), "/metrics");  // null registry: empty exposition
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->body, "");
}

TEST(MetricsServerTest, PortInUseIsAlreadyExists) {
  Registry registry;
  MetricsServer first(&registry);
  ASSERT_TRUE(first.Start("127.0.0.1", 0).ok());
  MetricsServer second(&registry);
  absl::Status status = second.Start("127.0.0.1", first.port());
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(status.message(),
            "metrics port 127.0.0.1:" + std::to_string(first.port()) + " already in use");
  EXPECT_FALSE(second.running());
  EXPECT_EQ(second.port(), 0);
  // The first server is unaffected.
  httplib::Result res = Get(first.port(), "/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(MetricsServerTest, PortHeldByAnotherSocket) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int port = ntohs(addr.sin_port);

  MetricsServer server(nullptr);
  absl::Status status = server.Start("127.0.0.1", port);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(status.message(), "metrics port 127.0.0.1:" + std::to_string(port) + " already in use");
  close(fd);
}

TEST(MetricsServerTest, StartTwiceAndStopIsIdempotent) {
  MetricsServer server(nullptr);
  server.Stop();  // never started: no-op
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  EXPECT_EQ(server.Start("127.0.0.1", 0).code(), absl::StatusCode::kFailedPrecondition);
  int port = server.port();
  server.Stop();
  server.Stop();
  EXPECT_FALSE(server.running());
  EXPECT_EQ(server.port(), 0);
  EXPECT_FALSE(Get(port, "/healthz"));  // nothing listens any more

  // Restart works, and the ready flag is kept.
  server.SetReady(true);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  httplib::Result res = Get(server.port(), "/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(MetricsServerTest, InvalidArguments) {
  MetricsServer server(nullptr);
  EXPECT_EQ(server.Start("127.0.0.1", 70000).code(), absl::StatusCode::kInvalidArgument);
  // TEST-NET-1 is never a local address: bind fails with EADDRNOTAVAIL, without any DNS.
  absl::Status status = server.Start("192.0.2.1", 0);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("192.0.2.1:0"));
  EXPECT_FALSE(server.running());
}

TEST(MetricsServerTest, StopRightAfterStart) {
  for (int i = 0; i < 20; ++i) {
    MetricsServer server(nullptr);
    ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
    server.Stop();
  }
}

}  // namespace
}  // namespace hptrain::metrics
