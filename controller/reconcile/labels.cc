#include "controller/reconcile/labels.h"

#include "absl/strings/str_cat.h"
#include "runtime/job/job_parser.h"

namespace hptrain::reconcile {

std::string PsPodName(absl::string_view job, int shard) { return absl::StrCat(job, "-ps-", shard); }
std::string PsServiceName(absl::string_view job, int shard) { return PsPodName(job, shard); }
std::string WorkerPodName(absl::string_view job, int rank) {
  return absl::StrCat(job, "-worker-", rank);
}
std::string ServiceName(absl::string_view job) { return std::string(job); }
std::string SecretName(absl::string_view job) { return absl::StrCat(job, "-hptrain"); }

std::string JobSelector(absl::string_view job) { return absl::StrCat(kJobLabel, "=", job); }
std::string WorkerSelector(absl::string_view job) {
  return absl::StrCat(kJobLabel, "=", job, ",", kRoleLabel, "=", kRoleWorker);
}

Json JobLabels(absl::string_view job) {
  return Json{{kJobLabel, std::string(job)}, {kManagedByLabel, kManagedByValue}};
}

Json PodLabels(absl::string_view job, absl::string_view role, int rank, absl::string_view group) {
  Json labels = JobLabels(job);
  labels[kRoleLabel] = std::string(role);
  labels[kRankLabel] = absl::StrCat(rank);
  if (role == kRoleWorker) labels[kGroupLabel] = std::string(group);
  return labels;
}

Json OwnerReference(absl::string_view job_name, absl::string_view job_uid) {
  return Json{
      {"apiVersion", job::kApiVersion}, {"kind", job::kKind}, {"name", std::string(job_name)},
      {"uid", std::string(job_uid)},    {"controller", true}, {"blockOwnerDeletion", true}};
}

bool IsControlledBy(const Json& object, const Json& job) {
  const Json* refs = Find(object, {"metadata", "ownerReferences"});
  if (refs == nullptr || !refs->is_array()) return false;
  const std::string uid = Uid(job);
  const std::string name = Name(job);
  for (const Json& ref : *refs) {
    const Json* controller = Find(ref, {"controller"});
    if (controller == nullptr || !controller->is_boolean() || !controller->get<bool>()) continue;
    if (StringAt(ref, {"kind"}) != job::kKind ||
        StringAt(ref, {"apiVersion"}).rfind("hptrain.io/", 0) != 0) {
      continue;
    }
    // A controller reference is unique; if it is not this job's, the object is someone else's.
    return uid.empty() ? StringAt(ref, {"name"}) == name : StringAt(ref, {"uid"}) == uid;
  }
  return false;
}

}  // namespace hptrain::reconcile
