#include "controller/kube/informer.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "controller/kube/log.h"
#include "tests/controller/kube/fake_server.h"
#include "tests/controller/kube/test_client.h"

namespace hptrain::kube {
namespace {

using ::hptrain::kube::testing::Eventually;

using ::hptrain::kube::testing::Connection;
using ::hptrain::kube::testing::FakeServer;
using ::hptrain::kube::testing::RecordedRequest;

nlohmann::json Pod(const std::string& name, const std::string& rv) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"namespace", "ns"}, {"name", name}, {"resourceVersion", rv}}}};
}

std::string Event(const std::string& type, const nlohmann::json& object) {
  return nlohmann::json{{"type", type}, {"object", object}}.dump() + "\n";
}

std::string Bookmark(const std::string& rv) {
  return Event("BOOKMARK", {{"kind", "Pod"}, {"metadata", {{"resourceVersion", rv}}}});
}

// A scripted API server for one resource: lists answer with the next scripted list (the last
// one repeats); watches play the next scripted stream (then hold the connection open).
class ScriptedApi {
 public:
  // A watch script: the event lines to send, then whether to end the stream or hold it open.
  struct Stream {
    std::vector<std::string> lines;
    bool hold_open = false;
    int http_status = 200;  // non-200: answer with a Status body instead
  };

  ScriptedApi() : server_([this](const RecordedRequest& r, Connection& c) { Serve(r, c); }) {
    EXPECT_TRUE(server_.Start().ok());
  }

  void AddList(std::vector<nlohmann::json> items, const std::string& rv) {
    absl::MutexLock lock(&mu_);
    lists_.push_back({{"kind", "PodList"},
                      {"apiVersion", "v1"},
                      {"metadata", {{"resourceVersion", rv}}},
                      {"items", std::move(items)}});
  }
  void AddStream(Stream stream) {
    absl::MutexLock lock(&mu_);
    streams_.push_back(std::move(stream));
  }

  std::vector<RecordedRequest> Watches() const {
    std::vector<RecordedRequest> out;
    for (const RecordedRequest& r : server_.requests()) {
      if (r.Param("watch") == "1") out.push_back(r);
    }
    return out;
  }
  std::vector<RecordedRequest> Lists() const {
    std::vector<RecordedRequest> out;
    for (const RecordedRequest& r : server_.requests()) {
      if (r.Param("watch").empty()) out.push_back(r);
    }
    return out;
  }

  std::string url() const { return server_.url(); }
  void Stop() { server_.Stop(); }

 private:
  void Serve(const RecordedRequest& request, Connection& connection) {
    if (request.Param("watch") != "1") {
      nlohmann::json list;
      {
        absl::MutexLock lock(&mu_);
        list = lists_.size() > 1 ? lists_.front() : lists_.back();
        if (lists_.size() > 1) lists_.pop_front();
      }
      connection.Respond(200, list.dump());
      return;
    }
    Stream stream;
    {
      absl::MutexLock lock(&mu_);
      if (streams_.empty()) {
        stream.hold_open = true;
      } else {
        stream = std::move(streams_.front());
        streams_.pop_front();
      }
    }
    if (stream.http_status != 200) {
      connection.Respond(stream.http_status,
                         absl::StrCat(R"({"kind":"Status","message":"scripted","code":)",
                                      stream.http_status, "}"));
      return;
    }
    connection.StartChunked();
    for (const std::string& line : stream.lines) connection.Chunk(line);
    if (stream.hold_open) {
      connection.WaitClosed(absl::Seconds(30));
      return;
    }
    connection.EndChunked();
  }

  FakeServer server_;
  mutable absl::Mutex mu_;
  std::deque<nlohmann::json> lists_ ABSL_GUARDED_BY(mu_);
  std::deque<Stream> streams_ ABSL_GUARDED_BY(mu_);
};

// What the handlers saw, as "add a@1", "update a@1->2", "delete b@2".
class Recorder {
 public:
  InformerHandlers Handlers(const Store* store = nullptr) {
    InformerHandlers h;
    h.on_add = [this, store](const nlohmann::json& o) {
      if (store != nullptr) {
        EXPECT_NE(store->Get(KeyOf(o)), nullptr);  // the cache is updated first
      }
      Push(absl::StrCat("add ", NameOf(o), "@", ResourceVersionOf(o)));
    };
    h.on_update = [this](const nlohmann::json& old_object, const nlohmann::json& o) {
      Push(absl::StrCat("update ", NameOf(o), "@", ResourceVersionOf(old_object), "->",
                        ResourceVersionOf(o)));
    };
    h.on_delete = [this, store](const nlohmann::json& o) {
      if (store != nullptr) {
        EXPECT_EQ(store->Get(KeyOf(o)), nullptr);
      }
      Push(absl::StrCat("delete ", NameOf(o), "@", ResourceVersionOf(o)));
    };
    return h;
  }
  // Waits until `n` events were seen (or 10 s) and returns them.
  std::vector<std::string> WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return seen_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    return seen_;
  }

 private:
  void Push(std::string s) {
    absl::MutexLock lock(&mu_);
    seen_.push_back(std::move(s));
  }
  absl::Mutex mu_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

class KubeInformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogSink([this](absl::string_view line) {
      absl::MutexLock lock(&log_mu_);
      log_.emplace_back(line);
    });
    Config config;
    config.server = api_.url();
    config.timeout = absl::Seconds(5);
    client_ = std::move(Client::FromConfig(config)).value();
    options_.ns = "ns";
    options_.label_selector = "hptrain.io/job=j";
    options_.watch_timeout_seconds = 30;
    options_.backoff.initial = absl::Milliseconds(1);
    options_.backoff.max = absl::Milliseconds(5);
  }
  void TearDown() override {
    api_.Stop();
    SetLogSink(nullptr);
  }

  ScriptedApi api_;
  std::unique_ptr<Client> client_;
  InformerOptions options_;
  absl::Mutex log_mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(log_mu_);
};

TEST_F(KubeInformerTest, ListThenWatchUpdatesCacheAndHandlersAndTracksBookmarks) {
  api_.AddList({Pod("a", "10"), Pod("b", "11")}, "11");
  api_.AddStream({{Event("MODIFIED", Pod("a", "12")), Event("ADDED", Pod("c", "13")),
                   Event("DELETED", Pod("b", "14")), Bookmark("20")},
                  /*hold_open=*/false});
  Informer informer(client_.get(), Pods(), options_);
  Recorder recorder;
  ASSERT_TRUE(informer.AddHandlers(recorder.Handlers(&informer.store())).ok());
  EXPECT_FALSE(informer.HasSynced());
  ASSERT_TRUE(informer.Start().ok());
  EXPECT_EQ(informer.Start().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(informer.AddHandlers({}).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(informer.WaitForSync(absl::Seconds(10)));

  std::vector<std::string> seen = recorder.WaitFor(5);
  EXPECT_EQ(seen, (std::vector<std::string>{"add a@10", "add b@11", "update a@10->12", "add c@13",
                                            "delete b@14"}));
  // The stream ended: the informer watches again from the bookmark's resourceVersion.
  ASSERT_TRUE(Eventually([&] { return api_.Watches().size() >= 2; }));
  std::vector<RecordedRequest> watches = api_.Watches();
  EXPECT_EQ(watches[0].Param("resourceVersion"), "11");
  EXPECT_EQ(watches[1].Param("resourceVersion"), "20");
  EXPECT_EQ(watches[0].Param("labelSelector"), "hptrain.io/job=j");
  EXPECT_EQ(watches[0].Param("allowWatchBookmarks"), "true");
  EXPECT_EQ(watches[0].Param("timeoutSeconds"), "30");
  EXPECT_EQ(watches[0].path, "/api/v1/namespaces/ns/pods");
  std::vector<RecordedRequest> lists = api_.Lists();
  ASSERT_EQ(lists.size(), 1u);
  EXPECT_EQ(lists[0].Param("labelSelector"), "hptrain.io/job=j");
  EXPECT_EQ(lists[0].Param("limit"), "500");
  EXPECT_EQ(informer.LastResourceVersion(), "20");

  EXPECT_EQ(informer.store().size(), 2u);
  ASSERT_NE(informer.store().Get("ns", "a"), nullptr);
  EXPECT_EQ(ResourceVersionOf(*informer.store().Get("ns", "a")), "12");
  EXPECT_EQ(informer.store().Get("ns", "b"), nullptr);
  informer.Stop();
  EXPECT_EQ(informer.lists_started(), 1);
}

TEST_F(KubeInformerTest, GoneRelistsAndSynthesizesTheMissedChanges) {
  api_.AddList({Pod("a", "1"), Pod("b", "2")}, "2");
  api_.AddList({Pod("a", "5"), Pod("c", "6")}, "6");
  api_.AddStream({{Event("ERROR", {{"kind", "Status"},
                                   {"status", "Failure"},
                                   {"message", "too old resource version: 2 (4)"},
                                   {"reason", "Expired"},
                                   {"code", 410}})},
                  false});
  Informer informer(client_.get(), Pods(), options_);
  Recorder recorder;
  ASSERT_TRUE(informer.AddHandlers(recorder.Handlers(&informer.store())).ok());
  ASSERT_TRUE(informer.Start().ok());
  std::vector<std::string> seen = recorder.WaitFor(5);
  EXPECT_EQ(seen, (std::vector<std::string>{"add a@1", "add b@2", "update a@1->5", "add c@6",
                                            "delete b@2"}));
  ASSERT_TRUE(Eventually([&] { return api_.Watches().size() >= 2; }));
  EXPECT_EQ(api_.Watches()[1].Param("resourceVersion"), "6");
  EXPECT_EQ(informer.lists_started(), 2);
  informer.Stop();
  absl::MutexLock lock(&log_mu_);
  ASSERT_FALSE(log_.empty());
  EXPECT_NE(log_[0].find("relisting"), std::string::npos) << log_[0];
}

TEST_F(KubeInformerTest, HttpGoneOnTheWatchAlsoRelists) {
  api_.AddList({Pod("a", "1")}, "1");
  api_.AddList({}, "9");
  ScriptedApi::Stream gone;
  gone.http_status = 410;
  api_.AddStream(gone);
  Informer informer(client_.get(), Pods(), options_);
  Recorder recorder;
  ASSERT_TRUE(informer.AddHandlers(recorder.Handlers()).ok());
  ASSERT_TRUE(informer.Start().ok());
  EXPECT_EQ(recorder.WaitFor(2), (std::vector<std::string>{"add a@1", "delete a@1"}));
  informer.Stop();
  EXPECT_EQ(informer.store().size(), 0u);
}

TEST_F(KubeInformerTest, FailedWatchResumesFromTheLastResourceVersionWithoutRelisting) {
  api_.AddList({Pod("a", "1")}, "7");
  ScriptedApi::Stream broken;
  broken.http_status = 503;
  api_.AddStream(broken);
  api_.AddStream({{Event("MODIFIED", Pod("a", "8"))}, /*hold_open=*/true});
  Informer informer(client_.get(), Pods(), options_);
  Recorder recorder;
  ASSERT_TRUE(informer.AddHandlers(recorder.Handlers()).ok());
  ASSERT_TRUE(informer.Start().ok());
  EXPECT_EQ(recorder.WaitFor(2), (std::vector<std::string>{"add a@1", "update a@1->8"}));
  std::vector<RecordedRequest> watches = api_.Watches();
  ASSERT_EQ(watches.size(), 2u);
  EXPECT_EQ(watches[0].Param("resourceVersion"), "7");
  EXPECT_EQ(watches[1].Param("resourceVersion"), "7");
  EXPECT_EQ(informer.lists_started(), 1);
  // Stop() aborts the watch that the server holds open.
  informer.Stop();
  EXPECT_EQ(informer.LastResourceVersion(), "8");
}

TEST_F(KubeInformerTest, StopDuringBackoffAndRestart) {
  // Nothing answers: every list fails and the informer backs off for a minute.
  Config config;
  config.server = "http://127.0.0.1:1";  // nothing listens: connection refused
  std::unique_ptr<Client> dead = std::move(Client::FromConfig(config)).value();
  InformerOptions options = options_;
  options.backoff.initial = absl::Seconds(60);
  options.backoff.max = absl::Seconds(60);
  Informer informer(dead.get(), Pods(), options);
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(Eventually([&] { return informer.lists_started() >= 1; }));
  EXPECT_FALSE(informer.WaitForSync(absl::Milliseconds(20)));
  informer.Stop();  // wakes the 60 s backoff
  informer.Stop();  // idempotent

  api_.AddList({Pod("a", "1")}, "1");
  Informer live(client_.get(), Pods(), options_);
  ASSERT_TRUE(live.Start().ok());
  ASSERT_TRUE(live.WaitForSync(absl::Seconds(10)));
  live.Stop();
  ASSERT_TRUE(live.Start().ok());  // a stopped informer can run again
  ASSERT_TRUE(Eventually([&] { return live.lists_started() == 2; }));
  live.Stop();
}

}  // namespace
}  // namespace hptrain::kube
