// The controller's RBAC (deploy/rbac: the ClusterRole, and the leader-election Role in the
// controller's namespace) against what the controller really calls, in both directions.
//
// Every scenario test already runs the controller under these manifests and fails on any 403
// (controller_fixture.h), so a verb they lack is caught by the test that needs it. This file adds
//  - that the manifests bind the service account the tests authenticate as;
//  - the TTL deletion without `delete` on trainingjobs: the job stays and the 403 is seen, as
//    ttlSecondsAfterFinished failed on clusters before that grant;
//  - that every verb granted is needed: one scenario makes every kind of call the controller has
//    (informers; creating, resharding, suspending twice, resuming, finishing and expiring a job;
//    a gang-scheduled job's PodGroups of both providers; leader election), and the calls it made, as (verb, resource, API group), must be exactly
//    what the manifests grant.
//
// Why one observed scenario and not one run per removed verb: with verb V removed, the first
// request that needs V is the first whose answer differs from the full run's (every earlier
// request is answered alike), and it is a 403. So a V the full run calls fails its removal run,
// and a V it never calls cannot fail any. The single run decides what the ~25 removal runs (one
// per rule and verb, several seconds each, well over a minute together) would, in a few seconds.
// Unlike a hand-kept map from verbs to tests, it also notices a call that stops being made: a
// grant nobody calls any more fails it. WithoutDeleteOnTrainingJobs... below is one removal run,
// kept as a check of the argument on the verb that motivated it.
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/kube/leader_election.h"
#include "gtest/gtest.h"
#include "tests/controller/apiserver/json_util.h"
#include "tests/controller/apiserver/rbac.h"
#include "tests/controller/apiserver/resource_type.h"
#include "tests/controller/manager/controller_fixture.h"

namespace hptrain::manager::testing {
namespace {

using hptrain::testing::PolicyRule;
using hptrain::testing::RequestRecord;
using hptrain::testing::RoleGrant;

// "verb resource[/subresource][.group]", as kubectl names a resource.
std::string CallName(const std::string& verb, const std::string& group,
                     const std::string& resource) {
  return absl::StrCat(verb, " ", resource, group.empty() ? "" : ".", group);
}

// Every (verb, resource, group) the grants name. Wildcards and resourceNames fail the test: they
// are not enumerable, and the controller needs neither.
std::set<std::string> GrantedCalls(const std::vector<RoleGrant>& grants) {
  std::set<std::string> granted;
  for (const RoleGrant& grant : grants) {
    for (const PolicyRule& rule : grant.rules) {
      EXPECT_TRUE(rule.resource_names.empty()) << grant.role;
      for (const std::string& group : rule.api_groups) {
        for (const std::string& resource : rule.resources) {
          for (const std::string& verb : rule.verbs) {
            EXPECT_TRUE(group != "*" && resource.find('*') == std::string::npos && verb != "*")
                << grant.role << " grants a wildcard";
            granted.insert(CallName(verb, group, resource));
          }
        }
      }
    }
  }
  return granted;
}

// Removes `verb` from the rules granting exactly `group`/`resource`; returns how many had it.
int RemoveVerb(std::vector<RoleGrant>* grants, const std::string& group,
               const std::string& resource, const std::string& verb) {
  int removed = 0;
  for (RoleGrant& grant : *grants) {
    for (PolicyRule& rule : grant.rules) {
      if (rule.api_groups != std::vector<std::string>{group} ||
          rule.resources != std::vector<std::string>{resource}) {
        continue;
      }
      auto it = std::find(rule.verbs.begin(), rule.verbs.end(), verb);
      if (it == rule.verbs.end()) continue;
      rule.verbs.erase(it);
      ++removed;
    }
  }
  return removed;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ControllerRbacManifestTest, TheBindingsNameTheServiceAccountTheTestsRunAs) {
  std::set<std::string> bound_roles;
  for (const char* file : {"cluster_role_binding.yaml", "leader_election_role.yaml"}) {
    absl::StatusOr<std::vector<Json>> objects =
        hptrain::testing::YamlDocumentsToJson(ReadFile(DeployRbacFile(file)));
    ASSERT_TRUE(objects.ok()) << file << ": " << objects.status();
    for (const Json& object : *objects) {
      const std::string kind = object.value("kind", "");
      if (kind != "ClusterRoleBinding" && kind != "RoleBinding") continue;
      ASSERT_EQ(object["subjects"].size(), 1u) << file;
      const Json& subject = object["subjects"][0];
      EXPECT_EQ(subject["kind"], "ServiceAccount") << file;
      EXPECT_EQ(hptrain::testing::ServiceAccountUser(subject.value("namespace", ""),
                                                     subject.value("name", "")),
                kControllerUser)
          << file;
      bound_roles.insert(absl::StrCat(object["roleRef"].value("kind", ""), "/",
                                      object["roleRef"].value("name", "")));
    }
  }
  std::set<std::string> roles;
  for (const RoleGrant& grant : ControllerGrants()) roles.insert(grant.role);
  EXPECT_EQ(bound_roles, roles) << "the tests enforce exactly the roles the bindings grant";
}

TEST_F(ControllerTest, WithoutDeleteOnTrainingJobsAnExpiredJobStaysForbidden) {
  std::vector<RoleGrant> grants = ControllerGrants();
  ASSERT_EQ(RemoveVerb(&grants, "hptrain.io", "trainingjobs", "delete"), 1);
  RestrictControllers(grants);
  denials_expected_ = true;
  StartController();
  Json job = MlpJob("mlp");
  job["spec"]["runPolicy"] = {{"ttlSecondsAfterFinished", 1}};
  ASSERT_NO_FATAL_FAILURE(CreateJobAndSucceedItsWorkers(job));

  ASSERT_TRUE(WaitFor([&] {
    for (const hptrain::testing::RequestAttributes& denial : server_->Denials()) {
      if (denial.verb == "delete" && denial.resource == "trainingjobs") return true;
    }
    return false;
  })) << Status("mlp").dump();
  EXPECT_FALSE(Job("mlp").is_null());
  EXPECT_EQ(Succeeded("delete", "trainingjobs"), 0);
  for (const hptrain::testing::RequestAttributes& denial : server_->Denials()) {
    EXPECT_EQ(
        DescribeDenial(denial),
        absl::StrCat(kControllerUser, " cannot delete trainingjobs.hptrain.io in ", kNs, " mlp"))
        << "nothing but the removed verb is missing";
  }
}

TEST_F(ControllerTest, EveryVerbTheManifestsGrantIsOneTheControllerCalls) {
  ControllerOptions options = FastOptions();
  kube::LeaderElectionConfig election;
  election.lease_namespace = kControllerNs;
  election.identity = "replica-0";
  election.lease_duration = absl::Seconds(3);
  election.renew_deadline = absl::Seconds(2);
  election.retry_period = absl::Milliseconds(100);
  options.leader_election = election;
  server_->ServeResource(hptrain::testing::VolcanoPodGroupResource());
  server_->ServeResource(hptrain::testing::SchedulerPluginsPodGroupResource());
  Controller* controller = StartController(std::move(options), controller_client_.get());
  ASSERT_TRUE(WaitFor([&] { return controller->IsLeader(); }));

  // A gang-scheduled job whose provider changes, then gang scheduling off: each provider's
  // PodGroup is created and deleted.
  Json gang = MlpJob("gang");
  gang["spec"]["gangScheduling"] = {{"enabled", true}, {"provider", "volcano"}};
  CreateJob(gang);
  ASSERT_TRUE(WaitFor([&] { return Owned("podgroups.scheduling.volcano.sh", "gang").size() == 1; }));
  PatchSpec("gang", {{"gangScheduling", {{"provider", "scheduler-plugins"}}}});
  ASSERT_TRUE(WaitFor([&] {
    return Owned("podgroups.scheduling.volcano.sh", "gang").empty() &&
           Owned("podgroups.scheduling.x-k8s.io", "gang").size() == 1;
  }));
  PatchSpec("gang", {{"gangScheduling", {{"enabled", false}}}});
  ASSERT_TRUE(WaitFor([&] { return Owned("podgroups.scheduling.x-k8s.io", "gang").empty(); }));

  // Two parameter-server shards, then one: a shard's Service goes, and so does the Secret (it
  // carries the spec's hash) for a new one.
  Json job = MlpJob("mlp");
  job["spec"]["strategy"] = {{"type", "hps"}};
  job["spec"]["ps"] = {{"shards", 2}};
  job["spec"]["runPolicy"] = {{"ttlSecondsAfterFinished", 1}};
  CreateJob(job);
  ASSERT_TRUE(WaitFor([&] {
    return PodNames("mlp").size() == 4 && Owned("services", "mlp").size() == 3 &&
           Owned("secrets", "mlp").size() == 1;
  })) << Status("mlp").dump();
  const std::string first_secret = Owned("secrets", "mlp")[0]["metadata"]["uid"];
  PatchSpec("mlp", {{"ps", {{"shards", 1}}}});
  ASSERT_TRUE(WaitFor([&] {
    std::vector<Json> secrets = Owned("secrets", "mlp");
    return Owned("services", "mlp").size() == 2 && secrets.size() == 1 &&
           secrets[0]["metadata"]["uid"] != first_secret && PodNames("mlp").size() == 3;
  })) << Status("mlp").dump();
  SetPods("mlp", "Running");
  ASSERT_TRUE(WaitFor([&] { return Phase("mlp") == "Running"; })) << Status("mlp").dump();

  // Suspended twice: the second Suspended event repeats the first, so the recorder patches it.
  for (int round = 0; round < 2; ++round) {
    PatchSpec("mlp", {{"runPolicy", {{"suspend", true}}}});
    ASSERT_TRUE(WaitFor([&] { return Phase("mlp") == "Suspended" && PodNames("mlp").empty(); }))
        << Status("mlp").dump();
    PatchSpec("mlp", {{"runPolicy", {{"suspend", false}}}});
    ASSERT_TRUE(WaitFor([&] { return PodNames("mlp").size() == 3; })) << Status("mlp").dump();
  }
  EXPECT_TRUE(WaitFor([&] {
    std::vector<Json> suspended = Events("mlp", "Suspended");
    return suspended.size() == 1 && suspended[0].value("count", 0) == 2;
  }));

  // Success, then the TTL: the job is deleted.
  SetPods("mlp", "Running");
  ASSERT_TRUE(WaitFor([&] { return Phase("mlp") == "Running"; })) << Status("mlp").dump();
  SetPods("mlp", "Succeeded", "worker");
  ASSERT_TRUE(WaitFor([&] { return Job("mlp").is_null(); })) << Status("mlp").dump();
  controller->Stop();  // releases the Lease

  std::set<std::string> called;
  for (const RequestRecord& record : server_->RequestLog()) {
    if (record.user != kControllerUser || record.resource.empty() || record.status == 403) {
      continue;
    }
    std::string resource = record.resource;
    if (!record.subresource.empty()) absl::StrAppend(&resource, "/", record.subresource);
    called.insert(CallName(record.verb, record.group, resource));
  }
  std::set<std::string> granted = GrantedCalls(ControllerGrants());
  std::vector<std::string> unused;
  for (const std::string& call : granted) {
    if (called.count(call) == 0) unused.push_back(call);
  }
  std::vector<std::string> ungranted;
  for (const std::string& call : called) {
    if (granted.count(call) == 0) ungranted.push_back(call);
  }
  EXPECT_TRUE(unused.empty()) << "deploy/rbac grants what the controller never calls (remove it "
                                 "there, in the chart and in tests/deploy/contract.py): "
                              << absl::StrJoin(unused, ", ");
  EXPECT_TRUE(ungranted.empty()) << "the controller calls what deploy/rbac does not grant: "
                                 << absl::StrJoin(ungranted, ", ");
}

}  // namespace
}  // namespace hptrain::manager::testing
