#include "controller/manager/owner_key.h"

#include "absl/strings/match.h"
#include "controller/kube/object_meta.h"
#include "controller/reconcile/labels.h"
#include "controller/reconcile/object_meta.h"

namespace hptrain::manager {

std::optional<std::string> OwnerJobKey(const nlohmann::json& object) {
  const std::string ns = kube::NamespaceOf(object);
  const nlohmann::json* refs = reconcile::Find(object, {"metadata", "ownerReferences"});
  if (refs != nullptr && refs->is_array()) {
    for (const nlohmann::json& ref : *refs) {
      const nlohmann::json* controller = reconcile::Find(ref, {"controller"});
      if (controller == nullptr || !controller->is_boolean() || !controller->get<bool>()) continue;
      if (reconcile::StringAt(ref, {"kind"}) != "TrainingJob") continue;
      if (!absl::StartsWith(reconcile::StringAt(ref, {"apiVersion"}), "hptrain.io/")) continue;
      std::string name = reconcile::StringAt(ref, {"name"});
      if (!name.empty()) return kube::ObjectKey(ns, name);
    }
  }
  std::string label = reconcile::Label(object, reconcile::kJobLabel);
  if (label.empty()) return std::nullopt;
  return kube::ObjectKey(ns, label);
}

}  // namespace hptrain::manager
