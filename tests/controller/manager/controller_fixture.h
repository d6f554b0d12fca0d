// What the controller's scenario tests share: the API server double started on 127.0.0.1, real
// kube clients pointed at it over HTTP, a Controller with short retry settings, a valid
// TrainingJob, and helpers that play the kubelet and read back what the controller did.
//
// RBAC is enforced as on a cluster: every client but the test's own ("test-token", which plays
// kubectl and the kubelet) is a controller replica, held to the ClusterRole and the
// leader-election Role (in kControllerNs) of the repository's deploy/rbac manifests. A request
// the manifests do not grant is a 403, and any such denial fails the test at TearDown unless the
// test expects it (denials_expected_), so a verb the manifests lack cannot go unnoticed.
#ifndef HPTRAIN_TESTS_CONTROLLER_MANAGER_CONTROLLER_FIXTURE_H_
#define HPTRAIN_TESTS_CONTROLLER_MANAGER_CONTROLLER_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "controller/kube/client.h"
#include "controller/manager/controller.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/controller/apiserver/api_server_double.h"
#include "tests/controller/apiserver/rbac.h"

namespace hptrain::manager::testing {

using Json = nlohmann::json;

inline constexpr char kNs[] = "team-a";
inline constexpr char kImage[] = "hptrain/runtime:test";
// Where deploy/ installs the controller (kustomization.yaml), so where its leader-election Role
// and Lease live.
inline constexpr char kControllerNs[] = "hptrain-system";
// The controller's service account (deploy/rbac) as the API server names it.
inline constexpr char kControllerUser[] = "system:serviceaccount:hptrain-system:hptrain-controller";
// The test's own user ("test-token"): seeds jobs and plays the kubelet, unrestricted.
inline constexpr char kTestUser[] = "tester";

// deploy/rbac/<file> in this source tree.
std::string DeployRbacFile(const std::string& file);
// The ClusterRole of deploy/rbac/cluster_role.yaml and the Role of leader_election_role.yaml,
// placed in kControllerNs. Fails the test (and returns nothing) when they do not load.
std::vector<hptrain::testing::RoleGrant> ControllerGrants();
// "<user> cannot <verb> <resource>[/<subresource>][.<group>] [in <ns>] [<name>]".
std::string DescribeDenial(const hptrain::testing::RequestAttributes& denial);

// A TrainingJob that runs: synthetic MLP, global batch 64, `replicas` workers in the
// spec.workers shorthand, namespace kNs.
Json MlpJob(const std::string& name, int replicas = 2);

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // A client of the double authenticated with `token` (see AddUser).
  std::unique_ptr<kube::Client> NewClient(const std::string& token);
  // The same, owned by the fixture and destroyed after the controllers.
  kube::Client* KeptClient(const std::string& token);
  // Registers bearer `token` as `user`. SetUp registers "test-token" (kTestUser) for the test
  // itself and "controller-token" (kControllerUser); every user but kTestUser is held to the
  // controller's RBAC.
  void AddUser(const std::string& token, const std::string& user);

  // Holds every user but kTestUser to `grants` instead (SetUp: ControllerGrants()).
  void RestrictControllers(std::vector<hptrain::testing::RoleGrant> grants);
  // Lifts RBAC for a test about something else; `why` says why, for the reader.
  void AllowControllersEverything(const char* why);

  // Options that make retries, relists and resyncs fast, for kNs.
  ControllerOptions FastOptions() const;
  // Starts a controller with `options` on `client` (which must outlive the test: the fixture's
  // or a KeptClient) and waits for its caches. The fixture stops it after the test.
  Controller* StartController(ControllerOptions options, kube::Client* client);
  Controller* StartController() { return StartController(FastOptions(), controller_client_.get()); }

  // Creates `job` through HTTP as the test user; fails the test otherwise.
  Json CreateJob(const Json& job);
  // Merge-patches the job's spec as the test user (generation bumps).
  void PatchSpec(const std::string& job, const Json& spec_patch);

  // The stored job (null when gone), its status.
  Json Job(const std::string& name) const;
  Json Status(const std::string& name) const;
  std::string Phase(const std::string& name) const;
  // The status condition of `type`, or null.
  Json Condition(const std::string& name, const std::string& type) const;

  // The job's pods / all objects of `resource` labelled hptrain.io/job=<name>, by name.
  std::vector<Json> Owned(const std::string& resource, const std::string& job) const;
  std::vector<std::string> PodNames(const std::string& job) const;
  // Core events on the job with `reason`.
  std::vector<Json> Events(const std::string& job, const std::string& reason) const;

  // The kubelet: every live pod of `job` (or those of `role`) to `phase`.
  void SetPods(const std::string& job, const std::string& phase, const std::string& role = "");
  void SetPod(const std::string& pod, const std::string& phase);
  // Creates `job` (one ps and two workers, as MlpJob) and plays the kubelet until its workers
  // have succeeded: pods created, all Running, the job Running, then the workers Succeeded.
  // Call through ASSERT_NO_FATAL_FAILURE.
  void CreateJobAndSucceedItsWorkers(const Json& job);

  // Polls `condition` after every write to the double (and every 50 ms) until it holds.
  bool WaitFor(const std::function<bool()>& condition,
               absl::Duration timeout = absl::Seconds(10)) const;

  // Requests in the double's log with `verb` on `resource` ("pods", "trainingjobs/status") that
  // succeeded (2xx), optionally only those of `user`.
  int Succeeded(const std::string& verb, const std::string& resource,
                const std::string& user = "") const;

  // Set by a test that provokes RBAC denials on purpose; otherwise TearDown fails on any.
  bool denials_expected_ = false;

  std::unique_ptr<hptrain::testing::ApiServerDouble> server_;
  std::unique_ptr<kube::Client> test_client_;        // the test's own writes
  std::unique_ptr<kube::Client> controller_client_;  // the default controller's
  std::vector<std::unique_ptr<kube::Client>> kept_clients_;
  std::vector<std::unique_ptr<Controller>> controllers_;  // after the clients they use
};

}  // namespace hptrain::manager::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_MANAGER_CONTROLLER_FIXTURE_H_
