#include "controller/kube/resource.h"

#include "absl/strings/str_cat.h"

namespace hptrain::kube {
namespace {

const Resource& Make(const char* group, const char* version, const char* plural, const char* kind,
                     bool namespaced) {
  // Leaked on purpose: referenced from threads that may outlive static destruction.
  return *new Resource{group, version, plural, kind, namespaced};
}

}  // namespace

std::string Resource::ApiVersion() const {
  return group.empty() ? version : absl::StrCat(group, "/", version);
}

std::string Resource::CollectionPath(absl::string_view ns) const {
  std::string path =
      group.empty() ? absl::StrCat("/api/", version) : absl::StrCat("/apis/", group, "/", version);
  if (namespaced && !ns.empty()) absl::StrAppend(&path, "/namespaces/", ns);
  absl::StrAppend(&path, "/", plural);
  return path;
}

std::string Resource::ObjectPath(absl::string_view ns, absl::string_view name,
                                 absl::string_view subresource) const {
  std::string path = absl::StrCat(CollectionPath(ns), "/", name);
  if (!subresource.empty()) absl::StrAppend(&path, "/", subresource);
  return path;
}

const Resource& Pods() {
  static const Resource& r = Make("", "v1", "pods", "Pod", true);
  return r;
}
const Resource& Services() {
  static const Resource& r = Make("", "v1", "services", "Service", true);
  return r;
}
const Resource& Secrets() {
  static const Resource& r = Make("", "v1", "secrets", "Secret", true);
  return r;
}
const Resource& Events() {
  static const Resource& r = Make("", "v1", "events", "Event", true);
  return r;
}
const Resource& Namespaces() {
  static const Resource& r = Make("", "v1", "namespaces", "Namespace", false);
  return r;
}
const Resource& Leases() {
  static const Resource& r = Make("coordination.k8s.io", "v1", "leases", "Lease", true);
  return r;
}
const Resource& TrainingJobs() {
  static const Resource& r = Make("hptrain.io", "v1alpha1", "trainingjobs", "TrainingJob", true);
  return r;
}
const Resource& VolcanoPodGroups() {
  static const Resource& r = Make("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", true);
  return r;
}
const Resource& SchedulerPluginsPodGroups() {
  static const Resource& r = Make("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", true);
  return r;
}

}  // namespace hptrain::kube
