#include "tests/controller/manager/controller_fixture.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "controller/kube/rate_limiter.h"
#include "controller/kube/resource.h"
#include "controller/reconcile/labels.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::manager::testing {

std::string DeployRbacFile(const std::string& file) {
  return absl::StrCat(HPTRAIN_DEPLOY_RBAC_DIR, "/", file);
}

std::vector<hptrain::testing::RoleGrant> ControllerGrants() {
  absl::StatusOr<std::vector<hptrain::testing::RoleGrant>> grants =
      hptrain::testing::GrantsFromManifestFiles(
          {DeployRbacFile("cluster_role.yaml"), DeployRbacFile("leader_election_role.yaml")},
          kControllerNs);
  EXPECT_TRUE(grants.ok()) << grants.status();
  return grants.ok() ? *std::move(grants) : std::vector<hptrain::testing::RoleGrant>();
}

std::string DescribeDenial(const hptrain::testing::RequestAttributes& denial) {
  std::string resource = denial.resource;
  if (!denial.subresource.empty()) absl::StrAppend(&resource, "/", denial.subresource);
  if (!denial.group.empty()) absl::StrAppend(&resource, ".", denial.group);
  std::string out = absl::StrCat(denial.user, " cannot ", denial.verb, " ", resource);
  if (!denial.ns.empty()) absl::StrAppend(&out, " in ", denial.ns);
  if (!denial.name.empty()) absl::StrAppend(&out, " ", denial.name);
  return out;
}

Json MlpJob(const std::string& name, int replicas) {
  // The reconciler tests' job, as a user would submit it: no server-set metadata.
  Json job = reconcile::testing::ShorthandJob(replicas);
  job["metadata"] = {{"labels", {{"team", "a"}}}};
  job["metadata"]["name"] = name;
  job["metadata"]["namespace"] = kNs;
  return job;
}

void ControllerTest::SetUp() {
  server_ = std::make_unique<hptrain::testing::ApiServerDouble>();
  absl::StatusOr<int> port = server_->Start();
  ASSERT_TRUE(port.ok()) << port.status();
  AddUser("test-token", kTestUser);
  AddUser("controller-token", kControllerUser);
  RestrictControllers(ControllerGrants());
  test_client_ = NewClient("test-token");
  controller_client_ = NewClient("controller-token");
}

void ControllerTest::TearDown() {
  for (auto& controller : controllers_) controller->Stop();
  controllers_.clear();
  kept_clients_.clear();
  // Closing the clients' idle keep-alive connections first lets the server stop at once.
  test_client_.reset();
  controller_client_.reset();
  if (server_ != nullptr) {
    server_->CloseAllWatches();
    server_->Stop();
    if (!denials_expected_) {
      for (const hptrain::testing::RequestAttributes& denial : server_->Denials()) {
        ADD_FAILURE() << "RBAC: " << DescribeDenial(denial)
                      << " (deploy/rbac grants it not; a cluster would answer 403 too)";
      }
    }
  }
}

void ControllerTest::RestrictControllers(std::vector<hptrain::testing::RoleGrant> grants) {
  server_->SetAuthorizer(hptrain::testing::GrantsAuthorizer(
      [](const std::string& user) { return user != kTestUser; }, std::move(grants)));
}

void ControllerTest::AllowControllersEverything(const char* why) {
  RecordProperty("rbac_not_enforced", why);  // in the XML report, beside the test
  server_->SetAuthorizer(nullptr);
}

void ControllerTest::AddUser(const std::string& token, const std::string& user) {
  server_->AddToken(token, user);
}

std::unique_ptr<kube::Client> ControllerTest::NewClient(const std::string& token) {
  kube::Config config;
  config.server = server_->base_url();
  config.token = token;
  config.timeout = absl::Seconds(5);
  config.source = "test";
  absl::StatusOr<std::unique_ptr<kube::Client>> client = kube::Client::FromConfig(config);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

kube::Client* ControllerTest::KeptClient(const std::string& token) {
  kept_clients_.push_back(NewClient(token));
  return kept_clients_.back().get();
}

ControllerOptions ControllerTest::FastOptions() const {
  ControllerOptions options;
  options.namespaces = {kNs};
  options.workers = 2;
  options.reconcile.default_image = kImage;
  options.informer_backoff.initial = absl::Milliseconds(20);
  options.informer_backoff.max = absl::Milliseconds(200);
  options.informer_backoff.jitter = 0;
  options.rate_limiter = std::make_unique<kube::ItemExponentialRateLimiter>(
      absl::Milliseconds(5), absl::Milliseconds(500));
  options.watch_timeout_seconds = 60;
  options.absent_kind_relist = absl::Milliseconds(200);
  options.event_flush_timeout = absl::Seconds(1);
  return options;
}

Controller* ControllerTest::StartController(ControllerOptions options, kube::Client* client) {
  controllers_.push_back(std::make_unique<Controller>(client, std::move(options)));
  Controller* controller = controllers_.back().get();
  absl::Status status = controller->Start();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(controller->WaitForSync(absl::Seconds(10)));
  return controller;
}

Json ControllerTest::CreateJob(const Json& job) {
  absl::StatusOr<Json> created = test_client_->Create(kube::TrainingJobs(), kNs, job);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *created : Json();
}

void ControllerTest::PatchSpec(const std::string& job, const Json& spec_patch) {
  absl::StatusOr<Json> patched = test_client_->Patch(kube::TrainingJobs(), kNs, job,
                                                     kube::PatchType::kMerge,
                                                     Json{{"spec", spec_patch}});
  EXPECT_TRUE(patched.ok()) << patched.status();
}

Json ControllerTest::Job(const std::string& name) const {
  absl::StatusOr<Json> job = server_->Get("trainingjobs", kNs, name);
  return job.ok() ? *job : Json();
}

Json ControllerTest::Status(const std::string& name) const {
  Json job = Job(name);
  return job.is_object() && job.contains("status") ? job["status"] : Json::object();
}

std::string ControllerTest::Phase(const std::string& name) const {
  Json status = Status(name);
  return status.value("phase", "");
}

Json ControllerTest::Condition(const std::string& name, const std::string& type) const {
  Json status = Status(name);
  if (!status.contains("conditions") || !status["conditions"].is_array()) return Json();
  for (const Json& condition : status["conditions"]) {
    if (condition.value("type", "") == type) return condition;
  }
  return Json();
}

std::vector<Json> ControllerTest::Owned(const std::string& resource,
                                        const std::string& job) const {
  return server_->List(resource, kNs, std::string(reconcile::kJobLabel) + "=" + job);
}

std::vector<std::string> ControllerTest::PodNames(const std::string& job) const {
  std::vector<std::string> names;
  for (const Json& pod : Owned("pods", job)) names.push_back(pod["metadata"]["name"]);
  return names;
}

std::vector<Json> ControllerTest::Events(const std::string& job, const std::string& reason) const {
  std::vector<Json> out;
  for (const Json& event : server_->List("events", kNs)) {
    if (event.value("reason", "") != reason) continue;
    const Json& involved = event["involvedObject"];
    if (involved.value("kind", "") == "TrainingJob" && involved.value("name", "") == job) {
      out.push_back(event);
    }
  }
  return out;
}

void ControllerTest::CreateJobAndSucceedItsWorkers(const Json& job) {
  const std::string name = job["metadata"]["name"];
  CreateJob(job);
  ASSERT_TRUE(WaitFor([&] { return PodNames(name).size() == 3; }));
  SetPods(name, "Running");
  ASSERT_TRUE(WaitFor([&] { return Phase(name) == "Running"; })) << Status(name).dump();
  SetPods(name, "Succeeded", "worker");
}

void ControllerTest::SetPods(const std::string& job, const std::string& phase,
                             const std::string& role) {
  for (const Json& pod : Owned("pods", job)) {
    if (pod["metadata"].contains("deletionTimestamp")) continue;
    if (!role.empty() && pod["metadata"]["labels"].value(reconcile::kRoleLabel, "") != role) {
      continue;
    }
    SetPod(pod["metadata"]["name"], phase);
  }
}

void ControllerTest::SetPod(const std::string& pod, const std::string& phase) {
  absl::Status status = server_->SetPodPhase(kNs, pod, phase);
  EXPECT_TRUE(status.ok()) << pod << ": " << status;
}

bool ControllerTest::WaitFor(const std::function<bool()>& condition,
                             absl::Duration timeout) const {
  return server_->WaitFor(condition, timeout);
}

int ControllerTest::Succeeded(const std::string& verb, const std::string& resource,
                              const std::string& user) const {
  int count = 0;
  for (const hptrain::testing::RequestRecord& record : server_->RequestLog()) {
    if (record.verb != verb || record.status < 200 || record.status >= 300) continue;
    std::string name =
        record.subresource.empty() ? record.resource : record.resource + "/" + record.subresource;
    if (name != resource) continue;
    if (!user.empty() && record.user != user) continue;
    ++count;
  }
  return count;
}

}  // namespace hptrain::manager::testing
