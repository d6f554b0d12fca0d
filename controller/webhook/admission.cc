#include "controller/webhook/admission.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/reconcile/parsed_job.h"

namespace hptrain::webhook {
namespace {

using Json = nlohmann::json;

constexpr char kApiVersion[] = "admission.k8s.io/v1";
constexpr char kKind[] = "AdmissionReview";

Json Answer(const std::string& uid, bool allowed) {
  return Json{{"apiVersion", kApiVersion},
              {"kind", kKind},
              {"response", {{"uid", uid}, {"allowed", allowed}}}};
}

// "spec.workerGroups[1].batchSize: must ..." -> "spec.workerGroups[1].batchSize".
std::string FieldOf(const std::string& message) {
  size_t colon = message.find(": ");
  return colon == std::string::npos ? "" : message.substr(0, colon);
}

// A name the object will get: generateName objects have none yet, and the name's own rules
// (length, DNS label) are then checked on the prefix plus the five characters the API server
// appends.
Json WithName(Json object) {
  if (!object.is_object() || !object["metadata"].is_object()) return object;
  Json& meta = object["metadata"];
  if (meta.value("name", "").empty() && meta.contains("generateName") &&
      meta["generateName"].is_string()) {
    meta["name"] = meta["generateName"].get<std::string>() + "xxxxx";
  }
  return object;
}

std::vector<std::string> Warnings(const reconcile::ParsedJob& job) {
  std::vector<std::string> warnings;
  if (!job.spec.checkpoint.path.empty() && job.spec.checkpoint.volume_yaml.empty()) {
    warnings.push_back(
        "spec.checkpoint.volume is not set: the checkpoint stays in the pod that wrote it, so a "
        "gang restart starts training over from step 0");
  }
  return warnings;
}

}  // namespace

absl::StatusOr<Json> ReviewTrainingJob(const Json& review) {
  if (!review.is_object() || review.value("apiVersion", "") != kApiVersion ||
      review.value("kind", "") != kKind) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an ", kKind, " of ", kApiVersion));
  }
  const Json* request = review.contains("request") ? &review["request"] : nullptr;
  if (request == nullptr || !request->is_object() || !(*request)["uid"].is_string() ||
      (*request)["uid"].get<std::string>().empty()) {
    return absl::InvalidArgumentError("the AdmissionReview has no request.uid");
  }
  const std::string uid = (*request)["uid"];
  const std::string operation = request->value("operation", "");
  if (operation != "CREATE" && operation != "UPDATE") return Answer(uid, true);

  const Json object = request->contains("object") ? (*request)["object"] : Json();
  if (!object.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("the ", operation, " request has no object"));
  }
  if (operation == "UPDATE") {
    const Json old = request->contains("oldObject") ? (*request)["oldObject"] : Json();
    if (old.is_object() && old.value("spec", Json()) == object.value("spec", Json())) {
      return Answer(uid, true);
    }
  }
  Json answer = Answer(uid, true);
  absl::StatusOr<reconcile::ParsedJob> parsed = reconcile::ParseTrainingJob(WithName(object));
  if (!parsed.ok()) {
    const std::string message(parsed.status().message());
    Json& response = answer["response"];
    response["allowed"] = false;
    response["status"] = {
        {"status", "Failure"},
        {"code", 422},
        {"reason", "Invalid"},
        {"message", message},
        {"details",
         {{"name", object.value("metadata", Json::object()).value("name", "")},
          {"group", "hptrain.io"},
          {"kind", "TrainingJob"},
          {"causes",
           Json::array({{{"reason", "FieldValueInvalid"},
                         {"field", FieldOf(message)},
                         {"message", message}}})}}}};
    return answer;
  }
  std::vector<std::string> warnings = Warnings(*parsed);
  if (!warnings.empty()) answer["response"]["warnings"] = warnings;
  return answer;
}

}  // namespace hptrain::webhook
