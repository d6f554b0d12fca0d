// Client: the Kubernetes API on nlohmann::json objects.
//
// One method per REST verb the controller uses, on any Resource (resource.h):
//   Get / List / ListAll (follows metadata.continue) / Create / Update (PUT, optimistic
//   concurrency through the object's metadata.resourceVersion) / Patch (merge, JSON patch,
//   strategic merge, server-side apply) / UpdateStatus / PatchStatus (the /status subresource) /
//   Delete (propagation policy, preconditions) / Watch (watch.h) / Raw (any path: /version,
//   discovery, other subresources).
//
// Results are the server's JSON. Failures come back as absl::Status decoded from the server's
// Status body (api_error.h): IsNotFound, IsAlreadyExists, IsConflict (409: re-read and retry),
// IsGone (410: relist), InvalidArgument with the field causes for 422, Unauthenticated (401),
// PermissionDenied (403). Transport failures are Unavailable, cancelled calls Cancelled; a 2xx
// response that is not JSON is Internal.
//
//   HPTRAIN_ASSIGN_OR_RETURN(auto client, Client::FromConfig(config));
//   absl::StatusOr<nlohmann::json> job = client->Get(TrainingJobs(), "team-a", "resnet");
//   if (IsNotFound(job.status())) return absl::OkStatus();  // deleted meanwhile
//   nlohmann::json patch = {{"status", {{"phase", "Running"}}}};
//   client->PatchStatus(TrainingJobs(), "team-a", "resnet", PatchType::kMerge, patch);
//
// Thread-safety: all methods may be called concurrently from any thread. Blocking: every call
// blocks for one exchange (ListAll: one per page), bounded by Config::timeout; Watch blocks for
// the whole stream (see WatchOptions).
#ifndef HPTRAIN_CONTROLLER_KUBE_CLIENT_H_
#define HPTRAIN_CONTROLLER_KUBE_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "controller/kube/canceller.h"
#include "controller/kube/config.h"
#include "controller/kube/http_transport.h"
#include "controller/kube/object_meta.h"
#include "controller/kube/resource.h"
#include "controller/kube/watch.h"
#include "nlohmann/json.hpp"

namespace hptrain::kube {

struct ListOptions {
  std::string label_selector;    // "hptrain.io/job=resnet,hptrain.io/role=worker"
  std::string field_selector;    // "metadata.name=x"
  int64_t limit = 0;             // page size; 0 = no paging (ListAll: 500)
  std::string continue_token;    // from the previous page's ObjectList::continue_token
  std::string resource_version;  // "" = most recent; "0" = any cached state
  Canceller* cancel = nullptr;   // optional, not owned
};

struct ObjectList {
  // The objects. Items missing kind/apiVersion (core lists omit them) get the resource's.
  std::vector<nlohmann::json> items;
  std::string resource_version;  // the list's metadata.resourceVersion: watch from here
  std::string continue_token;    // "" on the last page
  std::optional<int64_t> remaining_item_count;
};

enum class PatchType {
  kMerge,           // application/merge-patch+json (RFC 7386)
  kJson,            // application/json-patch+json (RFC 6902; the patch is an array of ops)
  kStrategicMerge,  // application/strategic-merge-patch+json (built-in kinds only)
  kApply,           // application/apply-patch+yaml: server-side apply, needs field_manager
};

// The Content-Type of a patch type.
const char* PatchContentType(PatchType type);

struct PatchOptions {
  std::string field_manager;  // required for kApply; optional otherwise
  bool force = false;         // kApply: take over fields owned by other managers
  std::string subresource;    // "" or "status", "scale"
};

enum class PropagationPolicy { kBackground, kForeground, kOrphan };

struct DeleteOptions {
  std::optional<PropagationPolicy> propagation_policy;
  std::string precondition_uid;               // delete only this incarnation of the name
  std::string precondition_resource_version;  // delete only this version (else 409)
  std::optional<int64_t> grace_period_seconds;
};

class Client {
 public:
  // Builds the transport for `config` (see HttpTransport::Create for errors).
  static absl::StatusOr<std::unique_ptr<Client>> FromConfig(const Config& config);

  explicit Client(std::unique_ptr<HttpTransport> transport);

  // GET one object (or one of its subresources).
  absl::StatusOr<nlohmann::json> Get(const Resource& resource, absl::string_view ns,
                                     absl::string_view name, absl::string_view subresource = "");

  // GET one page of a collection; `ns` empty lists all namespaces.
  absl::StatusOr<ObjectList> List(const Resource& resource, absl::string_view ns,
                                  const ListOptions& options = {});

  // Every page of a collection (page size options.limit, default 500). If the continue token
  // expires mid-way (410), lists once more without paging.
  absl::StatusOr<ObjectList> ListAll(const Resource& resource, absl::string_view ns,
                                     ListOptions options = {});

  // POST `object`. `ns` empty: the object's metadata.namespace (namespaced resources need one,
  // else InvalidArgument). Returns the created object.
  absl::StatusOr<nlohmann::json> Create(const Resource& resource, absl::string_view ns,
                                        const nlohmann::json& object);

  // PUT `object` at its metadata.namespace/name. The server rejects a stale
  // metadata.resourceVersion with 409 (IsConflict). Returns the stored object.
  absl::StatusOr<nlohmann::json> Update(const Resource& resource, const nlohmann::json& object);

  // PUT `object` to its /status subresource (only .status changes).
  absl::StatusOr<nlohmann::json> UpdateStatus(const Resource& resource,
                                              const nlohmann::json& object);

  // PATCH `patch` (an object, or an array of ops for kJson). Returns the patched object.
  absl::StatusOr<nlohmann::json> Patch(const Resource& resource, absl::string_view ns,
                                       absl::string_view name, PatchType type,
                                       const nlohmann::json& patch,
                                       const PatchOptions& options = {});

  // Patch of the /status subresource (options.subresource is ignored).
  absl::StatusOr<nlohmann::json> PatchStatus(const Resource& resource, absl::string_view ns,
                                             absl::string_view name, PatchType type,
                                             const nlohmann::json& patch,
                                             PatchOptions options = {});

  // Server-side apply of `object` (metadata.name/namespace name the target) as `field_manager`.
  // A field owned by another manager is 409 with one cause per field (IsConflict) unless `force`.
  absl::StatusOr<nlohmann::json> Apply(const Resource& resource, const nlohmann::json& object,
                                       absl::string_view field_manager, bool force = false);

  // DELETE. Returns what the server answers: the object (still present with a deletionTimestamp
  // when finalizers or Foreground propagation hold it) or a Status of kind "Status".
  absl::StatusOr<nlohmann::json> Delete(const Resource& resource, absl::string_view ns,
                                        absl::string_view name, const DeleteOptions& options = {});

  // Watches a collection (`ns` empty: all namespaces) and calls `handler` for each event as it
  // arrives, ERROR events included. Returns OK when the server ends the stream (timeoutSeconds),
  // the API error of an ERROR event (IsGone for "too old resource version"), the API error of a
  // non-200 answer, the handler's error, Cancelled when options.cancel fired, Unavailable when the
  // connection fails or stays silent past the idle timeout.
  absl::Status Watch(const Resource& resource, absl::string_view ns, const WatchOptions& options,
                     const WatchHandler& handler);

  // Any request: `target` is an encoded path with query ("/version"), `body` is sent when not
  // null (content type `content_type`). Returns the response JSON (null for an empty body).
  absl::StatusOr<nlohmann::json> Raw(absl::string_view method, absl::string_view target,
                                     const nlohmann::json* body = nullptr,
                                     absl::string_view content_type = "application/json");

  const Config& config() const { return transport_->config(); }

 private:
  absl::StatusOr<nlohmann::json> Call(HttpRequest request);
  absl::StatusOr<ObjectList> ListPage(const Resource& resource, absl::string_view ns,
                                      const ListOptions& options);

  std::unique_ptr<HttpTransport> transport_;
};

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_CLIENT_H_
