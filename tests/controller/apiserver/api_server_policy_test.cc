// Request policy of the API server double: bearer tokens (401), authorizer and RBAC rules (403),
// Roles and ClusterRoles read from manifests (deploy/rbac included), bindings and ClusterRole
// aggregation (deploy/rbac's roles for TrainingJobs in `edit` and `view`), fault injection, the
// request log, dry runs and WaitFor.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/apiserver/json_util.h"
#include "tests/controller/apiserver/rbac.h"
#include "tests/controller/apiserver/test_objects.h"

namespace hptrain::testing {
namespace {

using ApiServerPolicyTest = ApiServerTest;

TEST_F(ApiServerPolicyTest, TokensAreRequiredOnceConfigured) {
  EXPECT_EQ(client_->Get(PodPath("ns")).status, 200) << "no tokens: everyone is admin";
  server_->AddToken("good", "alice");
  HttpResult missing = client_->Get(PodPath("ns"));
  ASSERT_EQ(missing.status, 401);
  EXPECT_EQ(missing.body, nlohmann::json::parse(R"({"kind":"Status","apiVersion":"v1",
      "metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized",
      "code":401})"));
  EXPECT_EQ(TestClient(port_, "bad").Get("/version").status, 401);
  EXPECT_EQ(TestClient(port_, "good").Get(PodPath("ns")).status, 200);
  std::vector<RequestRecord> log = server_->RequestLog();
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.back().user, "alice");
  EXPECT_EQ(log.back().status, 200);
}

TEST_F(ApiServerPolicyTest, AuthorizerDenialIsForbiddenWithTheRealMessage) {
  server_->SetAuthorizer([](const RequestAttributes& attributes) {
    return !(attributes.verb == "list" && attributes.resource == "pods");
  });
  HttpResult denied = client_->Get("/api/v1/namespaces/fixtures/pods");
  ASSERT_EQ(denied.status, 403);
  EXPECT_EQ(denied.body["reason"], "Forbidden");
  EXPECT_EQ(denied.body["message"],
            "pods is forbidden: User \"system:admin\" cannot list resource \"pods\" in API group "
            "\"\" in the namespace \"fixtures\"");
  EXPECT_EQ(denied.body["details"], nlohmann::json({{"kind", "pods"}}));
  EXPECT_EQ(client_->Get(PodPath("ns", "p")).status, 404) << "get is still allowed";
}

TEST_F(ApiServerPolicyTest, RbacRulesFromAClusterRole) {
  absl::StatusOr<nlohmann::json> role = YamlToJson(R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: hptrain-controller}
rules:
- apiGroups: [hptrain.io]
  resources: [trainingjobs]
  verbs: [get, list, watch, update, patch]
- apiGroups: [hptrain.io]
  resources: [trainingjobs/status]
  verbs: [get, update, patch]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete]
)");
  ASSERT_TRUE(role.ok()) << role.status();
  absl::StatusOr<std::vector<PolicyRule>> rules = PolicyRulesFromRole(*role);
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 3u);
  server_->AddToken("admin", "kubernetes-admin");
  server_->AddToken("controller", "system:serviceaccount:hptrain:controller");
  server_->SetAuthorizer(RbacAuthorizer("system:serviceaccount:hptrain:controller", *rules));
  TestClient admin(port_, "admin");
  TestClient controller(port_, "controller");
  ASSERT_EQ(admin.Post(TjPath("ns"), TrainingJob("j", "ns")).status, 201);

  EXPECT_EQ(controller.Get(TjPath("ns", "j")).status, 200);
  EXPECT_EQ(controller
                .Patch(TjPath("ns", "j") + "/status", {{"status", {{"phase", "Running"}}}},
                       "application/merge-patch+json")
                .status,
            200);
  EXPECT_EQ(controller.Post(PodPath("ns"), Pod("p", "ns")).status, 201);
  HttpResult create_job = controller.Post(TjPath("ns"), TrainingJob("k", "ns"));
  ASSERT_EQ(create_job.status, 403);
  EXPECT_EQ(
      create_job.body["message"],
      "trainingjobs.hptrain.io is forbidden: User \"system:serviceaccount:hptrain:controller\" "
      "cannot create resource \"trainingjobs\" in API group \"hptrain.io\" in the namespace "
      "\"ns\"");
  HttpResult pod_status =
      controller.Patch(PodPath("ns", "p") + "/status", {{"status", {{"phase", "Running"}}}},
                       "application/merge-patch+json");
  ASSERT_EQ(pod_status.status, 403);
  EXPECT_THAT(pod_status.body["message"].get<std::string>(),
              ::testing::HasSubstr("pods \"p\" is forbidden"));
  EXPECT_THAT(pod_status.body["message"].get<std::string>(),
              ::testing::HasSubstr("cannot patch resource \"pods/status\""));
  EXPECT_EQ(controller.Get("/api/v1/namespaces/ns/secrets").status, 403);
  EXPECT_EQ(controller.Get("/apis").status, 200) << "discovery is not restricted";
}

// A ClusterRole, a Role without a namespace and the Role's binding, as in deploy/rbac.
constexpr char kRoles[] = R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: leases}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: leases}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leases}
subjects: [{kind: ServiceAccount, name: sa, namespace: home}]
)";

TEST_F(ApiServerPolicyTest, ARoleGrantsOnlyInItsNamespaceAndDenialsAreKept) {
  absl::StatusOr<std::vector<RoleGrant>> grants = GrantsFromManifest(kRoles, "home");
  ASSERT_TRUE(grants.ok()) << grants.status();
  ASSERT_EQ(grants->size(), 2u) << "the RoleBinding is no role";
  EXPECT_EQ((*grants)[0].role, "ClusterRole/reader");
  EXPECT_EQ((*grants)[0].ns, "");
  EXPECT_EQ((*grants)[1].role, "Role/leases");
  EXPECT_EQ((*grants)[1].ns, "home") << "placed where kustomize would put it";

  const std::string sa = ServiceAccountUser("home", "sa");
  EXPECT_EQ(sa, "system:serviceaccount:home:sa");
  server_->AddToken("admin", "kubernetes-admin");
  server_->AddToken("sa", sa);
  server_->SetAuthorizer(
      GrantsAuthorizer([&sa](const std::string& user) { return user == sa; }, *grants));
  TestClient admin(port_, "admin");
  TestClient restricted(port_, "sa");
  const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/";
  EXPECT_EQ(restricted.Get(leases + "home/leases/l").status, 404) << "allowed, not there";
  EXPECT_EQ(restricted.Get("/api/v1/pods").status, 200) << "a ClusterRole covers all namespaces";
  EXPECT_EQ(restricted.Get(leases + "other/leases/l").status, 403);
  EXPECT_EQ(restricted.Get("/apis/coordination.k8s.io/v1/leases").status, 403)
      << "a Role grants nothing at the cluster scope";
  EXPECT_EQ(restricted.Delete(PodPath("home")).status, 403) << "deletecollection";
  EXPECT_EQ(admin.Get(leases + "other/leases/l").status, 404) << "other users are not restricted";

  std::vector<RequestAttributes> denials = server_->Denials();
  ASSERT_EQ(denials.size(), 3u);
  EXPECT_EQ(denials[0].user, sa);
  EXPECT_EQ(denials[0].verb, "get");
  EXPECT_EQ(denials[0].ns, "other");
  EXPECT_EQ(denials[1].verb, "list");
  EXPECT_EQ(denials[1].ns, "");
  EXPECT_EQ(denials[2].verb, "deletecollection");
  EXPECT_EQ(denials[2].resource, "pods");
}

TEST_F(ApiServerPolicyTest, TheDeployManifestsHoldTheControllerToTheirRules) {
  // The repository's own manifests, as the controller's scenario tests load them.
  const std::string dir = HPTRAIN_DEPLOY_RBAC_DIR;
  absl::StatusOr<std::vector<RoleGrant>> grants = GrantsFromManifestFiles(
      {dir + "/cluster_role.yaml", dir + "/leader_election_role.yaml"}, "hptrain-system");
  ASSERT_TRUE(grants.ok()) << grants.status();
  ASSERT_EQ(grants->size(), 2u);
  EXPECT_EQ((*grants)[0].role, "ClusterRole/hptrain-controller");
  EXPECT_EQ((*grants)[1].role, "Role/hptrain-controller-leader-election");
  EXPECT_EQ((*grants)[1].ns, "hptrain-system");
  EXPECT_FALSE(GrantsFromManifestFiles({dir + "/no-such-file.yaml"}, "x").ok());

  const std::string controller = ServiceAccountUser("hptrain-system", "hptrain-controller");
  server_->AddToken("admin", "kubernetes-admin");
  server_->AddToken("controller", controller);
  server_->SetAuthorizer(GrantsAuthorizer(
      [&controller](const std::string& user) { return user == controller; }, *grants));
  TestClient admin(port_, "admin");
  TestClient restricted(port_, "controller");
  ASSERT_EQ(admin.Post(TjPath("ns"), TrainingJob("x", "ns")).status, 201);

  // Replacing a job's spec is the user's business, not the controller's: the real message.
  nlohmann::json job = admin.Get(TjPath("ns", "x")).body;
  HttpResult update = restricted.Put(TjPath("ns", "x"), job);
  ASSERT_EQ(update.status, 403);
  nlohmann::json forbidden = {
      {"kind", "Status"},
      {"apiVersion", "v1"},
      {"metadata", nlohmann::json::object()},
      {"status", "Failure"},
      {"message",
       "trainingjobs.hptrain.io \"x\" is forbidden: User "
       "\"system:serviceaccount:hptrain-system:hptrain-controller\" cannot update resource "
       "\"trainingjobs\" in API group \"hptrain.io\" in the namespace \"ns\""},
      {"reason", "Forbidden"},
      {"details", {{"name", "x"}, {"group", "hptrain.io"}, {"kind", "trainingjobs"}}},
      {"code", 403}};
  EXPECT_EQ(update.body, forbidden);
  EXPECT_EQ(restricted.Delete(TjPath("ns")).status, 403) << "deletecollection is not granted";
  EXPECT_EQ(restricted.Get("/apis/coordination.k8s.io/v1/namespaces/ns/leases/l").status, 403)
      << "the Lease Role applies in hptrain-system only";
  EXPECT_EQ(
      restricted.Get("/apis/coordination.k8s.io/v1/namespaces/hptrain-system/leases/l").status,
      404);
  // ttlSecondsAfterFinished deletes the job: the grant this test was written for.
  EXPECT_EQ(restricted.Delete(TjPath("ns", "x")).status, 200);
  EXPECT_EQ(server_->Denials().size(), 3u);
}

TEST(LabelSelectorMatchesTest, MatchLabelsAndExpressions) {
  const nlohmann::json labels = {{"a", "1"}, {"b", "2"}};
  EXPECT_TRUE(LabelSelectorMatches(nlohmann::json::object(), labels)) << "empty: everything";
  EXPECT_TRUE(LabelSelectorMatches({{"matchLabels", {{"a", "1"}}}}, labels));
  EXPECT_FALSE(LabelSelectorMatches({{"matchLabels", {{"a", "2"}}}}, labels));
  EXPECT_FALSE(LabelSelectorMatches({{"matchLabels", {{"c", "1"}}}}, labels));
  auto expression = [](const char* key, const char* op, std::vector<std::string> values) {
    return nlohmann::json{
        {"matchExpressions", {{{"key", key}, {"operator", op}, {"values", values}}}}};
  };
  EXPECT_TRUE(LabelSelectorMatches(expression("b", "In", {"2", "3"}), labels));
  EXPECT_FALSE(LabelSelectorMatches(expression("b", "NotIn", {"2"}), labels));
  EXPECT_TRUE(LabelSelectorMatches(expression("c", "NotIn", {"2"}), labels));
  EXPECT_TRUE(LabelSelectorMatches(expression("a", "Exists", {}), labels));
  EXPECT_FALSE(LabelSelectorMatches(expression("a", "DoesNotExist", {}), labels));
  EXPECT_FALSE(LabelSelectorMatches(expression("c", "Exists", {}), labels));
}

// A role aggregated into `view` (and so into `edit` and `admin`), and one that is not.
constexpr char kWidgetRoles[] = R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widgets-view
  labels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}
rules:
- {apiGroups: [example.com], resources: [widgets], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: unrelated
  labels: {rbac.authorization.k8s.io/aggregate-to-view: "false"}
rules:
- {apiGroups: [example.com], resources: [gadgets], verbs: [get]}
)";

// `view` as someone might write it: rules of its own beside the aggregationRule.
constexpr char kViewWithRulesOfItsOwn[] = R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: view, labels: {rbac.authorization.k8s.io/aggregate-to-edit: "true"}}
aggregationRule:
  clusterRoleSelectors: [{matchLabels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}}]
rules: [{apiGroups: ["*"], resources: ["*"], verbs: ["*"]}]
)";

TEST(RbacPolicyTest, AggregatedRulesFollowTheSelectedRoles) {
  RbacPolicy policy;
  ASSERT_TRUE(policy.Apply(kUserFacingClusterRoles, "").ok());
  absl::StatusOr<nlohmann::json> edit = policy.GetClusterRole("edit");
  ASSERT_TRUE(edit.ok()) << edit.status();
  EXPECT_EQ((*edit)["rules"], nlohmann::json::array()) << "nothing aggregated yet";
  ASSERT_TRUE(policy.Apply(kWidgetRoles, "").ok());
  const nlohmann::json widgets = nlohmann::json::parse(
      R"([{"apiGroups":["example.com"],"resources":["widgets"],"verbs":["get"]}])");
  // view selects widgets-view; edit selects view (labelled aggregate-to-edit), admin edit.
  for (const char* name : {"view", "edit", "admin"}) {
    absl::StatusOr<nlohmann::json> role = policy.GetClusterRole(name);
    ASSERT_TRUE(role.ok()) << role.status();
    EXPECT_EQ((*role)["rules"], widgets) << name;
  }
  // Rules written into an aggregated role are replaced, as the controller stomps them.
  ASSERT_TRUE(policy.Apply(kViewWithRulesOfItsOwn, "").ok());
  EXPECT_EQ(policy.GetClusterRole("view")->at("rules"), widgets);
  ASSERT_TRUE(policy.DeleteClusterRole("widgets-view").ok());
  EXPECT_EQ(policy.GetClusterRole("admin")->at("rules"), nlohmann::json::array());
  EXPECT_FALSE(policy.DeleteClusterRole("widgets-view").ok());
  EXPECT_FALSE(policy.Apply("kind: Role\nmetadata: {name: r}\n", "ns").ok()) << "no rules";
}

// A namespace's team, as a platform team sets one up: RoleBindings to Kubernetes' own `edit`
// and `view`.
constexpr char kTeamBindings[] = R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-edit, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bob-view, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}]
)";

TEST_F(ApiServerPolicyTest, NamespaceEditorsSubmitTrainingJobsThroughTheAggregatedRoles) {
  auto policy = std::make_shared<RbacPolicy>();
  ASSERT_TRUE(policy->Apply(kUserFacingClusterRoles, "").ok());
  ASSERT_TRUE(policy->Apply(kTeamBindings, "").ok());
  server_->AddToken("admin", "kubernetes-admin");
  server_->AddToken("alice", "alice");
  server_->AddToken("bob", "bob");
  server_->SetAuthorizer(
      PolicyAuthorizer(policy, [](const std::string& user) { return user != "kubernetes-admin"; }));
  TestClient admin(port_, "admin");
  TestClient alice(port_, "alice");
  TestClient bob(port_, "bob");

  // Without hptrain's roles, `edit` knows nothing of TrainingJobs: the real refusal.
  HttpResult refused = alice.Post(TjPath("team-a"), TrainingJob("first", "team-a"));
  ASSERT_EQ(refused.status, 403);
  EXPECT_EQ(refused.body["message"],
            "trainingjobs.hptrain.io is forbidden: User \"alice\" cannot create resource "
            "\"trainingjobs\" in API group \"hptrain.io\" in the namespace \"team-a\"");

  // The shipped roles, as `kubectl apply -k deploy/` or the chart installs them.
  const std::string dir = HPTRAIN_DEPLOY_RBAC_DIR;
  ASSERT_TRUE(policy->ApplyFile(dir + "/aggregate_roles.yaml", "hptrain-system").ok());
  EXPECT_EQ(alice.Post(TjPath("team-a"), TrainingJob("first", "team-a")).status, 201);
  EXPECT_EQ(alice.Get(TjPath("team-a", "first")).status, 200);
  EXPECT_EQ(alice.Get(TjPath("team-a")).status, 200);
  EXPECT_EQ(alice.Get(TjPath("team-a", "first") + "/status").status, 200);
  EXPECT_EQ(alice.Post(TjPath("team-b"), TrainingJob("first", "team-b")).status, 403)
      << "a RoleBinding grants in its namespace only";
  EXPECT_EQ(alice.Get("/apis/hptrain.io/v1alpha1/trainingjobs").status, 403)
      << "nor across namespaces";
  EXPECT_EQ(alice
                .Patch(TjPath("team-a", "first") + "/status", {{"status", {{"phase", "Running"}}}},
                       "application/merge-patch+json")
                .status,
            403)
      << "status is the controller's";

  // `view`: read, never write.
  EXPECT_EQ(bob.Get(TjPath("team-a", "first")).status, 200);
  EXPECT_EQ(bob.Get(TjPath("team-a")).status, 200);
  EXPECT_EQ(bob.Post(TjPath("team-a"), TrainingJob("second", "team-a")).status, 403);
  EXPECT_EQ(bob.Delete(TjPath("team-a", "first")).status, 403);
  EXPECT_EQ(alice.Delete(TjPath("team-a", "first")).status, 200);

  // Aggregation is kept up to date: without hptrain-edit, `edit` keeps only what `view` gives.
  ASSERT_TRUE(policy->DeleteClusterRole("hptrain-edit").ok());
  EXPECT_EQ(alice.Post(TjPath("team-a"), TrainingJob("third", "team-a")).status, 403);
  EXPECT_EQ(alice.Get(TjPath("team-a")).status, 200) << "view is aggregated into edit";
  EXPECT_EQ(admin.Post(TjPath("team-b"), TrainingJob("x", "team-b")).status, 201) << "unrestricted";
}

TEST_F(ApiServerPolicyTest, InjectedFaultsFailTheNextMatchingRequests) {
  Fault fault;
  fault.verb = "create";
  fault.resource = "pods";
  fault.times = 2;
  fault.code = 503;
  server_->InjectFault(fault);
  HttpResult first = client_->Post(PodPath("ns"), Pod("p", "ns"));
  ASSERT_EQ(first.status, 503);
  EXPECT_EQ(first.body["reason"], "ServiceUnavailable");
  EXPECT_EQ(client_->Post(TjPath("ns"), TrainingJob("j", "ns")).status, 201) << "other resource";
  EXPECT_EQ(client_->Post(PodPath("ns"), Pod("p", "ns")).status, 503);
  EXPECT_EQ(client_->Post(PodPath("ns"), Pod("p", "ns")).status, 201);

  Fault status_only;
  status_only.resource = "trainingjobs/status";
  status_only.code = 409;
  server_->InjectFault(status_only);
  EXPECT_EQ(client_
                ->Patch(TjPath("ns", "j"), {{"spec", {{"globalBatchSize", 2}}}},
                        "application/merge-patch+json")
                .status,
            200);
  HttpResult conflict =
      client_->Patch(TjPath("ns", "j") + "/status", {{"status", {{"phase", "Running"}}}},
                     "application/merge-patch+json");
  EXPECT_EQ(conflict.status, 409);
  EXPECT_EQ(conflict.body["reason"], "Conflict");

  Fault slow;
  slow.code = 0;  // latency only
  slow.times = -1;
  slow.latency = absl::Milliseconds(20);
  slow.verb = "get";
  server_->InjectFault(slow);
  EXPECT_EQ(client_->Get(PodPath("ns", "p")).status, 200);
  EXPECT_EQ(client_->Get(PodPath("ns", "p")).status, 200);
  server_->ClearFaults();
  EXPECT_EQ(client_->Post(PodPath("ns"), Pod("q", "ns")).status, 201);
}

TEST_F(ApiServerPolicyTest, RequestLogCountsByVerbAndResource) {
  MustCreate(TjPath("ns"), TrainingJob("j", "ns"));
  MustCreate(PodPath("ns"), Pod("a", "ns"));
  client_->Post(PodPath("ns"), Pod("a", "ns"));  // 409, still a create request
  client_->Get(PodPath("ns", "a"));
  client_->Get(PodPath("ns") + "?labelSelector=x");
  client_->Patch(PodPath("ns", "a") + "/status", {{"status", {{"phase", "Running"}}}},
                 "application/merge-patch+json");
  EXPECT_EQ(server_->RequestCount("create", "pods"), 2);
  EXPECT_EQ(server_->RequestCount("create", "trainingjobs"), 1);
  EXPECT_EQ(server_->RequestCount("get", "pods"), 1);
  EXPECT_EQ(server_->RequestCount("list", "pods"), 1);
  EXPECT_EQ(server_->RequestCount("patch", "pods"), 0);
  EXPECT_EQ(server_->RequestCount("patch", "pods/status"), 1);
  EXPECT_EQ(server_->RequestCount("", "pods/*"), 5);
  std::vector<RequestRecord> log = server_->RequestLog();
  ASSERT_EQ(log.size(), 6u);
  EXPECT_EQ(log[2].status, 409);
  EXPECT_EQ(log[4].query, "labelSelector=x");
  EXPECT_EQ(log[5].subresource, "status");
  EXPECT_EQ(log[5].method, "PATCH");
  server_->ClearRequestLog();
  EXPECT_EQ(server_->RequestCount(""), 0);
}

TEST_F(ApiServerPolicyTest, DryRunValidatesWithoutStoring) {
  uint64_t before = server_->resource_version();
  HttpResult dry = client_->Post(PodPath("ns") + "?dryRun=All", Pod("p", "ns"));
  ASSERT_EQ(dry.status, 201) << dry.text;
  EXPECT_EQ(dry.body["metadata"]["name"], "p");
  EXPECT_EQ(server_->resource_version(), before);
  EXPECT_EQ(client_->Get(PodPath("ns", "p")).status, 404);
  EXPECT_EQ(client_->Post(PodPath("ns") + "?dryRun=All", Pod("Bad_Name", "ns")).status, 422);
}

TEST_F(ApiServerPolicyTest, WaitForSeesWritesFromOtherThreads) {
  std::thread kubelet([&] {
    absl::SleepFor(absl::Milliseconds(50));
    nlohmann::json pod = Pod("p", "ns");
    pod["status"] = {{"phase", "Running"}};
    (void)server_->Put("pods", pod);
  });
  EXPECT_TRUE(server_->WaitFor(
      [&] {
        absl::StatusOr<nlohmann::json> pod = server_->Get("pods", "ns", "p");
        return pod.ok() && (*pod)["status"]["phase"] == "Running";
      },
      absl::Seconds(5)));
  kubelet.join();
  EXPECT_FALSE(server_->WaitFor([] { return false; }, absl::Milliseconds(10)));
}

}  // namespace
}  // namespace hptrain::testing
