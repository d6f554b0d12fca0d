#include "controller/promql/prometheus_client.h"

#include <fstream>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "controller/promql/number.h"
#include "nlohmann/json.hpp"
#include "runtime/base/status.h"

namespace hptrain::promql {
namespace {

using nlohmann::json;

constexpr size_t kMaxBodyInMessage = 200;

std::string Snippet(absl::string_view body) {
  std::string out = absl::CHexEscape(body.substr(0, kMaxBodyInMessage));
  if (body.size() > kMaxBodyInMessage) absl::StrAppend(&out, "...");
  return out;
}

absl::Status BadShape(absl::string_view path, absl::string_view what) {
  return absl::InternalError(absl::StrCat("prometheus: bad response: ", path, ": ", what));
}

// The member `key` of `object`, or null when `object` is not an object or lacks it.
const json* Member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// [<unix seconds>, "<value>"], the pair of a vector element and of a scalar.
absl::Status DecodeValuePair(const json& pair, const std::string& path, Sample* sample) {
  if (!pair.is_array() || pair.size() != 2) return BadShape(path, "not a [time, value] pair");
  if (!pair[0].is_number()) return BadShape(path + "[0]", "not a number");
  if (!pair[1].is_string()) return BadShape(path + "[1]", "not a string");
  const std::string& text = pair[1].get_ref<const std::string&>();
  if (!ParseFloatValue(text, &sample->value)) {
    return BadShape(path + "[1]", absl::StrCat("not a float: \"", absl::CHexEscape(text), "\""));
  }
  sample->timestamp_seconds = pair[0].get<double>();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Sample>> DecodeVector(const json& result) {
  if (!result.is_array()) return BadShape("data.result", "not an array");
  std::vector<Sample> samples;
  samples.reserve(result.size());
  for (size_t i = 0; i < result.size(); ++i) {
    std::string path = absl::StrCat("data.result[", i, "]");
    const json* metric = Member(result[i], "metric");
    if (metric == nullptr || !metric->is_object()) {
      return BadShape(path, "no \"metric\" object");
    }
    Sample sample;
    for (auto it = metric->begin(); it != metric->end(); ++it) {
      if (!it->is_string())
        return BadShape(absl::StrCat(path, ".metric.", it.key()), "not a string");
      sample.labels.emplace(it.key(), it->get<std::string>());
    }
    const json* pair = Member(result[i], "value");
    if (pair == nullptr) {
      if (Member(result[i], "histogram") != nullptr) {
        return BadShape(path, "a native histogram sample, which this client does not read");
      }
      return BadShape(path, "no \"value\"");
    }
    HPTRAIN_RETURN_IF_ERROR(DecodeValuePair(*pair, path + ".value", &sample));
    samples.push_back(std::move(sample));
  }
  return samples;
}

// The "data" of a success envelope, as samples.
absl::StatusOr<std::vector<Sample>> DecodeData(const json& body) {
  const json* status = Member(body, "status");
  if (status == nullptr || *status != "success") {
    return BadShape("status", "not \"success\"");
  }
  const json* data = Member(body, "data");
  if (data == nullptr || !data->is_object()) return BadShape("data", "not an object");
  const json* type = Member(*data, "resultType");
  if (type == nullptr || !type->is_string()) return BadShape("data.resultType", "not a string");
  const json* result = Member(*data, "result");
  if (result == nullptr) return BadShape("data.result", "missing");
  const std::string& kind = type->get_ref<const std::string&>();
  if (kind == "vector") return DecodeVector(*result);
  if (kind == "scalar") {
    Sample sample;
    HPTRAIN_RETURN_IF_ERROR(DecodeValuePair(*result, "data.result", &sample));
    return std::vector<Sample>{std::move(sample)};
  }
  if (kind == "matrix" || kind == "string") {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an instant vector, got resultType \"", kind, "\""));
  }
  return BadShape("data.resultType", absl::StrCat("unknown \"", absl::CHexEscape(kind), "\""));
}

// A {"status":"error",...} body as a status with `code`; OK when `body` is not one.
absl::Status ErrorBody(const json& body, absl::StatusCode code) {
  const json* status = Member(body, "status");
  if (status == nullptr || *status != "error") return absl::OkStatus();
  const json* type = Member(body, "errorType");
  const json* error = Member(body, "error");
  std::string type_text = type != nullptr && type->is_string() ? type->get<std::string>() : "?";
  std::string error_text = error != nullptr && error->is_string() ? error->get<std::string>() : "?";
  return absl::Status(code, absl::StrCat("prometheus: ", type_text, ": ", error_text));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PrometheusClient>> PrometheusClient::Create(
    PrometheusOptions options) {
  absl::StatusOr<HttpUrl> server = ParseHttpUrl(options.url, /*allow_query=*/false);
  if (!server.ok()) return Annotate(server.status(), "prometheus");
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("prometheus: timeout must be positive, got ",
                                                   absl::FormatDuration(options.timeout)));
  }
  if (!options.ca_file.empty() && !std::ifstream(options.ca_file).good()) {
    return absl::InvalidArgumentError(
        absl::StrCat("prometheus: cannot read ca_file \"", options.ca_file, "\""));
  }
  return std::unique_ptr<PrometheusClient>(
      new PrometheusClient(std::move(options), *std::move(server)));
}

PrometheusClient::PrometheusClient(PrometheusOptions options, HttpUrl server)
    : options_(std::move(options)), server_(std::move(server)) {}

absl::StatusOr<std::vector<Sample>> PrometheusClient::Query(const std::string& expr) const {
  HttpGetRequest request;
  request.target = absl::StrCat(server_.path, "/api/v1/query?query=", EncodeQueryComponent(expr));
  request.headers.emplace_back("Accept", "application/json");
  request.headers.emplace_back("User-Agent", "hptrain-controller");
  if (!options_.bearer_token.empty()) {
    request.headers.emplace_back("Authorization", absl::StrCat("Bearer ", options_.bearer_token));
  }
  request.timeout = options_.timeout;
  request.ca_file = options_.ca_file;
  request.insecure_skip_tls_verify = options_.insecure_skip_tls_verify;
  HPTRAIN_ASSIGN_OR_RETURN(HttpGetResponse response, HttpGet(server_, request));

  // nlohmann's parse with allow_exceptions=false does not throw; the lookups below only use
  // find / is_* / get on checked types, so nothing throws either; the catch is a backstop so
  // that no exception leaves this module.
  try {
    json body = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
    bool success = response.status >= 200 && response.status < 300;
    if (!success) {
      absl::StatusCode code = response.status == 400 || response.status == 422
                                  ? absl::StatusCode::kInvalidArgument
                                  : absl::StatusCode::kUnavailable;
      absl::Status error = ErrorBody(body, code);
      if (!error.ok()) return error;
      return absl::Status(
          code, absl::StrCat("prometheus: HTTP ", response.status, ": ", Snippet(response.body)));
    }
    if (body.is_discarded()) {
      return absl::InternalError(
          absl::StrCat("prometheus: bad response: not JSON: ", Snippet(response.body)));
    }
    HPTRAIN_RETURN_IF_ERROR(ErrorBody(body, absl::StatusCode::kUnavailable));
    return DecodeData(body);
  } catch (const json::exception& e) {
    return absl::InternalError(absl::StrCat("prometheus: bad response: ", e.what()));
  }
}

}  // namespace hptrain::promql
