#include "tests/controller/apiserver/admission_webhook.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "tests/controller/apiserver/api_status.h"

namespace hptrain::testing {
namespace {

std::atomic<int64_t> next_uid{1};

}  // namespace

Admission AdmissionWebhook(AdmissionWebhookConfig config) {
  return [config = std::move(config)](const nlohmann::json& object,
                                      const nlohmann::json& old) -> absl::Status {
    const bool create = old.is_null() || (old.is_object() && old.empty());
    nlohmann::json request = {
        {"uid", absl::StrCat("00000000-0000-0000-0000-", next_uid++)},
        {"kind", {{"group", "hptrain.io"}, {"version", "v1alpha1"}, {"kind", "TrainingJob"}}},
        {"resource",
         {{"group", "hptrain.io"}, {"version", "v1alpha1"}, {"resource", "trainingjobs"}}},
        {"name", object["metadata"].value("name", "")},
        {"namespace", object["metadata"].value("namespace", "")},
        {"operation", create ? "CREATE" : "UPDATE"},
        {"object", object}};
    if (!create) request["oldObject"] = old;
    const nlohmann::json review = {{"apiVersion", "admission.k8s.io/v1"},
                                   {"kind", "AdmissionReview"},
                                   {"request", request}};
    const std::string url =
        absl::StrCat("https://", config.host, ":", config.port, config.path);
    auto failed = [&](const std::string& why) -> absl::Status {
      if (config.failure_policy == "Ignore") return absl::OkStatus();
      return InternalApiError(absl::StrCat("failed calling webhook \"", config.name,
                                           "\": failed to call webhook: Post \"", url,
                                           "\": ", why));
    };

    httplib::SSLClient client(config.host, config.port);
    client.set_ca_cert_path(config.ca_file.c_str());
    client.enable_server_certificate_verification(true);
    const int64_t micros = absl::ToInt64Microseconds(config.timeout);
    client.set_connection_timeout(micros / 1000000, micros % 1000000);
    client.set_read_timeout(micros / 1000000, micros % 1000000);
    httplib::Result result = client.Post(config.path, review.dump(), "application/json");
    if (!result) return failed(httplib::to_string(result.error()));
    if (result->status != 200) return failed(absl::StrCat("HTTP ", result->status));
    nlohmann::json answer = nlohmann::json::parse(result->body, nullptr, false);
    if (!answer.is_object() || !answer["response"].is_object() ||
        answer["response"].value("uid", "") != request["uid"]) {
      return failed("the webhook's answer is not an AdmissionReview for this request");
    }
    const nlohmann::json& response = answer["response"];
    if (response.value("allowed", false)) return absl::OkStatus();
    nlohmann::json status = response.value("status", nlohmann::json::object());
    const int code = std::max(400, status.value("code", 400));
    const std::string message =
        absl::StrCat("admission webhook \"", config.name, "\" denied the request: ",
                     status.value("message", "without explanation"));
    return ApiError(FailureBody(code, status.value("reason", ""), message,
                                status.contains("details") ? status["details"] : nullptr));
  };
}

}  // namespace hptrain::testing
