// The files a job's pods read must be named by absolute paths on Kubernetes. `hptrain run`
// resolves a relative path against the directory it runs in (a source tree, a data folder); a pod
// has no such place: its working directory is the image's (/tmp in hptrain's images, a scratch
// emptyDir that starts empty), so a relative path there names a file nobody put in it.
//
// The paths checked, when set:
//   spec.model.torchscript   the TorchScript module the workers train
//   spec.dataset.path        the data set's directory (the built-in sets default to an absolute
//                            /usr/share/datasets/<name>)
//   spec.strategy.predictor  mp2's predictor file (not "zero", which names no file); the runtime
//                            images ship the repository's LeNet-5 predictor at
//                            kShippedPredictorPath
// The files the pods write are another matter: a relative spec.collect.path or
// spec.checkpoint.path lands in the scratch /tmp, as an absolute one outside a volume lands in the
// scratch volume the controller adds there (desired_objects.h); either is lost with the pod. The
// validator (runtime/job/job_validate.cc) wants spec.checkpoint.path absolute whenever
// spec.checkpoint.volume is set, the only place a checkpoint outlives its pod.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_POD_PATHS_H_
#define HPTRAIN_CONTROLLER_RECONCILE_POD_PATHS_H_

#include "absl/status/status.h"
#include "runtime/job/job_spec.h"

namespace hptrain::reconcile {

// Where deploy/docker's runtime images hold examples/predictors/lenet5-fashion-mnist.mp2p.
inline constexpr char kShippedPredictorPath[] =
    "/usr/share/hptrain/predictors/lenet5-fashion-mnist.mp2p";

// OK when every path above that `spec` sets is absolute; else InvalidArgument for the first that
// is not, e.g. `spec.dataset.path: must be an absolute path in a pod (a relative one resolves
// against the container's working directory, in hptrain's images /tmp, an empty scratch volume;
// mount the data set from a volume), got "data/x"`. Pure; thread-safe.
absl::Status CheckPodPaths(const job::JobSpec& spec);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_POD_PATHS_H_
