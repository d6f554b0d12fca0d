// JSON helpers of the API server double: request bodies (JSON or YAML), the patch formats
// kube-apiserver accepts, and dotted field paths (".spec.workers.replicas").
//
// Patch formats:
//   application/merge-patch+json           RFC 7386 JSON merge patch
//   application/json-patch+json            RFC 6902 JSON patch
//   application/strategic-merge-patch+json applied as a JSON merge patch: the double does not
//                                          know Go struct patch strategies, so lists are
//                                          replaced, never merged by key, and $patch directives
//                                          are not interpreted
//   application/apply-patch+yaml           server-side apply (managed_fields.h); body YAML or JSON
//
// Thread-safety: free functions without shared state. Errors are API errors (api_status.h).
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_JSON_UTIL_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_JSON_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace hptrain::testing {

enum class PatchType { kMerge, kJson, kStrategicMerge, kApply };

// The patch type of a PATCH request's Content-Type (parameters after ';' ignored). Errors: 415
// UnsupportedMediaType.
absl::StatusOr<PatchType> PatchTypeFromContentType(absl::string_view content_type);

// Parses a request body: YAML when the content type says yaml (apply patches, application/yaml),
// JSON otherwise. Errors: 400 BadRequest with the parser's message.
absl::StatusOr<nlohmann::json> ParseBody(absl::string_view body, absl::string_view content_type);

// YAML text (one document) to JSON. Plain scalars become null/bool/int/float when they read as
// such (YAML 1.2 core schema), quoted scalars stay strings. Errors: 400 BadRequest.
absl::StatusOr<nlohmann::json> YamlToJson(absl::string_view text);
// Every document of a YAML stream ("---" separated), converted as YamlToJson does; empty
// documents are skipped. Errors: 400 BadRequest.
absl::StatusOr<std::vector<nlohmann::json>> YamlDocumentsToJson(absl::string_view text);

// RFC 7386 merge patch of `target`. A non-object patch replaces the target. Never fails.
nlohmann::json ApplyMergePatch(const nlohmann::json& target, const nlohmann::json& patch);

// RFC 6902 JSON patch (add, remove, replace, move, copy, test). Errors: 422 Invalid with the
// failing operation in the message, as kube-apiserver answers a patch it cannot apply; 400
// BadRequest when `patch` is not an array of operations.
absl::StatusOr<nlohmann::json> ApplyJsonPatch(const nlohmann::json& target,
                                              const nlohmann::json& patch);

// Deep merge for server-side apply: objects merge key by key, everything else (arrays included)
// is replaced by `config`'s value.
nlohmann::json DeepMerge(const nlohmann::json& base, const nlohmann::json& config);

// ".spec.workers.replicas" -> {"spec", "workers", "replicas"}. Errors: InvalidArgument for a
// path that does not start with '.', is empty, or indexes an array ("[0]"), which the real
// server cannot resolve either (fixture 22).
absl::StatusOr<std::vector<std::string>> ParseFieldPath(absl::string_view path);

// The value at `path` inside `object`, or nullptr when a key is missing.
const nlohmann::json* FindPath(const nlohmann::json& object, const std::vector<std::string>& path);

// Sets the value at `path`, creating intermediate objects (replacing non-objects on the way).
void SetPath(nlohmann::json* object, const std::vector<std::string>& path, nlohmann::json value);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_JSON_UTIL_H_
