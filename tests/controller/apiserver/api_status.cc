#include "tests/controller/apiserver/api_status.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/kube/api_error.h"
#include "tests/controller/apiserver/resource_type.h"

namespace hptrain::testing {
namespace {

// Status details for an object: {name, group (omitted when empty), kind}.
nlohmann::json ObjectDetails(absl::string_view name, absl::string_view group,
                             absl::string_view kind) {
  nlohmann::json details = nlohmann::json::object();
  if (!name.empty()) details["name"] = std::string(name);
  if (!group.empty()) details["group"] = std::string(group);
  details["kind"] = std::string(kind);
  return details;
}

std::string ReasonForCode(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "InternalError";
  }
}

}  // namespace

absl::Status ApiError(const nlohmann::json& body) {
  int code = body.value("code", 500);
  std::string reason = body.value("reason", "");
  // The same HTTP -> absl mapping the client applies to the same response.
  absl::Status status(kube::CodeForHttpStatus(code, reason), body.value("message", reason));
  status.SetPayload(kStatusPayloadUrl, absl::Cord(body.dump()));
  return status;
}

nlohmann::json FailureBody(int code, absl::string_view reason, absl::string_view message,
                           const nlohmann::json& details) {
  nlohmann::json body = {{"kind", "Status"},
                         {"apiVersion", "v1"},
                         {"metadata", nlohmann::json::object()},
                         {"status", "Failure"},
                         {"message", std::string(message)},
                         {"reason", std::string(reason)}};
  if (!details.is_null()) body["details"] = details;
  body["code"] = code;
  return body;
}

nlohmann::json StatusBody(const absl::Status& status) {
  if (status.ok()) {
    return {{"kind", "Status"},
            {"apiVersion", "v1"},
            {"metadata", nlohmann::json::object()},
            {"status", "Success"},
            {"code", 200}};
  }
  auto payload = status.GetPayload(kStatusPayloadUrl);  // absl::optional<absl::Cord>
  if (payload.has_value()) {
    nlohmann::json body = nlohmann::json::parse(std::string(*payload), nullptr, false);
    if (!body.is_discarded()) return body;
  }
  std::string message = absl::StrCat("Internal error occurred: ", status.message());
  return FailureBody(500, "InternalError", message,
                     {{"causes", {{{"message", std::string(status.message())}}}}});
}

int HttpCode(const absl::Status& status) { return StatusBody(status).value("code", 500); }

absl::Status NotFoundError(const ResourceType& type, absl::string_view name) {
  return ApiError(FailureBody(404, "NotFound",
                              absl::StrCat(type.Qualified(), " \"", name, "\" not found"),
                              ObjectDetails(name, type.group, type.plural)));
}

absl::Status AlreadyExistsError(const ResourceType& type, absl::string_view name) {
  return ApiError(FailureBody(409, "AlreadyExists",
                              absl::StrCat(type.Qualified(), " \"", name, "\" already exists"),
                              ObjectDetails(name, type.group, type.plural)));
}

absl::Status ConflictError(const ResourceType& type, absl::string_view name,
                           absl::string_view why) {
  return ApiError(FailureBody(
      409, "Conflict",
      absl::StrCat("Operation cannot be fulfilled on ", type.Qualified(), " \"", name, "\": ", why),
      ObjectDetails(name, type.group, type.plural)));
}

absl::Status StaleResourceVersionError(const ResourceType& type, absl::string_view name) {
  return ConflictError(type, name,
                       "the object has been modified; please apply your changes to the latest "
                       "version and try again");
}

absl::Status InvalidError(const ResourceType& type, absl::string_view name,
                          const std::vector<Cause>& causes) {
  std::vector<std::string> parts;
  nlohmann::json cause_list = nlohmann::json::array();
  for (const Cause& cause : causes) {
    parts.push_back(cause.field.empty() ? cause.message
                                        : absl::StrCat(cause.field, ": ", cause.message));
    nlohmann::json entry = nlohmann::json::object();
    if (!cause.reason.empty()) entry["reason"] = cause.reason;
    entry["message"] = cause.message;
    if (!cause.field.empty()) entry["field"] = cause.field;
    cause_list.push_back(entry);
  }
  std::string joined =
      parts.size() == 1 ? parts[0] : absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  nlohmann::json details = ObjectDetails(name, type.group, type.kind);
  details["causes"] = cause_list;
  return ApiError(
      FailureBody(422, "Invalid",
                  absl::StrCat(type.GroupKind(), " \"", name, "\" is invalid: ", joined), details));
}

absl::Status BadRequestError(absl::string_view message) {
  return ApiError(FailureBody(400, "BadRequest", message));
}

absl::Status MethodNotAllowedError() {
  return ApiError(FailureBody(405, "MethodNotAllowed",
                              "the server does not allow this method on the requested resource",
                              nlohmann::json::object()));
}

absl::Status UnknownPathError() {
  return ApiError(FailureBody(404, "NotFound", "the server could not find the requested resource",
                              nlohmann::json::object()));
}

absl::Status UnsupportedMediaTypeError(absl::string_view content_type) {
  return ApiError(
      FailureBody(415, "UnsupportedMediaType",
                  absl::StrCat("the body of the request was in an unknown format (", content_type,
                               ") - accepted media types include: application/json-patch+json, "
                               "application/merge-patch+json, application/apply-patch+yaml, "
                               "application/strategic-merge-patch+json")));
}

absl::Status InternalApiError(absl::string_view message) {
  return ApiError(FailureBody(500, "InternalError",
                              absl::StrCat("Internal error occurred: ", message),
                              {{"causes", {{{"message", std::string(message)}}}}}));
}

absl::Status ExpiredError(absl::string_view message) {
  return ApiError(FailureBody(410, "Expired", message));
}

absl::Status UnauthorizedError() {
  return ApiError(FailureBody(401, "Unauthorized", "Unauthorized"));
}

absl::Status ForbiddenError(absl::string_view user, absl::string_view verb, absl::string_view group,
                            absl::string_view resource, absl::string_view subresource,
                            absl::string_view ns, absl::string_view name) {
  std::string full =
      subresource.empty() ? std::string(resource) : absl::StrCat(resource, "/", subresource);
  std::string qualified =
      group.empty() ? std::string(resource) : absl::StrCat(resource, ".", group);
  std::string subject = name.empty() ? qualified : absl::StrCat(qualified, " \"", name, "\"");
  std::string scope =
      ns.empty() ? "at the cluster scope" : absl::StrCat("in the namespace \"", ns, "\"");
  std::string message =
      absl::StrCat(subject, " is forbidden: User \"", user, "\" cannot ", verb, " resource \"",
                   full, "\" in API group \"", group, "\" ", scope);
  nlohmann::json details = ObjectDetails(name, group, resource);
  return ApiError(FailureBody(403, "Forbidden", message, details));
}

absl::Status ErrorForCode(int code, absl::string_view message) {
  return ApiError(FailureBody(code, ReasonForCode(code), message));
}

}  // namespace hptrain::testing
