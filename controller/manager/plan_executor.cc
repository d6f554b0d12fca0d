#include "controller/manager/plan_executor.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "controller/kube/api_error.h"
#include "controller/kube/resource.h"
#include "controller/reconcile/events.h"
#include "controller/reconcile/object_meta.h"
#include "controller/reconcile/pod_group.h"
#include "runtime/base/status.h"

namespace hptrain::manager {
namespace {

// The resource a Plan object of `kind` (and `api_version`) lives in: only what the reconciler
// creates or deletes.
absl::StatusOr<const kube::Resource*> ResourceOf(const std::string& api_version,
                                                 const std::string& kind) {
  if (kind == "Pod") return &kube::Pods();
  if (kind == "Service") return &kube::Services();
  if (kind == "Secret") return &kube::Secrets();
  if (kind == "TrainingJob") return &kube::TrainingJobs();
  for (const kube::Resource* r : {&kube::VolcanoPodGroups(), &kube::SchedulerPluginsPodGroups()}) {
    if (kind == r->kind && api_version == r->ApiVersion()) return r;
  }
  return absl::InternalError(
      absl::StrCat("the plan names an unexpected kind \"", api_version, " ", kind, "\""));
}

std::string Describe(const std::string& verb, const std::string& kind, const std::string& ns,
                     const std::string& name) {
  return absl::StrCat(verb, " ", kind, " ", ns, "/", name);
}

}  // namespace

absl::Status PlanExecutor::Execute(const nlohmann::json& job, const reconcile::Plan& plan) {
  if (plan.status.has_value()) {
    bool job_gone = false;
    HPTRAIN_RETURN_IF_ERROR(WriteStatus(job, *plan.status, &job_gone));
    if (job_gone) return absl::OkStatus();
  }
  if (recorder_ != nullptr) {
    for (const reconcile::Event& event : plan.events) {
      recorder_->Record(job,
                        event.type == reconcile::kEventWarning ? kube::EventType::kWarning
                                                               : kube::EventType::kNormal,
                        event.reason, event.message);
    }
  }
  for (const reconcile::ObjectRef& ref : plan.deletes) {
    HPTRAIN_RETURN_IF_ERROR(DeleteObject(ref));
  }
  for (const nlohmann::json& object : plan.creates) {
    absl::Status created = CreateObject(object);
    if (absl::IsFailedPrecondition(created) && recorder_ != nullptr) {
      recorder_->Record(job, kube::EventType::kWarning, reconcile::kReasonPodGroupUnavailable,
                        std::string(created.message()));
    }
    HPTRAIN_RETURN_IF_ERROR(created);
  }
  if (plan.delete_job.has_value()) HPTRAIN_RETURN_IF_ERROR(DeleteObject(*plan.delete_job));
  return absl::OkStatus();
}

absl::Status PlanExecutor::WriteStatus(const nlohmann::json& job, const nlohmann::json& status,
                                       bool* job_gone) {
  nlohmann::json updated = job;
  updated["status"] = status;
  // The status subresource ignores everything but status; managedFields would only be echoed.
  if (updated["metadata"].is_object()) updated["metadata"].erase("managedFields");
  absl::StatusOr<nlohmann::json> stored = client_->UpdateStatus(kube::TrainingJobs(), updated);
  if (kube::IsNotFound(stored.status())) {
    *job_gone = true;
    return absl::OkStatus();
  }
  return Annotate(stored.status(), Describe("update status of", "TrainingJob",
                                            reconcile::Namespace(job), reconcile::Name(job)));
}

absl::Status PlanExecutor::DeleteObject(const reconcile::ObjectRef& ref) {
  HPTRAIN_ASSIGN_OR_RETURN(const kube::Resource* resource, ResourceOf(ref.api_version, ref.kind));
  kube::DeleteOptions options;
  options.propagation_policy = kube::PropagationPolicy::kBackground;
  options.precondition_uid = ref.uid;
  options.precondition_resource_version = ref.resource_version;
  absl::StatusOr<nlohmann::json> deleted = client_->Delete(*resource, ref.ns, ref.name, options);
  if (kube::IsNotFound(deleted.status())) return absl::OkStatus();
  // With only a uid precondition, a conflict means another object holds the name now: the one
  // this Plan meant is gone already.
  if (kube::IsConflict(deleted.status()) && !ref.uid.empty() && ref.resource_version.empty()) {
    return absl::OkStatus();
  }
  return Annotate(deleted.status(), Describe("delete", ref.kind, ref.ns, ref.name));
}

absl::Status PlanExecutor::CreateObject(const nlohmann::json& object) {
  const std::string kind = reconcile::StringAt(object, {"kind"});
  HPTRAIN_ASSIGN_OR_RETURN(const kube::Resource* resource,
                           ResourceOf(reconcile::StringAt(object, {"apiVersion"}), kind));
  const std::string ns = reconcile::Namespace(object);
  absl::StatusOr<nlohmann::json> created = client_->Create(*resource, ns, object);
  if (kube::IsAlreadyExists(created.status())) return absl::OkStatus();
  if (kind == reconcile::kPodGroupKind && kube::IsNotFound(created.status())) {
    // The scheduler's CRD is not installed: the pods would wait for a scheduler that is not
    // there either. Said on the job, where `kubectl describe` shows it; retried with backoff.
    return absl::FailedPreconditionError(absl::StrCat(
        Describe("create", kind, ns, reconcile::Name(object)), ": the kind ",
        resource->plural, ".", resource->group, " is not installed in the cluster; ",
        "spec.gangScheduling needs its scheduler (", resource->group, ") installed"));
  }
  return Annotate(created.status(), Describe("create", kind, ns, reconcile::Name(object)));
}

}  // namespace hptrain::manager
