#include "controller/reconcile/plan.h"

#include "absl/strings/str_cat.h"

namespace hptrain::reconcile {

bool ObjectRef::operator==(const ObjectRef& other) const {
  return api_version == other.api_version && kind == other.kind && ns == other.ns &&
         name == other.name && uid == other.uid && resource_version == other.resource_version;
}

bool Plan::NoWrites() const {
  return creates.empty() && deletes.empty() && !status.has_value() && events.empty() &&
         !delete_job.has_value();
}

bool Plan::operator==(const Plan& other) const {
  return creates == other.creates && deletes == other.deletes && status == other.status &&
         events == other.events && requeue_after == other.requeue_after &&
         delete_job == other.delete_job && membership == other.membership;
}

std::string Plan::DebugString() const {
  std::string out;
  if (status.has_value()) {
    absl::StrAppend(&out, "status: phase=", StringAt(*status, {"phase"}),
                    " restarts=", IntAt(*status, {"restarts"}, 0), "\n");
  }
  for (const MembershipRequest& request : membership) {
    absl::StrAppend(&out, "membership ", KindName(request.kind), " slot ", request.slot, " (",
                    request.reason, ")\n");
  }
  for (const ObjectRef& ref : deletes) {
    absl::StrAppend(&out, "delete ", ref.kind, " ", ref.ns, "/", ref.name, "\n");
  }
  for (const Json& object : creates) {
    absl::StrAppend(&out, "create ", StringAt(object, {"kind"}), " ", Namespace(object), "/",
                    Name(object), "\n");
  }
  for (const Event& e : events) {
    absl::StrAppend(&out, "event ", e.type, " ", e.reason, ": ", e.message, "\n");
  }
  if (delete_job.has_value()) {
    absl::StrAppend(&out, "delete ", delete_job->kind, " ", delete_job->ns, "/", delete_job->name,
                    "\n");
  }
  if (requeue_after.has_value()) {
    absl::StrAppend(&out, "requeue after ", absl::FormatDuration(*requeue_after), "\n");
  }
  return out.empty() ? "(no writes)\n" : out;
}

}  // namespace hptrain::reconcile
