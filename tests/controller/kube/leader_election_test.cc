#include "controller/kube/leader_election.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "controller/kube/log.h"
#include "controller/kube/timestamps.h"
#include "tests/controller/kube/fake_server.h"
#include "tests/controller/kube/test_client.h"
#include "tests/controller/kube/fixtures.h"

namespace hptrain::kube {
namespace {

using ::hptrain::kube::testing::NewTestClient;

using ::hptrain::kube::testing::Eventually;

using ::hptrain::kube::testing::Connection;
using ::hptrain::kube::testing::FakeServer;
using ::hptrain::kube::testing::Fixture;
using ::hptrain::kube::testing::LoadFixture;
using ::hptrain::kube::testing::RecordedRequest;

constexpr char kLeasePath[] = "/apis/coordination.k8s.io/v1/namespaces/ns/leases";

std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  return nlohmann::json{{"kind", "Status"},   {"apiVersion", "v1"}, {"status", "Failure"},
                        {"message", message}, {"reason", reason},   {"code", code}}
      .dump();
}

// An in-memory Lease endpoint with the API server's optimistic concurrency.
class LeaseApi {
 public:
  LeaseApi() : server_([this](const RecordedRequest& r, Connection& c) { Serve(r, c); }) {
    EXPECT_TRUE(server_.Start().ok());
  }
  ~LeaseApi() { server_.Stop(); }

  void SetFailing(bool failing) {
    absl::MutexLock lock(&mu_);
    failing_ = failing;
  }
  nlohmann::json lease() const {
    absl::MutexLock lock(&mu_);
    return lease_;
  }
  std::string url() const { return server_.url(); }

 private:
  void Serve(const RecordedRequest& request, Connection& connection) {
    absl::MutexLock lock(&mu_);
    if (failing_) {
      connection.Respond(500, StatusBody(500, "InternalError", "etcd is down"));
      return;
    }
    std::string item = absl::StrCat(kLeasePath, "/hptrain-controller");
    if (request.method == "GET" && request.path == item) {
      if (lease_.is_null()) {
        connection.Respond(404,
                           StatusBody(404, "NotFound", "leases \"hptrain-controller\" not found"));
      } else {
        connection.Respond(200, lease_.dump());
      }
    } else if (request.method == "POST" && request.path == kLeasePath) {
      if (!lease_.is_null()) {
        connection.Respond(409, StatusBody(409, "AlreadyExists", "already exists"));
        return;
      }
      lease_ = nlohmann::json::parse(request.body);
      lease_["metadata"]["namespace"] = "ns";
      lease_["metadata"]["resourceVersion"] = std::to_string(++version_);
      connection.Respond(201, lease_.dump());
    } else if (request.method == "PUT" && request.path == item) {
      nlohmann::json update = nlohmann::json::parse(request.body);
      if (lease_.is_null() || ResourceVersionOf(update) != ResourceVersionOf(lease_)) {
        connection.Respond(409, StatusBody(409, "Conflict", "the object has been modified"));
        return;
      }
      lease_ = update;
      lease_["metadata"]["resourceVersion"] = std::to_string(++version_);
      connection.Respond(200, lease_.dump());
    } else {
      connection.Respond(405, StatusBody(405, "MethodNotAllowed", request.method));
    }
  }

  FakeServer server_;
  mutable absl::Mutex mu_;
  nlohmann::json lease_ ABSL_GUARDED_BY(mu_);
  int version_ ABSL_GUARDED_BY(mu_) = 100;
  bool failing_ ABSL_GUARDED_BY(mu_) = false;
};

struct Callbacks {
  std::atomic<int> started{0};
  std::atomic<int> stopped{0};
  void Wire(LeaderElectionConfig* config) {
    config->on_started_leading = [this] { ++started; };
    config->on_stopped_leading = [this] { ++stopped; };
  }
};

LeaderElectionConfig FastConfig(const std::string& identity) {
  LeaderElectionConfig config;
  config.lease_namespace = "ns";
  config.identity = identity;
  config.lease_duration = absl::Milliseconds(1500);
  config.renew_deadline = absl::Milliseconds(1000);
  config.retry_period = absl::Milliseconds(20);
  return config;
}

class KubeLeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogSink([](absl::string_view) {});  // expected failures are logged; keep output clean
  }
  void TearDown() override { SetLogSink(nullptr); }
};

TEST_F(KubeLeaderElectionTest, RejectsBadConfigs) {
  LeaseApi api;
  std::unique_ptr<Client> client = NewTestClient(api.url());
  LeaderElectionConfig no_identity = FastConfig("");
  EXPECT_EQ(LeaderElector(client.get(), no_identity).Start().code(),
            absl::StatusCode::kInvalidArgument);
  LeaderElectionConfig inverted = FastConfig("a");
  inverted.renew_deadline = inverted.lease_duration;
  EXPECT_EQ(LeaderElector(client.get(), inverted).Start().code(),
            absl::StatusCode::kInvalidArgument);
}

// The recorded sequence 32-35: no lease (404), create it (201), renew it (200), and a second
// candidate's takeover with a stale resourceVersion (409).
TEST_F(KubeLeaderElectionTest, FollowsTheRecordedLeaseExchanges) {
  HPTRAIN_REQUIRE_FIXTURES();
  absl::StatusOr<Fixture> missing = LoadFixture("32");
  absl::StatusOr<Fixture> create = LoadFixture("33");
  absl::StatusOr<Fixture> renew = LoadFixture("34");
  absl::StatusOr<Fixture> stale = LoadFixture("35");
  ASSERT_TRUE(missing.ok() && create.ok() && renew.ok() && stale.ok());

  absl::Mutex mu;
  std::string get_answer = missing->ResponseBytes();
  std::string put_answer = renew->ResponseBytes();
  FakeServer server([&](const RecordedRequest& request, Connection& c) {
    absl::MutexLock lock(&mu);
    if (request.method == "GET") c.Write(get_answer);
    if (request.method == "POST") c.Write(create->ResponseBytes());
    if (request.method == "PUT") c.Write(put_answer);
  });
  ASSERT_TRUE(server.Start().ok());
  std::unique_ptr<Client> client = NewTestClient(server.url());
  absl::Time recorded_time = ParseKubeTime("2026-11-22T00:00:00Z").value();

  LeaderElectionConfig a_config = FastConfig("controller-a");
  a_config.lease_namespace = "fixtures";
  a_config.lease_duration = absl::Seconds(15);
  a_config.renew_deadline = absl::Seconds(10);
  a_config.retry_period = absl::Seconds(2);
  a_config.now = [&] { return recorded_time; };
  LeaderElector a(client.get(), a_config);
  EXPECT_TRUE(a.TryAcquireOrRenew());  // GET 404, then POST
  std::vector<RecordedRequest> sent = server.requests();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].method, "GET");
  EXPECT_EQ(sent[0].target, missing->path);
  EXPECT_EQ(sent[1].method, "POST");
  EXPECT_EQ(sent[1].target, create->path);
  EXPECT_EQ(nlohmann::json::parse(sent[1].body), create->RequestJson());
  EXPECT_EQ(a.Leader(), "controller-a");

  // Renew: GET returns the created lease, PUT carries its resourceVersion.
  {
    absl::MutexLock lock(&mu);
    get_answer = create->ResponseBytes();
  }
  recorded_time += absl::Seconds(2);
  server.ClearRequests();
  EXPECT_TRUE(a.TryAcquireOrRenew());
  sent = server.requests();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].method, "PUT");
  EXPECT_EQ(sent[1].target, renew->path);
  nlohmann::json put = nlohmann::json::parse(sent[1].body);
  nlohmann::json recorded_put = renew->RequestJson();
  EXPECT_EQ(put["metadata"]["resourceVersion"], "236");
  EXPECT_EQ(put["spec"], recorded_put["spec"]);

  // Candidate B sees A's fresh lease and leaves it alone (no PUT).
  {
    absl::MutexLock lock(&mu);
    get_answer = renew->ResponseBytes();
    put_answer = stale->ResponseBytes();
  }
  LeaderElectionConfig b_config = FastConfig("controller-b");
  b_config.lease_namespace = "fixtures";
  b_config.lease_duration = absl::Milliseconds(30);
  b_config.renew_deadline = absl::Milliseconds(20);
  b_config.retry_period = absl::Milliseconds(10);
  LeaderElector b(client.get(), b_config);
  server.ClearRequests();
  EXPECT_FALSE(b.TryAcquireOrRenew());
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(b.Leader(), "controller-a");

  // Once the lease has not changed for B's lease duration, B tries to take over; the server
  // answers 409 (fixture 35: somebody wrote the lease meanwhile) and B does not lead.
  absl::SleepFor(absl::Milliseconds(40));
  server.ClearRequests();
  EXPECT_FALSE(b.TryAcquireOrRenew());
  EXPECT_FALSE(b.IsLeader());
  sent = server.requests();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].method, "PUT");
  nlohmann::json takeover = nlohmann::json::parse(sent[1].body);
  EXPECT_EQ(takeover["spec"]["holderIdentity"], "controller-b");
  EXPECT_EQ(takeover["spec"]["leaseTransitions"], 1);
  EXPECT_EQ(takeover["metadata"]["resourceVersion"], "237");
  server.Stop();
}

TEST_F(KubeLeaderElectionTest, OneLeaderAtATimeAndHandoverOnRelease) {
  LeaseApi api;
  std::unique_ptr<Client> client = NewTestClient(api.url());
  Callbacks a_calls, b_calls;
  LeaderElectionConfig a_config = FastConfig("replica-a");
  a_calls.Wire(&a_config);
  LeaderElector a(client.get(), a_config);
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(Eventually([&] { return a.IsLeader(); }));
  EXPECT_EQ(a_calls.started.load(), 1);

  LeaderElectionConfig b_config = FastConfig("replica-b");
  b_calls.Wire(&b_config);
  LeaderElector b(client.get(), b_config);
  ASSERT_TRUE(b.Start().ok());
  ASSERT_TRUE(Eventually([&] { return b.Leader() == "replica-a"; }));
  EXPECT_FALSE(b.IsLeader());
  EXPECT_EQ(b_calls.started.load(), 0);

  a.Stop();  // releases the lease
  EXPECT_FALSE(a.IsLeader());
  EXPECT_EQ(a_calls.stopped.load(), 1);
  ASSERT_TRUE(Eventually([&] { return b.IsLeader(); }));
  EXPECT_EQ(b_calls.started.load(), 1);
  nlohmann::json lease = api.lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "replica-b");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);  // created by a with 0, taken over by b
  b.Stop();
  EXPECT_EQ(api.lease()["spec"]["holderIdentity"], "");
}

TEST_F(KubeLeaderElectionTest, StopsLeadingWhenRenewalsFailPastTheDeadline) {
  LeaseApi api;
  std::unique_ptr<Client> client = NewTestClient(api.url());
  Callbacks calls;
  LeaderElectionConfig config = FastConfig("replica-a");
  config.lease_duration = absl::Milliseconds(400);
  config.renew_deadline = absl::Milliseconds(200);
  calls.Wire(&config);
  LeaderElector elector(client.get(), config);
  ASSERT_TRUE(elector.Start().ok());
  ASSERT_TRUE(Eventually([&] { return elector.IsLeader(); }));
  api.SetFailing(true);
  ASSERT_TRUE(Eventually([&] { return calls.stopped.load() == 1; }));
  EXPECT_FALSE(elector.IsLeader());
  api.SetFailing(false);  // the API is back: the lease still names us, so we take it again
  ASSERT_TRUE(Eventually([&] { return calls.started.load() == 2; }));
  EXPECT_TRUE(elector.IsLeader());
  elector.Stop();
  EXPECT_EQ(calls.stopped.load(), 2);
}

}  // namespace
}  // namespace hptrain::kube
