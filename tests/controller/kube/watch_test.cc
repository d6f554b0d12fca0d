#include "controller/kube/watch.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "controller/kube/api_error.h"
#include "controller/kube/client.h"
#include "tests/controller/kube/fake_server.h"
#include "tests/controller/kube/test_client.h"
#include "tests/controller/kube/fixtures.h"

namespace hptrain::kube {
namespace {

using ::hptrain::kube::testing::NewTestClient;

using ::hptrain::kube::testing::Connection;
using ::hptrain::kube::testing::FakeServer;
using ::hptrain::kube::testing::Fixture;
using ::hptrain::kube::testing::LoadFixture;
using ::hptrain::kube::testing::RecordedRequest;

struct Seen {
  std::string type;
  std::string name;
  std::string rv;
};

WatchHandler Collect(std::vector<Seen>* seen) {
  return [seen](const WatchEvent& event) {
    seen->push_back(
        {WatchEventTypeName(event.type), NameOf(event.object), event.ResourceVersion()});
    return absl::OkStatus();
  };
}

TEST(KubeWatchDecoderTest, SplitsEventsWhateverTheChunkBoundaries) {
  std::string stream =
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n"
      "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"}}}"
      "\n"
      "\n"
      "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"5\"}}}\n";
  for (size_t piece : {size_t{1}, size_t{7}, stream.size()}) {
    WatchDecoder decoder;
    std::vector<Seen> seen;
    for (size_t i = 0; i < stream.size(); i += piece) {
      ASSERT_TRUE(decoder.Feed(absl::string_view(stream).substr(i, piece), Collect(&seen)).ok());
    }
    EXPECT_FALSE(decoder.HasPartialEvent());
    ASSERT_EQ(seen.size(), 3u) << "piece " << piece;
    EXPECT_EQ(seen[0].type, "ADDED");
    EXPECT_EQ(seen[1].rv, "2");
    EXPECT_EQ(seen[2].type, "BOOKMARK");
    EXPECT_EQ(seen[2].rv, "5");
  }
}

TEST(KubeWatchDecoderTest, RejectsMalformedEventsAndReportsPartialOnes) {
  WatchDecoder decoder;
  std::vector<Seen> seen;
  EXPECT_TRUE(decoder.Feed("{\"type\":\"ADDED\",\"obj", Collect(&seen)).ok());
  EXPECT_TRUE(decoder.HasPartialEvent());
  EXPECT_EQ(ParseWatchEvent("{\"type\":\"EXPLODED\",\"object\":{}}").status().code(),
            absl::StatusCode::kInternal);
  EXPECT_FALSE(ParseWatchEvent("not json").ok());
  EXPECT_FALSE(ParseWatchEvent("{\"type\":\"ADDED\"}").ok());
  WatchDecoder fresh;
  EXPECT_EQ(fresh.Feed("garbage\n", Collect(&seen)).code(), absl::StatusCode::kInternal);
}

TEST(KubeWatchDecoderTest, HandlerErrorStopsDecoding) {
  WatchDecoder decoder;
  int calls = 0;
  absl::Status status =
      decoder.Feed("{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"ADDED\",\"object\":{}}\n",
                   [&](const WatchEvent&) {
                     ++calls;
                     return absl::AbortedError("enough");
                   });
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(calls, 1);
}

class KubeWatchFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override { HPTRAIN_REQUIRE_FIXTURES(); }

  // Serves the raw recorded stream of `number`, watches with `options`, returns the result.
  absl::Status Replay(const std::string& number, const Resource& resource,
                      const WatchOptions& options, std::vector<Seen>* seen) {
    absl::StatusOr<Fixture> fixture = LoadFixture(number);
    EXPECT_TRUE(fixture.ok()) << fixture.status();
    if (!fixture.ok()) return fixture.status();
    EXPECT_FALSE(fixture->raw_http.empty());
    FakeServer server(testing::ReplayHandler(*fixture));
    EXPECT_TRUE(server.Start().ok());
    absl::Status status =
        NewTestClient(server.url(), "t", std::nullopt)->Watch(resource, "fixtures", options, Collect(seen));
    server.Stop();
    std::vector<RecordedRequest> sent = server.requests();
    EXPECT_EQ(sent.size(), 1u);
    if (!sent.empty()) {
      EXPECT_EQ(sent[0].method, "GET");
      EXPECT_EQ(sent[0].target, fixture->path);
      EXPECT_EQ(sent[0].Header("Content-Type"), "");
    }
    return status;
  }
};

TEST_F(KubeWatchFixtureTest, LifecycleEventsArriveInOrder) {
  WatchOptions options;
  options.timeout_seconds = 6;
  std::vector<Seen> seen;
  absl::Status status = Replay("07", TrainingJobs(), options, &seen);
  EXPECT_TRUE(status.ok()) << status;  // the server ended the stream at timeoutSeconds
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].type, "ADDED");
  EXPECT_EQ(seen[0].rv, "217");
  EXPECT_EQ(seen[1].type, "MODIFIED");
  EXPECT_EQ(seen[1].rv, "218");
  EXPECT_EQ(seen[2].type, "MODIFIED");
  EXPECT_EQ(seen[2].rv, "220");
  EXPECT_EQ(seen[3].type, "DELETED");
  EXPECT_EQ(seen[3].rv, "221");
  for (const Seen& s : seen) EXPECT_EQ(s.name, "watched");
}

TEST_F(KubeWatchFixtureTest, GarbageCollectedPodsThenBookmark) {
  absl::StatusOr<Fixture> fixture = LoadFixture("36");
  ASSERT_TRUE(fixture.ok());
  FakeServer server(testing::ReplayHandler(*fixture));
  ASSERT_TRUE(server.Start().ok());
  WatchOptions options;
  options.resource_version = "237";
  options.timeout_seconds = 8;
  std::vector<WatchEvent> events;
  absl::Status status =
      NewTestClient(server.url(), "t", std::nullopt)->Watch(Pods(), "fixtures", options, [&](const WatchEvent& event) {
        events.push_back(event);
        return absl::OkStatus();
      });
  server.Stop();
  EXPECT_TRUE(status.ok()) << status;
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, WatchEventType::kModified);
  EXPECT_TRUE(IsBeingDeleted(events[0].object));
  EXPECT_EQ(events[1].type, WatchEventType::kDeleted);
  EXPECT_EQ(NameOf(events[1].object), "resnet-worker-0");
  EXPECT_EQ(events[2].type, WatchEventType::kBookmark);
  EXPECT_EQ(events[2].ResourceVersion(), "242");
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].target, fixture->path);
}

TEST_F(KubeWatchFixtureTest, TooOldResourceVersionIsGone) {
  WatchOptions options;
  options.resource_version = "1";
  options.allow_bookmarks = false;
  options.timeout_seconds = 0;
  std::vector<Seen> seen;
  absl::Status status = Replay("38", TrainingJobs(), options, &seen);
  EXPECT_TRUE(IsGone(status)) << status;
  EXPECT_EQ(status.message(), "too old resource version: 1 (216) (410 Expired)");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].type, "ERROR");
}

TEST(KubeWatchTest, HttpErrorBeforeTheStreamIsDecoded) {
  FakeServer server([](const RecordedRequest&, Connection& c) {
    c.Respond(403, R"({"kind":"Status","message":"pods is forbidden","reason":"Forbidden",)"
                   R"("code":403})");
  });
  ASSERT_TRUE(server.Start().ok());
  absl::Status status =
      NewTestClient(server.url(), "t", std::nullopt)->Watch(Pods(), "", WatchOptions(), [](const WatchEvent&) {
        return absl::OkStatus();
      });
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(status.message(), "pods is forbidden (403 Forbidden)");
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].target,
            "/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=300");
}

TEST(KubeWatchTest, StreamCutInTheMiddleOfAnEventIsUnavailable) {
  FakeServer server([](const RecordedRequest&, Connection& c) {
    c.StartChunked();
    c.Chunk("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n{\"type\":\"MOD");
    c.EndChunked();
  });
  ASSERT_TRUE(server.Start().ok());
  std::vector<Seen> seen;
  absl::Status status =
      NewTestClient(server.url(), "t", std::nullopt)->Watch(Pods(), "ns", WatchOptions(), Collect(&seen));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_EQ(seen.size(), 1u);
}

TEST(KubeWatchTest, CancelFromAnotherThreadEndsABlockedWatch) {
  absl::Notification client_closed;
  FakeServer server([&](const RecordedRequest&, Connection& c) {
    c.StartChunked();
    c.Chunk("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n");
    // Keep the stream open until the client goes away (or the test's server stops).
    if (c.WaitClosed(absl::Seconds(20)) && !c.stopping()) client_closed.Notify();
  });
  ASSERT_TRUE(server.Start().ok());
  std::unique_ptr<Client> client = NewTestClient(server.url(), "t", std::nullopt);
  Canceller cancel;
  WatchOptions options;
  options.cancel = &cancel;
  absl::Notification first_event;
  absl::Status status;
  std::thread watcher([&] {
    status = client->Watch(Pods(), "ns", options, [&](const WatchEvent&) {
      first_event.Notify();
      return absl::OkStatus();
    });
  });
  ASSERT_TRUE(first_event.WaitForNotificationWithTimeout(absl::Seconds(10)));
  cancel.Cancel();
  watcher.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_TRUE(client_closed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // A cancelled canceller refuses new calls until Reset.
  std::vector<Seen> none;
  EXPECT_EQ(client->Watch(Pods(), "ns", options, Collect(&none)).code(),
            absl::StatusCode::kCancelled);
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace hptrain::kube
