// Resource: how the client addresses one kind of Kubernetes object over REST.
//
//   core group:   /api/v1/namespaces/{ns}/pods/{name}[/{subresource}]
//   named group:  /apis/{group}/{version}/namespaces/{ns}/{plural}/{name}[/{subresource}]
//   cluster-wide: the same without "namespaces/{ns}"; a namespaced resource listed or watched with
//                 an empty namespace covers all namespaces (/api/v1/pods).
//
// The accessors below name the resources the controller uses; others can be built in place, e.g.
// Resource{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
//          "CustomResourceDefinition", false}.
//
// Values are immutable; the accessors return references to process-lifetime objects.
#ifndef HPTRAIN_CONTROLLER_KUBE_RESOURCE_H_
#define HPTRAIN_CONTROLLER_KUBE_RESOURCE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace hptrain::kube {

struct Resource {
  std::string group;    // "" for the core group
  std::string version;  // "v1", "v1alpha1"
  std::string plural;   // "pods", "trainingjobs"
  std::string kind;     // "Pod", "TrainingJob"
  bool namespaced = true;

  // "v1" for the core group, "group/version" otherwise (an object's apiVersion).
  std::string ApiVersion() const;

  // Collection path: objects of namespace `ns` (all namespaces when `ns` is empty or the
  // resource is cluster-scoped).
  std::string CollectionPath(absl::string_view ns) const;

  // Object path, with an optional subresource ("status", "scale").
  std::string ObjectPath(absl::string_view ns, absl::string_view name,
                         absl::string_view subresource = "") const;
};

const Resource& Pods();          // v1 pods
const Resource& Services();      // v1 services
const Resource& Secrets();       // v1 secrets
const Resource& Events();        // v1 events (core events, what `kubectl describe` shows)
const Resource& Namespaces();    // v1 namespaces (cluster-scoped)
const Resource& Leases();        // coordination.k8s.io/v1 leases
const Resource& TrainingJobs();  // hptrain.io/v1alpha1 trainingjobs
// Gang-scheduling PodGroups; each exists only where its scheduler's CRD is installed.
const Resource& VolcanoPodGroups();           // scheduling.volcano.sh/v1beta1 podgroups
const Resource& SchedulerPluginsPodGroups();  // scheduling.x-k8s.io/v1alpha1 podgroups

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_RESOURCE_H_
