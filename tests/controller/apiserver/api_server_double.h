// ApiServerDouble: an in-process stand-in for kube-apiserver (plus the garbage collector and the
// CRD controller) that the controller's tests start on 127.0.0.1 and point the real HTTP client
// at. Its behaviour follows the recorded v1.28.7 exchanges in tests/fixtures/kube
// (README.md there); README.md in this folder lists what is imitated and what is simplified.
//
//   ApiServerDouble server;                      // serves built-ins + hptrain.io TrainingJob
//   ASSERT_OK_AND_ASSIGN(int port, server.Start());
//   client.SetBaseUrl(server.base_url());        // "http://127.0.0.1:<port>"
//   ... controller creates pods ...
//   server.SetPodPhase("ns", "job-worker-0", "Running");   // act as the kubelet
//   EXPECT_TRUE(server.WaitFor([&] { return server.List("pods", "ns").size() == 3; },
//                              absl::Seconds(5)));
//   EXPECT_EQ(server.RequestCount("create", "pods"), 3);   // no duplicate creates
//
// In-process calls name a resource type by ResourceType::Qualified(): "pods", "services",
// "secrets", "configmaps", "events" (core), "events.events.k8s.io", "namespaces",
// "leases.coordination.k8s.io", "customresourcedefinitions.apiextensions.k8s.io",
// "trainingjobs.hptrain.io"; a plural alone ("trainingjobs") works when unambiguous. Unknown
// names give NotFound. Returned objects are JSON copies.
//
// Thread-safety: every method is thread-safe. Start/Stop are meant for the owning test thread.
// Hooks run on server threads: validators under the store lock, so they must not call back into
// the server; the authorizer outside any lock.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_API_SERVER_DOUBLE_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_API_SERVER_DOUBLE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tests/controller/apiserver/api_operations.h"
#include "tests/controller/apiserver/api_status.h"
#include "tests/controller/apiserver/garbage_collector.h"
#include "tests/controller/apiserver/http_frontend.h"
#include "tests/controller/apiserver/object_store.h"
#include "tests/controller/apiserver/rbac.h"
#include "tests/controller/apiserver/request_policy.h"
#include "tests/controller/apiserver/resource_type.h"

namespace hptrain::testing {

struct ApiServerDoubleOptions {
  std::string host = "127.0.0.1";
  int port = 0;                     // 0 = an ephemeral port (see port())
  size_t worker_threads = 96;       // one per open connection (watches included)
  bool serve_training_jobs = true;  // serve TrainingJobResource() from the start
  uint64_t first_resource_version = 1000;
  size_t history_limit = 10000;      // watch history per resource type
  size_t watch_queue_limit = 10000;  // events a watcher may lag before its stream is closed
  std::string git_version = "v1.28.7";
};

class ApiServerDouble {
 public:
  explicit ApiServerDouble(ApiServerDoubleOptions options = {});
  // Stops the server if it runs.
  ~ApiServerDouble();
  ApiServerDouble(const ApiServerDouble&) = delete;
  ApiServerDouble& operator=(const ApiServerDouble&) = delete;

  // Starts serving HTTP and the garbage collector; returns the bound port. Errors: as
  // HttpFrontend::Start. Objects and hooks set up before Start are kept.
  absl::StatusOr<int> Start();
  // Stops HTTP (ending open watches) and the garbage collector. Idempotent; objects are kept.
  void Stop();
  int port() const;
  // "http://127.0.0.1:<port>".
  std::string base_url() const;

  // Serves another resource type (or redefines one with the same group and plural).
  void ServeResource(const ResourceType& type);
  std::optional<ResourceType> FindResource(const std::string& resource) const;

  // --- Objects, bypassing HTTP ---------------------------------------------------------------
  // Errors (all): NotFound for an unknown resource type, plus those listed.
  // The stored object. Errors: NotFound (404 Status payload).
  absl::StatusOr<nlohmann::json> Get(const std::string& resource, const std::string& ns,
                                     const std::string& name) const;
  // Objects of `resource` in `ns` ("" = all namespaces) matching `label_selector`, sorted.
  std::vector<nlohmann::json> List(const std::string& resource, const std::string& ns = "",
                                   const std::string& label_selector = "") const;
  // Creates with the full API semantics (validation, status dropped, defaults), like a POST by
  // field manager "apiserver-double". Errors: AlreadyExists, InvalidArgument (422).
  absl::StatusOr<nlohmann::json> Create(const std::string& resource, nlohmann::json object);
  // Creates or replaces `object` as given, status included, without validation: seeding and the
  // kubelet's role. metadata.namespace defaults to "default" for namespaced types.
  absl::StatusOr<nlohmann::json> Put(const std::string& resource, nlohmann::json object);
  // Read-modify-write of one object under the store lock (no validation or status rules).
  absl::StatusOr<nlohmann::json> Mutate(const std::string& resource, const std::string& ns,
                                        const std::string& name,
                                        const std::function<void(nlohmann::json*)>& mutate);
  // The kubelet reporting a pod phase ("Running", "Succeeded", "Failed"): sets status.phase and
  // a matching Ready condition.
  absl::Status SetPodPhase(const std::string& ns, const std::string& name,
                           const std::string& phase);
  // DELETE with `propagation_policy` ("Background", "Foreground", "Orphan"); returns the body a
  // DELETE request would get.
  absl::StatusOr<nlohmann::json> Delete(const std::string& resource, const std::string& ns,
                                        const std::string& name,
                                        const std::string& propagation_policy = "Background");
  uint64_t resource_version() const;

  // --- Hooks ---------------------------------------------------------------------------------
  // Extra 422 validation of `resource` (e.g. the TrainingJob CRD schema check).
  void AddValidator(const std::string& resource, Validator validator);
  // A validating admission webhook for `resource` (admission_webhook.h builds one that calls a
  // real webhook over HTTPS).
  void AddAdmission(const std::string& resource, Admission admission);
  // Requires bearer tokens: `token` authenticates as `user`.
  void AddToken(const std::string& token, const std::string& user);
  // Decides every request after authentication (rbac.h builds one from Roles); a denial is 403.
  void SetAuthorizer(Authorizer authorizer);
  // The requests the authorizer denied, oldest first.
  std::vector<RequestAttributes> Denials() const;
  void InjectFault(Fault fault);
  void ClearFaults();

  // --- Watches -------------------------------------------------------------------------------
  // A BOOKMARK now on every open watch that asked for bookmarks.
  void SendBookmarks();
  // Forget the event history: watches from older resourceVersions get 410 Expired in-stream.
  void CompactHistory();
  // Ends every open watch stream.
  void CloseAllWatches();
  // Open watches on `resource` ("" = all).
  size_t WatchCount(const std::string& resource = "") const;

  // --- Request log ---------------------------------------------------------------------------
  std::vector<RequestRecord> RequestLog() const;
  void ClearRequestLog();
  // Requests with `verb` ("" = any) on `resource` ("pods", "pods/status", "pods/*", "" = any).
  int RequestCount(const std::string& verb, const std::string& resource = "") const;

  // --- Waiting -------------------------------------------------------------------------------
  // Evaluates `condition` after every committed write (and at least every 50 ms) until it is
  // true or `timeout` ends; returns its last value. `condition` may call this server.
  bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) const;
  // Blocks until the garbage collector has nothing left to do; false on timeout.
  bool WaitForGarbageCollection(absl::Duration timeout);

 private:
  absl::StatusOr<ResourceType> Type(const std::string& resource) const;

  const ApiServerDoubleOptions options_;
  ObjectStore store_;
  ApiOperations operations_;
  RequestPolicy policy_;
  GarbageCollector collector_;
  HttpFrontend frontend_;
};

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_API_SERVER_DOUBLE_H_
