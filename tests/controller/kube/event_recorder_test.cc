#include "controller/kube/event_recorder.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "controller/kube/log.h"
#include "controller/kube/timestamps.h"
#include "tests/controller/kube/fake_server.h"
#include "tests/controller/kube/test_client.h"

namespace hptrain::kube {
namespace {

using ::hptrain::kube::testing::NewTestClient;

using ::hptrain::kube::testing::Connection;
using ::hptrain::kube::testing::FakeServer;
using ::hptrain::kube::testing::RecordedRequest;

const nlohmann::json kJob = {
    {"apiVersion", "hptrain.io/v1alpha1"},
    {"kind", "TrainingJob"},
    {"metadata", {{"name", "resnet"}, {"namespace", "ns"}, {"uid", "uid-1"}}}};

class KubeEventRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogSink([this](absl::string_view line) {
      absl::MutexLock lock(&mu_);
      log_.emplace_back(line);
    });
    options_.now = [this] {
      absl::MutexLock lock(&mu_);
      return now_;
    };
    options_.instance = "hptrain-controller-0";
  }
  void TearDown() override { SetLogSink(nullptr); }

  // Answers POST with the created event and PATCH with `patch_status`.
  FakeServer::Handler Api() {
    return [this](const RecordedRequest& request, Connection& c) {
      int patch_status;
      {
        absl::MutexLock lock(&mu_);
        patch_status = patch_status_;
      }
      if (request.method == "POST") {
        c.Respond(201, request.body);
      } else if (patch_status == 200) {
        c.Respond(200, "{}");
      } else {
        c.Respond(patch_status, R"({"kind":"Status","reason":"NotFound","code":404})");
      }
    };
  }

  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = ParseKubeTime("2026-11-22T02:13:50Z").value();
  int patch_status_ ABSL_GUARDED_BY(mu_) = 200;
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
  EventRecorderOptions options_;
};

TEST_F(KubeEventRecorderTest, CreatesACoreEventAboutTheObject) {
  FakeServer server(Api());
  ASSERT_TRUE(server.Start().ok());
  std::unique_ptr<Client> client = NewTestClient(server.url());
  EventRecorder recorder(client.get(), options_);
  recorder.Record(kJob, EventType::kNormal, "Rebalanced", "allocation [48 48 24 8]");
  ASSERT_TRUE(recorder.Flush(absl::Seconds(10)));
  std::vector<RecordedRequest> sent = server.requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].method, "POST");
  EXPECT_EQ(sent[0].target, "/api/v1/namespaces/ns/events");
  EXPECT_EQ(sent[0].Header("Content-Type"), "application/json");
  nlohmann::json event = nlohmann::json::parse(sent[0].body);
  EXPECT_EQ(event["apiVersion"], "v1");
  EXPECT_EQ(event["kind"], "Event");
  EXPECT_TRUE(absl::StartsWith(event["metadata"]["name"].get<std::string>(), "resnet."));
  EXPECT_EQ(event["metadata"]["namespace"], "ns");
  EXPECT_EQ(event["involvedObject"], (nlohmann::json{{"apiVersion", "hptrain.io/v1alpha1"},
                                                     {"kind", "TrainingJob"},
                                                     {"name", "resnet"},
                                                     {"namespace", "ns"},
                                                     {"uid", "uid-1"}}));
  EXPECT_EQ(event["type"], "Normal");
  EXPECT_EQ(event["reason"], "Rebalanced");
  EXPECT_EQ(event["message"], "allocation [48 48 24 8]");
  EXPECT_EQ(event["source"]["component"], "hptrain-controller");
  EXPECT_EQ(event["source"]["host"], "hptrain-controller-0");
  EXPECT_EQ(event["firstTimestamp"], "2026-11-22T02:13:50Z");
  EXPECT_EQ(event["lastTimestamp"], "2026-11-22T02:13:50Z");
  EXPECT_EQ(event["count"], 1);
  EXPECT_EQ(recorder.written(), 1);
}

TEST_F(KubeEventRecorderTest, RepeatsBumpTheCountAndNewMessagesGetNewEvents) {
  FakeServer server(Api());
  ASSERT_TRUE(server.Start().ok());
  std::unique_ptr<Client> client = NewTestClient(server.url());
  EventRecorder recorder(client.get(), options_);
  recorder.Record(kJob, EventType::kWarning, "PodFailed", "worker-1 OOMKilled");
  recorder.Record(kJob, EventType::kWarning, "PodFailed", "worker-1 OOMKilled");
  {
    absl::MutexLock lock(&mu_);
    now_ += absl::Seconds(30);
  }
  recorder.Record(kJob, EventType::kWarning, "PodFailed", "worker-1 OOMKilled");
  recorder.Record(kJob, EventType::kWarning, "PodFailed", "worker-2 OOMKilled");
  ASSERT_TRUE(recorder.Flush(absl::Seconds(10)));
  std::vector<RecordedRequest> sent = server.requests();
  ASSERT_EQ(sent.size(), 4u);
  std::string name = nlohmann::json::parse(sent[0].body)["metadata"]["name"];
  EXPECT_EQ(sent[1].method, "PATCH");
  EXPECT_EQ(sent[1].target, "/api/v1/namespaces/ns/events/" + name);
  EXPECT_EQ(sent[1].Header("Content-Type"), "application/merge-patch+json");
  EXPECT_EQ(nlohmann::json::parse(sent[1].body)["count"], 2);
  nlohmann::json third = nlohmann::json::parse(sent[2].body);
  EXPECT_EQ(third["count"], 3);
  EXPECT_EQ(third["lastTimestamp"], "2026-11-22T02:14:20Z");
  EXPECT_EQ(sent[3].method, "POST");
  nlohmann::json other = nlohmann::json::parse(sent[3].body);
  EXPECT_EQ(other["message"], "worker-2 OOMKilled");
  EXPECT_NE(other["metadata"]["name"], name);
}

TEST_F(KubeEventRecorderTest, ExpiredSeriesStartsOver) {
  FakeServer server(Api());
  ASSERT_TRUE(server.Start().ok());
  std::unique_ptr<Client> client = NewTestClient(server.url());
  EventRecorder recorder(client.get(), options_);
  recorder.Record(kJob, EventType::kNormal, "Created", "pods created");
  ASSERT_TRUE(recorder.Flush(absl::Seconds(10)));
  {
    absl::MutexLock lock(&mu_);
    patch_status_ = 404;  // the API server dropped the event (they live an hour)
  }
  recorder.Record(kJob, EventType::kNormal, "Created", "pods created");
  ASSERT_TRUE(recorder.Flush(absl::Seconds(10)));
  std::vector<RecordedRequest> sent = server.requests();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[1].method, "PATCH");
  EXPECT_EQ(sent[2].method, "POST");
  EXPECT_EQ(nlohmann::json::parse(sent[2].body)["count"], 1);
}

TEST_F(KubeEventRecorderTest, FailuresAreLoggedAndNeverBlockTheCaller) {
  absl::Notification release;
  FakeServer server([&](const RecordedRequest&, Connection& c) {
    release.WaitForNotificationWithTimeout(absl::Seconds(10));
    c.Respond(500, R"({"kind":"Status","message":"etcd is down","code":500})");
  });
  ASSERT_TRUE(server.Start().ok());
  std::unique_ptr<Client> client = NewTestClient(server.url());
  options_.queue_capacity = 2;
  EventRecorder recorder(client.get(), options_);
  // The writer is stuck on the first event; the queue holds two more; the rest are dropped at
  // once instead of blocking.
  for (int i = 0; i < 10; ++i) {
    recorder.Record(kJob, EventType::kNormal, "Tick", std::to_string(i));
  }
  EXPECT_GE(recorder.dropped(), 7);
  release.Notify();
  ASSERT_TRUE(recorder.Flush(absl::Seconds(10)));
  EXPECT_EQ(recorder.written(), 0);
  EXPECT_EQ(recorder.dropped(), 10);
  absl::MutexLock lock(&mu_);
  ASSERT_FALSE(log_.empty());
  EXPECT_NE(log_[0].find("event Tick on TrainingJob ns/resnet not recorded: etcd is down"),
            std::string::npos)
      << log_[0];
}

}  // namespace
}  // namespace hptrain::kube
