#include "controller/kube/api_error.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace hptrain::kube {
namespace {

constexpr char kPayloadUrl[] = "type.hptrain.io/hptrain.kube.ApiError";
constexpr size_t kMaxPlainMessage = 200;

std::string StringField(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

int IntField(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return 0;
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return 0;
  return it->get<int>();
}

// Messages must stay on one line: log lines and condition messages are built from them.
std::string OneLine(absl::string_view text, size_t max_size) {
  std::string out;
  out.reserve(std::min(text.size(), max_size));
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    if (c == ' ' && (space || out.empty())) continue;
    space = c == ' ';
    out.push_back(c);
    if (out.size() >= max_size) {
      out += "...";
      break;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

ApiError DecodeStatusObject(const nlohmann::json& status, int fallback_code) {
  ApiError error;
  error.code = IntField(status, "code");
  if (error.code == 0) error.code = fallback_code;
  error.reason = StringField(status, "reason");
  error.message = StringField(status, "message");
  auto details = status.is_object() ? status.find("details") : status.end();
  if (status.is_object() && details != status.end() && details->is_object()) {
    error.group = StringField(*details, "group");
    error.kind = StringField(*details, "kind");
    error.name = StringField(*details, "name");
    error.retry_after_seconds = IntField(*details, "retryAfterSeconds");
    auto causes = details->find("causes");
    if (causes != details->end() && causes->is_array()) {
      for (const nlohmann::json& cause : *causes) {
        error.causes.push_back({StringField(cause, "reason"), StringField(cause, "message"),
                                StringField(cause, "field")});
      }
    }
  }
  return error;
}

nlohmann::json EncodePayload(const ApiError& error) {
  nlohmann::json causes = nlohmann::json::array();
  for (const StatusCause& cause : error.causes) {
    causes.push_back(
        {{"reason", cause.reason}, {"message", cause.message}, {"field", cause.field}});
  }
  return {{"code", error.code},
          {"reason", error.reason},
          {"message", error.message},
          {"details",
           {{"group", error.group},
            {"kind", error.kind},
            {"name", error.name},
            {"retryAfterSeconds", error.retry_after_seconds},
            {"causes", std::move(causes)}}}};
}

// Codes decided by the payload when there is one, by the absl code otherwise.
bool HasHttpCode(const absl::Status& status, int http, absl::StatusCode fallback) {
  if (status.ok()) return false;
  std::optional<ApiError> error = GetApiError(status);
  if (error.has_value()) return error->code == http;
  return status.code() == fallback;
}

}  // namespace

absl::StatusCode CodeForHttpStatus(int http_status, absl::string_view reason) {
  switch (http_status) {
    case 400:
    case 413:
    case 415:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 405:
      return absl::StatusCode::kUnimplemented;
    case 408:
      return absl::StatusCode::kDeadlineExceeded;
    case 409:
      return reason == "AlreadyExists" ? absl::StatusCode::kAlreadyExists
                                       : absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kFailedPrecondition;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 500:
      return absl::StatusCode::kInternal;
    default:
      break;
  }
  if (http_status >= 500) return absl::StatusCode::kUnavailable;
  if (http_status >= 400) return absl::StatusCode::kFailedPrecondition;
  return absl::StatusCode::kUnknown;
}

absl::Status ToStatus(const ApiError& error) {
  std::string message = OneLine(error.message, 4096);
  if (message.empty()) message = absl::StrCat("HTTP ", error.code);
  absl::StrAppend(&message, " (", error.code, error.reason.empty() ? "" : " ", error.reason, ")");
  absl::Status status(CodeForHttpStatus(error.code, error.reason), message);
  status.SetPayload(kPayloadUrl, absl::Cord(EncodePayload(error).dump()));
  return status;
}

absl::Status StatusFromStatusObject(const nlohmann::json& status, int fallback_code) {
  return ToStatus(DecodeStatusObject(status, fallback_code));
}

absl::Status StatusFromResponse(int http_status, absl::string_view body) {
  nlohmann::json parsed = nlohmann::json::parse(body.begin(), body.end(), nullptr,
                                                /*allow_exceptions=*/false);
  if (parsed.is_object() && StringField(parsed, "kind") == "Status") {
    ApiError error = DecodeStatusObject(parsed, http_status);
    error.code = http_status;  // the transport's code wins over a body that disagrees
    return ToStatus(error);
  }
  ApiError error;
  error.code = http_status;
  std::string text = OneLine(body, kMaxPlainMessage);
  error.message = text.empty() ? absl::StrCat("HTTP ", http_status, " with an empty body")
                               : absl::StrCat("HTTP ", http_status, ": ", text);
  return ToStatus(error);
}

std::optional<ApiError> GetApiError(const absl::Status& status) {
  if (status.ok()) return std::nullopt;
  absl::optional<absl::Cord> payload = status.GetPayload(kPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  nlohmann::json encoded =
      nlohmann::json::parse(std::string(*payload), nullptr, /*allow_exceptions=*/false);
  if (!encoded.is_object()) return std::nullopt;
  return DecodeStatusObject(encoded, 0);
}

bool IsNotFound(const absl::Status& status) {
  return HasHttpCode(status, 404, absl::StatusCode::kNotFound);
}

bool IsAlreadyExists(const absl::Status& status) {
  return status.code() == absl::StatusCode::kAlreadyExists;
}

bool IsConflict(const absl::Status& status) {
  return status.code() == absl::StatusCode::kAborted &&
         HasHttpCode(status, 409, absl::StatusCode::kAborted);
}

bool IsGone(const absl::Status& status) {
  return HasHttpCode(status, 410, absl::StatusCode::kFailedPrecondition);
}

bool IsInvalid(const absl::Status& status) {
  return HasHttpCode(status, 422, absl::StatusCode::kInvalidArgument);
}

}  // namespace hptrain::kube
