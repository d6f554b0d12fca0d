// Watch semantics of the API server double over real HTTP: event sequence, resume from a
// resourceVersion, initial events, 410 Expired in-stream, bookmarks, selector transitions,
// timeouts, CloseAllWatches, and the bounded per-watcher queue.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/apiserver/test_objects.h"
#include "tests/controller/apiserver/watcher.h"

namespace hptrain::testing {
namespace {

using ::testing::ElementsAre;

constexpr absl::Duration kWait = absl::Seconds(5);

std::string MergePatch() { return "application/merge-patch+json"; }

uint64_t EventRv(const nlohmann::json& event) {
  uint64_t rv = 0;
  EXPECT_TRUE(absl::SimpleAtoi(event["object"]["metadata"].value("resourceVersion", ""), &rv));
  return rv;
}

using ApiServerWatchTest = ApiServerTest;

TEST_F(ApiServerWatchTest, StreamsLifecycleAndEndsAtTimeout) {
  WatchStream watch(port_, TjPath("ns") +
                               "?watch=1&allowWatchBookmarks=true&timeoutSeconds=3&"
                               "resourceVersion=" +
                               std::to_string(server_->resource_version()));
  ASSERT_TRUE(WaitForWatches(*server_, "trainingjobs", 1));
  MustCreate(TjPath("ns"), TrainingJob("w", "ns"));
  ASSERT_EQ(client_->Patch(TjPath("ns", "w"), {{"spec", {{"globalBatchSize", 256}}}}, MergePatch())
                .status,
            200);
  ASSERT_EQ(
      client_
          ->Patch(TjPath("ns", "w") + "/status", {{"status", {{"phase", "Running"}}}}, MergePatch())
          .status,
      200);
  ASSERT_EQ(client_->Delete(TjPath("ns", "w")).status, 200);
  ASSERT_TRUE(watch.WaitForEnd(kWait)) << "the server ends the stream at timeoutSeconds";
  EXPECT_EQ(watch.status(), 200);
  std::vector<nlohmann::json> events = watch.events();
  ASSERT_EQ(events.size(), 5u) << nlohmann::json(events).dump();
  EXPECT_THAT(watch.types(), ElementsAre("ADDED", "MODIFIED", "MODIFIED", "DELETED", "BOOKMARK"));
  EXPECT_EQ(events[1]["object"]["metadata"]["generation"], 2);
  EXPECT_EQ(events[2]["object"]["status"]["phase"], "Running");
  for (size_t i = 1; i < 4; ++i) EXPECT_GT(EventRv(events[i]), EventRv(events[i - 1]));
  // The closing bookmark carries the latest resourceVersion and nothing else of the object.
  EXPECT_EQ(EventRv(events[4]), server_->resource_version());
  EXPECT_EQ(events[4]["object"]["kind"], "TrainingJob");
  EXPECT_FALSE(events[4]["object"]["metadata"].contains("name"));
}

TEST_F(ApiServerWatchTest, ResumesFromResourceVersionAndStartsWithInitialState) {
  nlohmann::json a = MustCreate(TjPath("ns"), TrainingJob("a", "ns"));
  MustCreate(TjPath("ns"), TrainingJob("b", "ns"));
  MustCreate(TjPath("other"), TrainingJob("c", "other"));
  {
    // From a resourceVersion: only what happened after it.
    WatchStream resumed(port_, TjPath("ns") + "?watch=1&timeoutSeconds=5&resourceVersion=" +
                                   a["metadata"]["resourceVersion"].get<std::string>());
    std::vector<nlohmann::json> events = resumed.WaitForEvents(1, kWait);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0]["type"], "ADDED");
    EXPECT_EQ(events[0]["object"]["metadata"]["name"], "b");
    server_->CloseAllWatches();
    ASSERT_TRUE(resumed.WaitForEnd(kWait));
    EXPECT_EQ(resumed.events().size(), 1u);
  }
  {
    // Without one: synthetic ADDED for the current objects, then live events.
    WatchStream initial(port_,
                        "/apis/hptrain.io/v1alpha1/trainingjobs?watch=true&timeoutSeconds=5");
    ASSERT_EQ(initial.WaitForEvents(3, kWait).size(), 3u);
    MustCreate(TjPath("ns"), TrainingJob("d", "ns"));
    std::vector<nlohmann::json> events = initial.WaitForEvents(4, kWait);
    ASSERT_EQ(events.size(), 4u);
    std::vector<std::string> names;
    for (const nlohmann::json& e : events) names.push_back(e["object"]["metadata"]["name"]);
    EXPECT_THAT(names, ElementsAre("a", "b", "c", "d"));
    server_->CloseAllWatches();
    ASSERT_TRUE(initial.WaitForEnd(kWait));
  }
  EXPECT_EQ(server_->WatchCount(), 0u);
}

TEST_F(ApiServerWatchTest, TooOldResourceVersionIsExpiredErrorEventInStream) {
  nlohmann::json a = MustCreate(TjPath("ns"), TrainingJob("a", "ns"));
  MustCreate(TjPath("ns"), TrainingJob("b", "ns"));
  server_->CompactHistory();
  WatchStream watch(port_, TjPath("ns") + "?watch=1&resourceVersion=" +
                               a["metadata"]["resourceVersion"].get<std::string>());
  ASSERT_TRUE(watch.WaitForEnd(kWait));
  EXPECT_EQ(watch.status(), 200);
  std::vector<nlohmann::json> events = watch.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "ERROR");
  const nlohmann::json& status = events[0]["object"];
  EXPECT_EQ(status["kind"], "Status");
  EXPECT_EQ(status["code"], 410);
  EXPECT_EQ(status["reason"], "Expired");
  EXPECT_TRUE(absl::StartsWith(status["message"].get<std::string>(), "too old resource version: "));

  // The current resourceVersion still works after compaction.
  WatchStream fresh(port_, TjPath("ns") + "?watch=1&timeoutSeconds=5&resourceVersion=" +
                               std::to_string(server_->resource_version()));
  ASSERT_TRUE(WaitForWatches(*server_, "trainingjobs", 1));
  MustCreate(TjPath("ns"), TrainingJob("c", "ns"));
  ASSERT_EQ(fresh.WaitForEvents(1, kWait).size(), 1u);
  EXPECT_EQ(fresh.events()[0]["type"], "ADDED");
}

TEST_F(ApiServerWatchTest, BookmarksOnDemandOnlyWhenAskedFor) {
  MustCreate(PodPath("ns"), Pod("p", "ns"));
  WatchStream with(port_, PodPath("ns") +
                              "?watch=1&allowWatchBookmarks=true&timeoutSeconds=5&"
                              "resourceVersion=" +
                              std::to_string(server_->resource_version()));
  WatchStream without(port_, PodPath("ns") + "?watch=1&timeoutSeconds=5&resourceVersion=" +
                                 std::to_string(server_->resource_version()));
  ASSERT_TRUE(WaitForWatches(*server_, "pods", 2));
  server_->SendBookmarks();
  std::vector<nlohmann::json> events = with.WaitForEvents(1, kWait);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "BOOKMARK");
  // Shaped like fixture 36: a Pod with only metadata.resourceVersion.
  EXPECT_EQ(events[0]["object"],
            nlohmann::json::parse(
                R"({"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":")" +
                std::to_string(server_->resource_version()) +
                R"(","creationTimestamp":null},"spec":{"containers":null},"status":{}})"));
  MustCreate(PodPath("ns"), Pod("q", "ns"));
  ASSERT_EQ(without.WaitForEvents(1, kWait).size(), 1u);
  EXPECT_THAT(without.types(), ElementsAre("ADDED")) << "no bookmark before the ADDED";
}

TEST_F(ApiServerWatchTest, LabelSelectorTransitionsAreAddedAndDeleted) {
  MustCreate(PodPath("ns"), Pod("p", "ns", {{"app", "x"}}));
  WatchStream watch(port_, PodPath("ns") +
                               "?watch=1&timeoutSeconds=5&labelSelector=app%3Dx&"
                               "resourceVersion=" +
                               std::to_string(server_->resource_version()));
  ASSERT_TRUE(WaitForWatches(*server_, "pods", 1));
  auto relabel = [&](const std::string& value) {
    ASSERT_EQ(client_
                  ->Patch(PodPath("ns", "p"), {{"metadata", {{"labels", {{"app", value}}}}}},
                          MergePatch())
                  .status,
              200);
  };
  relabel("y");                                                   // leaves the selection
  MustCreate(PodPath("ns"), Pod("other", "ns", {{"app", "z"}}));  // never selected
  relabel("x");                                                   // comes back
  ASSERT_TRUE(server_->SetPodPhase("ns", "p", "Running").ok());
  std::vector<nlohmann::json> events = watch.WaitForEvents(3, kWait);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_THAT(watch.types(), ElementsAre("DELETED", "ADDED", "MODIFIED"));
  // DELETED carries the last state that matched, at the new resourceVersion.
  EXPECT_EQ(events[0]["object"]["metadata"]["labels"]["app"], "x");
  EXPECT_EQ(EventRv(events[0]), EventRv(events[1]) - 2);
  EXPECT_EQ(events[2]["object"]["status"]["phase"], "Running");
}

TEST_F(ApiServerWatchTest, FieldSelectorAndNamedWatch) {
  WatchStream by_field(port_,
                       "/api/v1/pods?watch=1&timeoutSeconds=5&fieldSelector="
                       "metadata.namespace%3Db");
  WatchStream by_name(port_, "/api/v1/watch/namespaces/a/pods/keep?timeoutSeconds=5");
  ASSERT_TRUE(WaitForWatches(*server_, "pods", 2));
  MustCreate(PodPath("a"), Pod("keep", "a"));
  MustCreate(PodPath("a"), Pod("drop", "a"));
  MustCreate(PodPath("b"), Pod("drop", "b"));
  std::vector<nlohmann::json> named = by_name.WaitForEvents(1, kWait);
  std::vector<nlohmann::json> fielded = by_field.WaitForEvents(1, kWait);
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0]["object"]["metadata"]["namespace"], "a");
  ASSERT_EQ(fielded.size(), 1u);
  EXPECT_EQ(fielded[0]["object"]["metadata"]["namespace"], "b");
}

TEST_F(ApiServerWatchTest, CloseAllWatchesEndsStreams) {
  WatchStream a(port_, PodPath("ns") + "?watch=1");
  WatchStream b(port_, TjPath("ns") + "?watch=1");
  ASSERT_TRUE(WaitForWatches(*server_, "", 2));
  server_->CloseAllWatches();
  EXPECT_TRUE(a.WaitForEnd(kWait));
  EXPECT_TRUE(b.WaitForEnd(kWait));
  EXPECT_TRUE(server_->WaitFor([&] { return server_->WatchCount() == 0; }, kWait));
  EXPECT_EQ(server_->RequestCount("watch", "pods"), 1);
}

TEST_F(ApiServerWatchTest, EventsAreChunkedNewlineJsonAndNeverCompressed) {
  // A raw HTTP/1.1 exchange, offering gzip: the stream must stay plain chunked JSON lines.
  MustCreate(PodPath("ns"), Pod("p", "ns"));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::string request =
      "GET " + PodPath("ns") +
      "?watch=1&timeoutSeconds=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip\r\n"
      "Connection: close\r\n\r\n";
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string raw;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) raw.append(buffer, n);
  close(fd);
  EXPECT_TRUE(absl::StartsWith(raw, "HTTP/1.1 200 OK\r\n")) << raw;
  EXPECT_TRUE(absl::StrContains(raw, "Transfer-Encoding: chunked\r\n")) << raw;
  EXPECT_FALSE(absl::StrContains(raw, "Content-Encoding")) << raw;
  EXPECT_TRUE(absl::StrContains(raw, "\r\n{\"type\":\"ADDED\",\"object\":{")) << raw;
  EXPECT_TRUE(absl::StrContains(raw, "}}\n\r\n")) << "one event, newline-terminated, per chunk";
  EXPECT_TRUE(absl::EndsWith(raw, "\r\n0\r\n\r\n")) << "the stream ends with the last chunk";
}

TEST(WatcherTest, SlowWatcherIsClosedInsteadOfBlockingWriters) {
  Watcher watcher(WatchFilter{}, /*queue_limit=*/3, /*allow_bookmarks=*/false);
  for (int i = 0; i < 5; ++i) {
    nlohmann::json pod = {{"metadata", {{"name", "p"}, {"namespace", "ns"}}}};
    watcher.Offer({EventType::kAdded, std::make_shared<StoredObject>(pod, i + 1), nullptr});
  }
  EXPECT_TRUE(watcher.overflowed());
  std::string line;
  EXPECT_EQ(watcher.Pop(&line, absl::ZeroDuration()), Watcher::PopResult::kClosed);
}

TEST(WatcherTest, InitialEventsDoNotCountAgainstTheLimit) {
  Watcher watcher(WatchFilter{}, /*queue_limit=*/2, /*allow_bookmarks=*/false);
  nlohmann::json pod = {{"metadata", {{"name", "p"}, {"namespace", "ns"}}}};
  for (int i = 0; i < 10; ++i) watcher.OfferInitial(std::make_shared<StoredObject>(pod, i + 1));
  watcher.Offer({EventType::kModified, std::make_shared<StoredObject>(pod, 11), nullptr});
  EXPECT_FALSE(watcher.overflowed());
  std::string line;
  int lines = 0;
  while (watcher.Pop(&line, absl::ZeroDuration()) == Watcher::PopResult::kLine) ++lines;
  EXPECT_EQ(lines, 11);
  EXPECT_TRUE(absl::StartsWith(line, "{\"type\":\"MODIFIED\",\"object\":"));
}

}  // namespace
}  // namespace hptrain::testing
