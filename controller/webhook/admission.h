// The validating admission webhook's decision: an AdmissionReview (admission.k8s.io/v1) about a
// TrainingJob in, the AdmissionReview answer out.
//
// A TrainingJob is admitted exactly when the controller could run it: the same parse and
// validation as the reconciler's (reconcile/parsed_job.h: the runtime's own job parser and
// validator plus the controller-only keys), so `kubectl apply` refuses what would otherwise be
// created and then fail with reason InvalidSpec. A denial carries the validator's one-line
// message, "<field path>: <reason>", with HTTP code 422 and the field as the cause; kubectl
// prints it after the API server's prefix `admission webhook "..." denied the request:`.
//
//   CREATE       the new object is checked.
//   UPDATE       the new object is checked, unless its spec equals the old one's (a metadata-only
//                change such as a label or a finalizer, or a job admitted before the webhook
//                existed, must never be stuck on its own spec).
//   other        admitted (the webhook is registered for CREATE and UPDATE only).
// An admitted job may come with warnings (response.warnings, printed by kubectl as
// "Warning: ..."): checkpoints without spec.checkpoint.volume, which a gang restart cannot read.
//
// Pure; thread-safe.
#ifndef HPTRAIN_CONTROLLER_WEBHOOK_ADMISSION_H_
#define HPTRAIN_CONTROLLER_WEBHOOK_ADMISSION_H_

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace hptrain::webhook {

// The path the webhook is served at.
inline constexpr char kValidatePath[] = "/validate-trainingjob";

// Answers `review`. InvalidArgument (the server answers 400) when `review` is not an
// AdmissionReview v1 request with a uid.
absl::StatusOr<nlohmann::json> ReviewTrainingJob(const nlohmann::json& review);

}  // namespace hptrain::webhook

#endif  // HPTRAIN_CONTROLLER_WEBHOOK_ADMISSION_H_
