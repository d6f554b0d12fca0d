#include "controller/reconcile/rewritten_container.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace hptrain::reconcile {
namespace {

// Set: present, not null, and not an empty list (the two mean "the image's" to Kubernetes).
bool IsSet(const Json* value) {
  return value != nullptr && !value->is_null() && !(value->is_array() && value->empty());
}

}  // namespace

size_t RewrittenContainerIndex(const Json& pod_template, absl::string_view role) {
  const Json* containers = Find(pod_template, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array()) return 0;
  for (size_t i = 0; i < containers->size(); ++i) {
    if (StringAt((*containers)[i], {"name"}) == role) return i;
  }
  return 0;
}

absl::Status CheckRewrittenContainer(const Json& pod_template, absl::string_view role,
                                     bool runs_trainer, absl::string_view path) {
  const Json* containers = Find(pod_template, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array() || containers->empty()) {
    return absl::OkStatus();
  }
  const size_t index = RewrittenContainerIndex(pod_template, role);
  const Json& container = (*containers)[index];
  const std::string at = absl::StrCat(path, ".spec.containers[", index, "]");
  if (IsSet(Find(container, {"command"}))) {
    return absl::InvalidArgumentError(absl::StrCat(
        at, ".command: is set by the controller (",
        runs_trainer ? "to spec.trainer.command"
                     : absl::StrCat("it runs `hptrain ", role,
                                    "`, which reads the job's spec from the job Secret"),
        "); remove it"));
  }
  if (!runs_trainer && IsSet(Find(container, {"args"}))) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ".args: is set by the controller (`hptrain ", role,
                     "` takes every setting from the job's spec); remove it"));
  }
  return absl::OkStatus();
}

}  // namespace hptrain::reconcile
