#include "controller/reconcile/object_meta.h"

#include <cmath>

namespace hptrain::reconcile {

const Json* Find(const Json& object, std::initializer_list<absl::string_view> path) {
  const Json* at = &object;
  for (absl::string_view key : path) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(std::string(key));
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

std::string StringAt(const Json& object, std::initializer_list<absl::string_view> path) {
  const Json* value = Find(object, path);
  if (value == nullptr || !value->is_string()) return "";
  return value->get_ref<const std::string&>();
}

int64_t IntAt(const Json& object, std::initializer_list<absl::string_view> path, int64_t fallback) {
  const Json* value = Find(object, path);
  if (value == nullptr) return fallback;
  if (value->is_number_integer()) return value->get<int64_t>();
  if (value->is_number_float()) {
    double v = value->get<double>();
    // Range-checked so that the conversion below is defined.
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e18) {
      return static_cast<int64_t>(v);
    }
  }
  return fallback;
}

std::string Name(const Json& object) { return StringAt(object, {"metadata", "name"}); }
std::string Namespace(const Json& object) { return StringAt(object, {"metadata", "namespace"}); }
std::string Uid(const Json& object) { return StringAt(object, {"metadata", "uid"}); }
std::string ResourceVersion(const Json& object) {
  return StringAt(object, {"metadata", "resourceVersion"});
}

int64_t Generation(const Json& object) { return IntAt(object, {"metadata", "generation"}, 0); }

bool IsTerminating(const Json& object) {
  const Json* value = Find(object, {"metadata", "deletionTimestamp"});
  return value != nullptr && !value->is_null();
}

std::string Label(const Json& object, absl::string_view key) {
  return StringAt(object, {"metadata", "labels", key});
}

std::string Annotation(const Json& object, absl::string_view key) {
  return StringAt(object, {"metadata", "annotations", key});
}

std::string DumpJson(const Json& value, int indent) {
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace hptrain::reconcile
