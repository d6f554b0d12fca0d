// API errors of the Kubernetes API server double, shaped exactly like kube-apiserver's
// metav1.Status bodies (see tests/fixtures/kube: 09, 10, 13, 18, 22, 24, 38, 40, 42).
//
// Inside the double every operation returns absl::Status / absl::StatusOr. An API error is an
// absl::Status whose payload (type URL kStatusPayloadUrl) holds the serialized Status body; the
// HTTP front end sends that body with the body's `code` as the HTTP status. The absl code is the
// closest match (404 NotFound, 409 Aborted or AlreadyExists, 422 InvalidArgument, ...), so the
// in-process API can be used with ordinary absl checks as well.
//
// Thread-safety: free functions without shared state.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_API_STATUS_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_API_STATUS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace hptrain::testing {

struct ResourceType;

inline constexpr absl::string_view kStatusPayloadUrl = "k8s.io/apimachinery/metav1.Status";

// One entry of details.causes (metav1.StatusCause).
struct Cause {
  std::string reason;   // "FieldValueInvalid", "FieldValueRequired", ...; may be empty
  std::string message;  // "Invalid value: -1: ..."
  std::string field;    // "spec.workerGroups[0].replicas"; may be empty
};

// Builds an error from a complete Status body; `body["code"]` is the HTTP status.
absl::Status ApiError(const nlohmann::json& body);

// A Status body {kind, apiVersion, metadata, status: Failure, message, reason, [details], code}.
// `details` is omitted when null.
nlohmann::json FailureBody(int code, absl::string_view reason, absl::string_view message,
                           const nlohmann::json& details = nullptr);

// The Status body carried by `status`; for a status without one (a plain absl error raised
// inside the double) an InternalError body with the status message. OK gives a Success body.
nlohmann::json StatusBody(const absl::Status& status);
// The HTTP code of StatusBody(status).
int HttpCode(const absl::Status& status);

// 404 `<plural>.<group> "name" not found`, details {name, group, kind: plural}.
absl::Status NotFoundError(const ResourceType& type, absl::string_view name);
// 409 AlreadyExists `<plural>.<group> "name" already exists`.
absl::Status AlreadyExistsError(const ResourceType& type, absl::string_view name);
// 409 Conflict `Operation cannot be fulfilled on <plural>.<group> "name": <why>`.
absl::Status ConflictError(const ResourceType& type, absl::string_view name, absl::string_view why);
// The standard optimistic-concurrency conflict (fixtures 18, 35).
absl::Status StaleResourceVersionError(const ResourceType& type, absl::string_view name);
// 422 Invalid `<Kind>[.<group>] "name" is invalid: <field: message, ...>` with details.causes
// (fixture 09).
absl::Status InvalidError(const ResourceType& type, absl::string_view name,
                          const std::vector<Cause>& causes);
// 400 BadRequest with `message`.
absl::Status BadRequestError(absl::string_view message);
// 405 MethodNotAllowed "the server does not allow this method on the requested resource".
absl::Status MethodNotAllowedError();
// 404 NotFound "the server could not find the requested resource" (unknown path).
absl::Status UnknownPathError();
// 415 UnsupportedMediaType for a PATCH content type the server does not know.
absl::Status UnsupportedMediaTypeError(absl::string_view content_type);
// 500 InternalError "Internal error occurred: <message>" with details.causes [{message}] (22).
absl::Status InternalApiError(absl::string_view message);
// 410 Expired with `message` (watch from a compacted resourceVersion, stale continue token).
absl::Status ExpiredError(absl::string_view message);
// 401 Unauthorized (fixture 40).
absl::Status UnauthorizedError();
// 403 Forbidden `<resource> ["name"] is forbidden: User "u" cannot <verb> resource "<resource>"
// in API group "<group>" in the namespace "ns"` (fixture 42).
absl::Status ForbiddenError(absl::string_view user, absl::string_view verb, absl::string_view group,
                            absl::string_view resource, absl::string_view subresource,
                            absl::string_view ns, absl::string_view name);
// A failure with an arbitrary HTTP `code` (fault injection); the reason is the one
// kube-apiserver uses for that code ("InternalError", "ServiceUnavailable", "TooManyRequests",
// ...).
absl::Status ErrorForCode(int code, absl::string_view message);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_API_STATUS_H_
