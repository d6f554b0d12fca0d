#include "controller/reconcile/pod_paths.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "runtime/base/status.h"

namespace hptrain::reconcile {
namespace {

absl::Status Absolute(absl::string_view field, const std::string& path, absl::string_view hint) {
  if (path.empty() || path.front() == '/') return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field,
      ": must be an absolute path in a pod (a relative one resolves against the "
      "container's working directory, in hptrain's images /tmp, an empty scratch volume; ",
      hint, "), got \"", path, "\""));
}

}  // namespace

absl::Status CheckPodPaths(const job::JobSpec& spec) {
  HPTRAIN_RETURN_IF_ERROR(Absolute("spec.model.torchscript", spec.model.torchscript,
                                   "put the module in the image or on a volume"));
  HPTRAIN_RETURN_IF_ERROR(
      Absolute("spec.dataset.path", spec.dataset.path, "mount the data set from a volume"));
  if (spec.strategy.type == "mp2") {
    const std::string predictor = spec.strategy.String("predictor");
    if (predictor != "zero") {
      HPTRAIN_RETURN_IF_ERROR(Absolute(
          "spec.strategy.predictor", predictor,
          absl::StrCat("the runtime images ship the LeNet-5 one at ", kShippedPredictorPath)));
    }
  }
  return absl::OkStatus();
}

}  // namespace hptrain::reconcile
