// ResourceType: what the API server double knows about one served resource (a row of
// discovery): group/version/kind/plural, scope, subresources and the per-resource behaviours
// kube-apiserver's registry gives it (generation tracking, graceful pod deletion, ...).
//
// BuiltinResources() lists the built-in types the double serves; TrainingJobResource() is the
// hptrain.io/v1alpha1 TrainingJob custom resource of the shared contract (status + scale with
// specReplicasPath .spec.workers.replicas). ResourceTypeFromCrd() turns a posted
// CustomResourceDefinition into a served type, so tests can serve any custom resource.
//
// Thread-safety: plain values; free functions without shared state.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_RESOURCE_TYPE_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_RESOURCE_TYPE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace hptrain::testing {

// The scale subresource of a custom resource (CRD spec.versions[].subresources.scale).
struct ScaleSubresource {
  std::string spec_replicas_path;    // ".spec.workers.replicas"
  std::string status_replicas_path;  // ".status.replicas"
  std::string label_selector_path;   // ".status.selector"; may be empty
};

struct ResourceType {
  std::string group;      // "" for the core group
  std::string version;    // "v1", "v1alpha1"
  std::string kind;       // "Pod"
  std::string plural;     // "pods"
  std::string singular;   // "pod"; empty = lower-case kind
  std::string list_kind;  // empty = kind + "List"
  bool namespaced = true;
  bool status_subresource = false;
  std::optional<ScaleSubresource> scale;
  // Served like a custom resource: lists always carry metadata.continue (fixture 16) and the
  // object is stored as sent (unstructured).
  bool custom = false;
  // metadata.generation is set (1 on create) and bumped on changes outside metadata/status.
  bool has_generation = false;
  // Deletion first stamps deletionTimestamp (MODIFIED) and then removes the object (DELETED), as
  // pods without a node do (fixture 36).
  bool graceful_deletion = false;
  // DELETE answers with the deleted object instead of a Success Status (pods, services).
  bool return_deleted_object = false;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  // Field selector keys accepted besides metadata.name and metadata.namespace (pods:
  // status.phase, spec.nodeName).
  std::vector<std::string> selectable_fields;
  // OpenAPI v3 schema of the whole object (CRD openAPIV3Schema); null = none. With a schema the
  // double prunes unknown fields and answers violations with 422 Invalid, like the real server.
  nlohmann::json schema;
  // additionalPrinterColumns of a type served from a CRD (Age when the CRD lists none); null for
  // the others, which answer a request for a Table with their plain JSON (table_convert.h).
  nlohmann::json printer_columns;

  // "v1" or "<group>/<version>".
  std::string ApiVersion() const;
  // "pods" or "trainingjobs.hptrain.io": the key used by the double's in-process API and in
  // messages ("trainingjobs.hptrain.io \"x\" not found").
  std::string Qualified() const;
  // "Pod" or "TrainingJob.hptrain.io" (422 messages).
  std::string GroupKind() const;
  std::string Singular() const;
  std::string ListKind() const;
};

// A type with the given names and every other field at its default.
ResourceType NewResourceType(const std::string& group, const std::string& version,
                             const std::string& kind, const std::string& plural);

// The built-in types: core/v1 pods, services, secrets, configmaps, events, namespaces;
// events.k8s.io/v1 events; coordination.k8s.io/v1 leases;
// apiextensions.k8s.io/v1 customresourcedefinitions.
std::vector<ResourceType> BuiltinResources();

// hptrain.io/v1alpha1 TrainingJob per the shared contract (short name tj, category all, status +
// scale subresources), without a schema.
ResourceType TrainingJobResource();

// The gang schedulers' PodGroup CRDs (status subresource, short name pg/podgroup), served only
// by tests that install them: Volcano's scheduling.volcano.sh/v1beta1 and scheduler-plugins'
// scheduling.x-k8s.io/v1alpha1.
ResourceType VolcanoPodGroupResource();
ResourceType SchedulerPluginsPodGroupResource();

// The served type of a CustomResourceDefinition object: its storage version (or the first served
// one), names, scope, subresources and openAPIV3Schema. Errors: InvalidArgument when the CRD
// lacks group, names.kind, names.plural or a served version.
absl::StatusOr<ResourceType> ResourceTypeFromCrd(const nlohmann::json& crd);

// The object a BOOKMARK event carries: an empty object of the type with only
// metadata.resourceVersion, shaped like fixture 36 for built-in kinds.
nlohmann::json BookmarkObject(const ResourceType& type, const std::string& resource_version);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_RESOURCE_TYPE_H_
