// A validating admission webhook registration, as kube-apiserver calls one: for each write of
// the object it POSTs an AdmissionReview (admission.k8s.io/v1) over HTTPS, trusting only
// `ca_file` (the registration's caBundle), and
//   - allowed: the write goes on;
//   - refused: the webhook's status becomes the API error, its message prefixed with
//     `admission webhook "<name>" denied the request: ` and its code at least 400, as the real
//     server does (k8s.io/apiserver webhookerrors.ToStatusErr);
//   - no answer (connection refused, TLS failure, timeout, a malformed answer): failurePolicy
//     Fail refuses with 500 InternalError `failed calling webhook "<name>": ...`; Ignore lets the
//     write go on.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_ADMISSION_WEBHOOK_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_ADMISSION_WEBHOOK_H_

#include <string>

#include "absl/time/time.h"
#include "tests/controller/apiserver/api_operations.h"

namespace hptrain::testing {

struct AdmissionWebhookConfig {
  std::string name = "validate.trainingjobs.hptrain.io";
  std::string host = "127.0.0.1";
  int port = 0;
  std::string path = "/validate-trainingjob";
  std::string ca_file;                  // PEM CA the server certificate must chain to
  std::string failure_policy = "Fail";  // Fail | Ignore
  absl::Duration timeout = absl::Seconds(5);
};

Admission AdmissionWebhook(AdmissionWebhookConfig config);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_ADMISSION_WEBHOOK_H_
