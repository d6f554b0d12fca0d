// ApiError: a Kubernetes API failure (a `Status` object) carried inside an absl::Status.
//
// The API server answers failures with a metav1.Status body:
//   {"kind":"Status","status":"Failure","message":"trainingjobs.hptrain.io \"x\" not found",
//    "reason":"NotFound","details":{"name":"x","group":"hptrain.io","kind":"trainingjobs",
//    "causes":[{"reason":"FieldValueInvalid","message":"...","field":"spec.x"}]},"code":404}
// The client turns it into an absl::Status whose code follows the HTTP status and whose message is
// one line: the server's message, then "(<http code> <reason>)", e.g.
//   trainingjobs.hptrain.io "x" not found (404 NotFound)
// The decoded ApiError (reason, code, details and causes) rides along as a status payload;
// GetApiError() reads it back.
//
//   HTTP                      absl code            helper
//   404                       NotFound             IsNotFound
//   409 reason AlreadyExists  AlreadyExists        IsAlreadyExists
//   409 other (Conflict)      Aborted              IsConflict
//   410 (Gone / Expired)      FailedPrecondition   IsGone
//   400, 413, 415, 422        InvalidArgument      IsInvalid (422 only)
//   401                       Unauthenticated
//   403                       PermissionDenied
//   405                       Unimplemented
//   408                       DeadlineExceeded
//   429                       ResourceExhausted
//   500                       Internal
//   other 5xx                 Unavailable
//   transport failure         Unavailable          (no payload)
//
// Note: a Status rebuilt from code and message (hptrain::Annotate) loses the payload; the Is*
// helpers then fall back to the absl code, so they keep working on annotated errors.
// absl has its own IsNotFound / IsAlreadyExists (same answer for these codes), which argument-
// dependent lookup finds too: call these qualified, kube::IsNotFound(status).
//
// Pure functions, thread-safe.
#ifndef HPTRAIN_CONTROLLER_KUBE_API_ERROR_H_
#define HPTRAIN_CONTROLLER_KUBE_API_ERROR_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace hptrain::kube {

// One entry of Status.details.causes (e.g. one invalid field, one field-manager conflict).
struct StatusCause {
  std::string reason;  // "FieldValueInvalid", "FieldManagerConflict", ...
  std::string message;
  std::string field;  // "spec.workerGroups[0].replicas", ".spec.globalBatchSize", ...
};

// A decoded metav1.Status failure.
struct ApiError {
  int code = 0;         // HTTP status code (Status.code, or the response's status)
  std::string reason;   // "NotFound", "AlreadyExists", "Conflict", "Invalid", "Expired"...
  std::string message;  // Status.message, verbatim
  std::string group;    // Status.details.group
  std::string kind;     // Status.details.kind
  std::string name;     // Status.details.name
  std::vector<StatusCause> causes;
  int retry_after_seconds = 0;  // Status.details.retryAfterSeconds (0 = not given)
};

// The absl code for an HTTP status code and Status reason (see the table above).
absl::StatusCode CodeForHttpStatus(int http_status, absl::string_view reason);

// Decodes a failed response: `body` is parsed as a Status when it is one; any other body (an HTML
// error page from a proxy, plain text) becomes the message, shortened to one line of at most 200
// characters. Always returns a non-OK status carrying an ApiError payload.
absl::Status StatusFromResponse(int http_status, absl::string_view body);

// Decodes a Status object (e.g. the object of an in-stream watch ERROR event). `fallback_code` is
// used when the object has no `code`. Always returns a non-OK status with an ApiError payload.
absl::Status StatusFromStatusObject(const nlohmann::json& status, int fallback_code);

// Builds the absl::Status for `error` (message format above) and attaches it as payload.
absl::Status ToStatus(const ApiError& error);

// The ApiError attached to `status`, or nullopt (OK status, transport failure, payload lost).
std::optional<ApiError> GetApiError(const absl::Status& status);

bool IsNotFound(const absl::Status& status);
bool IsAlreadyExists(const absl::Status& status);
bool IsConflict(const absl::Status& status);  // 409 other than AlreadyExists
bool IsGone(const absl::Status& status);      // 410, including an in-stream ERROR with code 410
bool IsInvalid(const absl::Status& status);   // 422

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_API_ERROR_H_
