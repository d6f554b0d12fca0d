// Elastic jobs (spec.elastic, docs/elastic.md "On Kubernetes") under a real Controller against
// the API server double, with the job's coordinator faked behind MembershipClient: a lost or
// failed worker pod is replaced alone and reported LOST; scaling creates and removes only the
// difference, a removed worker's pod going once it has left; status.membership and the
// MembershipChanged events follow the coordinator; below minReplicas past joinTimeoutSeconds
// the gang restarts.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "controller/reconcile/labels.h"
#include "gtest/gtest.h"
#include "tests/controller/manager/controller_fixture.h"

namespace hptrain::manager::testing {
namespace {

using reconcile::CoordinatorMembership;
using reconcile::MembershipChangeView;
using reconcile::MembershipRequest;

// The coordinator as the controller sees it: a membership the test sets, and a log of the
// ChangeMembership calls (which change nothing by themselves, as a coordinator's REMOVE takes
// effect only at a later step boundary).
class FakeCoordinator : public MembershipClient {
 public:
  absl::StatusOr<CoordinatorMembership> Read(const Json&, const std::string& token) override {
    absl::MutexLock lock(&mu_);
    if (token.empty()) return absl::UnauthenticatedError("no token");
    if (!reachable_) return absl::UnavailableError("coordinator down");
    return membership_;
  }
  absl::Status Change(const Json&, const std::string&, const MembershipRequest& request) override {
    absl::MutexLock lock(&mu_);
    if (!reachable_) return absl::UnavailableError("coordinator down");
    requests_.push_back(request);
    return absl::OkStatus();
  }

  void Set(int64_t epoch, std::vector<int> members,
           std::vector<MembershipChangeView> changes = {}) {
    absl::MutexLock lock(&mu_);
    membership_.epoch = epoch;
    membership_.members = std::move(members);
    for (MembershipChangeView& change : changes) membership_.changes.push_back(std::move(change));
  }
  void SetReachable(bool reachable) {
    absl::MutexLock lock(&mu_);
    reachable_ = reachable;
  }
  // How many calls of `kind` for `slot` the coordinator took.
  int Calls(MembershipRequest::Kind kind, int slot) const {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const MembershipRequest& r : requests_) n += r.kind == kind && r.slot == slot;
    return n;
  }
  int Calls(MembershipRequest::Kind kind) const {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const MembershipRequest& r : requests_) n += r.kind == kind;
    return n;
  }

 private:
  mutable absl::Mutex mu_;
  CoordinatorMembership membership_;
  bool reachable_ = true;
  std::vector<MembershipRequest> requests_;
};

constexpr auto kLost = MembershipRequest::Kind::kLost;
constexpr auto kRemove = MembershipRequest::Kind::kRemove;

Json ElasticJob(int replicas) {
  Json job = MlpJob("mlp", replicas);
  job["spec"]["elastic"] = {{"minReplicas", 2}, {"maxReplicas", 6}, {"joinTimeoutSeconds", 60}};
  return job;
}

std::string Worker(int slot) { return "mlp-worker-" + std::to_string(slot); }

class ElasticTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    coordinator_ = std::make_shared<FakeCoordinator>();
  }

  void Start() {
    ControllerOptions options = FastOptions();
    options.membership = coordinator_;
    options.reconcile.membership_poll = absl::Milliseconds(100);
    options.now = [this] {
      absl::MutexLock lock(&clock_mu_);
      return clock_;
    };
    StartController(std::move(options), controller_client_.get());
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&clock_mu_);
    clock_ += d;
  }

  // Creates the elastic job with `replicas` workers, the coordinator listing them as its first
  // members, and plays the kubelet until it runs.
  void RunJob(int replicas) {
    std::vector<int> members;
    for (int i = 0; i < replicas; ++i) members.push_back(i);
    coordinator_->Set(0, members);
    Start();
    CreateJob(ElasticJob(replicas));
    ASSERT_TRUE(
        WaitFor([&] { return PodNames("mlp").size() == static_cast<size_t>(replicas) + 1; }));
    SetPods("mlp", "Running");
    ASSERT_TRUE(WaitFor([&] { return Phase("mlp") == "Running"; })) << Status("mlp").dump();
  }

  // Pod name -> uid.
  std::map<std::string, std::string> Uids() const {
    std::map<std::string, std::string> uids;
    for (const Json& pod : Owned("pods", "mlp")) {
      uids[pod["metadata"]["name"]] = pod["metadata"]["uid"];
    }
    return uids;
  }
  Json Pod(const std::string& name) const {
    absl::StatusOr<Json> pod = server_->Get("pods", kNs, name);
    return pod.ok() ? *pod : Json();
  }

  std::shared_ptr<FakeCoordinator> coordinator_;
  absl::Mutex clock_mu_;
  absl::Time clock_ = absl::FromUnixSeconds(1800000000);
};

TEST_F(ElasticTest, ADeletedWorkerPodIsReplacedAloneAndReportedLost) {
  ASSERT_NO_FATAL_FAILURE(RunJob(4));
  const std::map<std::string, std::string> before = Uids();
  const int creates = Succeeded("create", "pods");
  ASSERT_EQ(creates, 5);

  ASSERT_TRUE(server_->Delete("pods", kNs, Worker(1)).ok());
  ASSERT_TRUE(WaitFor([&] {
    const Json pod = Pod(Worker(1));
    return !pod.is_null() && pod["metadata"]["uid"] != before.at(Worker(1));
  }));
  EXPECT_TRUE(WaitFor([&] { return coordinator_->Calls(kLost, 1) >= 1; }));

  const std::map<std::string, std::string> after = Uids();
  ASSERT_EQ(after.size(), before.size());
  for (const auto& [name, uid] : before) {
    if (name != Worker(1)) {
      EXPECT_EQ(after.at(name), uid) << name << " was replaced too";
    }
  }
  EXPECT_EQ(Succeeded("create", "pods"), creates + 1);
  EXPECT_EQ(Pod(Worker(1))["metadata"]["labels"][reconcile::kRankLabel], "1");
  EXPECT_EQ(Pod(Worker(1))["metadata"]["annotations"][reconcile::kRestartGenerationAnnotation],
            "0");
  EXPECT_EQ(Status("mlp").value("restarts", 0), 0);
  EXPECT_TRUE(Events("mlp", "GangRestart").empty());
  EXPECT_EQ(Phase("mlp"), "Running");  // 3 of 4 workers run, minReplicas is 2
  EXPECT_EQ(coordinator_->Calls(kLost), coordinator_->Calls(kLost, 1));
}

TEST_F(ElasticTest, AFailedWorkerPodIsReplacedAloneAndReportedLost) {
  ASSERT_NO_FATAL_FAILURE(RunJob(4));
  const std::map<std::string, std::string> before = Uids();

  SetPod(Worker(2), "Failed");
  ASSERT_TRUE(WaitFor([&] {
    const Json pod = Pod(Worker(2));
    return !pod.is_null() && pod["metadata"]["uid"] != before.at(Worker(2));
  }));
  EXPECT_TRUE(WaitFor([&] { return coordinator_->Calls(kLost, 2) >= 1; }));
  EXPECT_TRUE(WaitFor([&] { return Events("mlp", "WorkerReplaced").size() == 1; }));
  EXPECT_EQ(Events("mlp", "WorkerReplaced")[0]["type"], "Warning");

  const std::map<std::string, std::string> after = Uids();
  for (const auto& [name, uid] : before) {
    if (name != Worker(2)) {
      EXPECT_EQ(after.at(name), uid) << name << " was replaced too";
    }
  }
  EXPECT_EQ(Succeeded("create", "pods"), 6);
  EXPECT_EQ(Status("mlp").value("restarts", 0), 0);
  EXPECT_TRUE(Events("mlp", "GangRestart").empty());
}

TEST_F(ElasticTest, ScalingCreatesAndRemovesOnlyTheDifference) {
  ASSERT_NO_FATAL_FAILURE(RunJob(4));
  const std::map<std::string, std::string> first = Uids();

  // 4 -> 6: slots 4 and 5 are created, nothing else changes.
  PatchSpec("mlp", {{"workers", {{"replicas", 6}}}});
  ASSERT_TRUE(WaitFor([&] { return PodNames("mlp").size() == 7; })) << Status("mlp").dump();
  EXPECT_EQ(Succeeded("create", "pods"), 7);
  std::map<std::string, std::string> scaled = Uids();
  for (const auto& [name, uid] : first) EXPECT_EQ(scaled.at(name), uid) << name;
  EXPECT_EQ(scaled.count(Worker(4)), 1u);
  EXPECT_EQ(scaled.count(Worker(5)), 1u);
  SetPod(Worker(4), "Running");
  SetPod(Worker(5), "Running");
  coordinator_->Set(1, {0, 1, 2, 3, 4, 5}, {{1, "joined", {4, 5}, ""}});
  ASSERT_TRUE(WaitFor([&] { return Status("mlp").value("desiredWorkers", 0) == 6; }));

  // 6 -> 3: slots 3, 4 and 5 are asked to leave; their pods stay until they have.
  PatchSpec("mlp", {{"workers", {{"replicas", 3}}}});
  ASSERT_TRUE(WaitFor([&] {
    return coordinator_->Calls(kRemove, 3) >= 1 && coordinator_->Calls(kRemove, 4) >= 1 &&
           coordinator_->Calls(kRemove, 5) >= 1;
  }));
  EXPECT_EQ(coordinator_->Calls(kRemove), 3);  // once each: not again within the epoch
  EXPECT_EQ(PodNames("mlp").size(), 7u) << "a removed worker's pod goes once it has left";

  // Slot 3 leaves the members; slot 4's worker exits 0; then the coordinator is unreachable,
  // and slot 5's pod goes at once.
  coordinator_->Set(2, {0, 1, 2, 4, 5}, {{2, "removed", {3}, "scaled down"}});
  ASSERT_TRUE(WaitFor([&] { return Pod(Worker(3)).is_null(); }));
  EXPECT_FALSE(Pod(Worker(4)).is_null());
  SetPod(Worker(4), "Succeeded");
  ASSERT_TRUE(WaitFor([&] { return Pod(Worker(4)).is_null(); }));
  EXPECT_FALSE(Pod(Worker(5)).is_null());
  coordinator_->SetReachable(false);
  ASSERT_TRUE(WaitFor([&] { return Pod(Worker(5)).is_null(); }));

  const std::map<std::string, std::string> last = Uids();
  ASSERT_EQ(last.size(), 4u);
  for (const auto& [name, uid] : last) EXPECT_EQ(first.at(name), uid) << name;
  EXPECT_EQ(Succeeded("create", "pods"), 7);
  EXPECT_EQ(Status("mlp").value("restarts", 0), 0);
  EXPECT_TRUE(Events("mlp", "GangRestart").empty());
  EXPECT_TRUE(Events("mlp", "SpecChanged").empty());
  EXPECT_EQ(Phase("mlp"), "Running");
  EXPECT_EQ(Owned("secrets", "mlp").size(), 1u);
  EXPECT_EQ(Succeeded("create", "secrets"), 1) << "the running workers keep their token";
}

TEST_F(ElasticTest, StatusMembershipFollowsTheCoordinator) {
  ASSERT_NO_FATAL_FAILURE(RunJob(4));
  ASSERT_TRUE(WaitFor([&] { return Status("mlp").contains("membership"); }));
  EXPECT_EQ(Status("mlp")["membership"], Json({{"epoch", 0}, {"members", {0, 1, 2, 3}}}));
  EXPECT_TRUE(Events("mlp", "MembershipChanged").empty());

  coordinator_->Set(3, {0, 1, 3}, {{1, "lost", {2}, "exit 137"}});
  // Epochs 1 and 2 were not seen, and the coordinator told only of epoch 1's change: that one,
  // and epoch 3 by its members.
  ASSERT_TRUE(WaitFor([&] {
    return Status("mlp")["membership"] == Json({{"epoch", 3}, {"members", {0, 1, 3}}});
  })) << Status("mlp").dump();
  ASSERT_TRUE(WaitFor([&] { return Events("mlp", "MembershipChanged").size() == 2; }));

  coordinator_->Set(4, {0, 1, 3, 2}, {{4, "joined", {2}, ""}});
  ASSERT_TRUE(WaitFor([&] {
    return Status("mlp")["membership"] == Json({{"epoch", 4}, {"members", {0, 1, 3, 2}}});
  })) << Status("mlp").dump();
  ASSERT_TRUE(WaitFor([&] { return Events("mlp", "MembershipChanged").size() == 3; }));
  bool told = false;
  for (const Json& event : Events("mlp", "MembershipChanged")) {
    EXPECT_EQ(event["type"], "Normal");
    told = told || event["message"] == "epoch 4: slot 2 joined; members 0,1,3,2";
  }
  EXPECT_TRUE(told);
}

TEST_F(ElasticTest, BelowMinReplicasPastTheJoinTimeoutRestartsTheGang) {
  ASSERT_NO_FATAL_FAILURE(RunJob(4));
  coordinator_->Set(2, {0}, {{1, "lost", {1, 2}, ""}, {2, "lost", {3}, ""}});
  ASSERT_TRUE(WaitFor([&] {
    const Json condition = Condition("mlp", "BelowMinReplicas");
    return !condition.is_null() && condition["status"] == "True";
  })) << Status("mlp").dump();
  EXPECT_EQ(Condition("mlp", "BelowMinReplicas")["reason"], "BelowMinReplicas");
  EXPECT_EQ(Status("mlp").value("restarts", 0), 0) << "not before joinTimeoutSeconds";

  Advance(absl::Seconds(61));
  ASSERT_TRUE(WaitFor([&] { return Status("mlp").value("restarts", 0) == 1; }))
      << Status("mlp").dump();
  ASSERT_TRUE(WaitFor([&] { return Events("mlp", "GangRestart").size() == 1; }));
  const std::string message = Events("mlp", "GangRestart")[0].value("message", "");
  EXPECT_TRUE(absl::StrContains(message, "below spec.elastic.minReplicas (2)")) << message;
  EXPECT_TRUE(absl::StrContains(message, "joinTimeoutSeconds")) << message;
  EXPECT_EQ(Condition("mlp", "BelowMinReplicas")["status"], "False");
  ASSERT_TRUE(WaitFor([&] { return PodNames("mlp").size() == 5; }));
  for (const Json& pod : Owned("pods", "mlp")) {
    EXPECT_EQ(pod["metadata"]["annotations"][reconcile::kRestartGenerationAnnotation], "1");
  }
}

}  // namespace
}  // namespace hptrain::manager::testing
