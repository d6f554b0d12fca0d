#include "controller/reconcile/reserved_env.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace hptrain::reconcile {
namespace {

absl::Status Reserved(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": ", what, " reserved: hptrain sets the ", kReservedEnvPrefix,
                   "* variables"));
}

// The first reserved name in `container` (at `path`), else OK.
absl::Status CheckContainer(const Json& container, const std::string& path) {
  if (const Json* env = Find(container, {"env"}); env != nullptr && env->is_array()) {
    for (size_t i = 0; i < env->size(); ++i) {
      const std::string name = StringAt((*env)[i], {"name"});
      if (absl::StartsWith(name, kReservedEnvPrefix)) {
        return Reserved(absl::StrCat(path, ".env[", i, "].name"), absl::StrCat(name, " is"));
      }
    }
  }
  if (const Json* from = Find(container, {"envFrom"}); from != nullptr && from->is_array()) {
    for (size_t i = 0; i < from->size(); ++i) {
      const std::string prefix = StringAt((*from)[i], {"prefix"});
      if (absl::StartsWith(prefix, kReservedEnvPrefix)) {
        return Reserved(absl::StrCat(path, ".envFrom[", i, "].prefix"),
                        absl::StrCat(prefix, " makes names that are"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckReservedEnv(const Json& pod_template, absl::string_view path) {
  for (const char* list : {"containers", "initContainers"}) {
    const Json* containers = Find(pod_template, {"spec", list});
    if (containers == nullptr || !containers->is_array()) continue;
    for (size_t i = 0; i < containers->size(); ++i) {
      absl::Status status =
          CheckContainer((*containers)[i], absl::StrCat(path, ".spec.", list, "[", i, "]"));
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace hptrain::reconcile
