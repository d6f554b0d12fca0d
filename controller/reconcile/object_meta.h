// Read-only accessors for Kubernetes objects held as nlohmann::json (a TrainingJob, a Pod, ...).
//
// The reconciler sees objects exactly as the API server or the informer cache returns them, and a
// user may put anything the CRD schema lets through in a pod template. These helpers therefore
// never throw and never assume a type: a missing key, a null or a value of the wrong type reads
// as "absent" ("" for strings, the given default for numbers, nullptr for lookups).
//
// All functions are pure and thread-safe; returned pointers point into the argument and live as
// long as it does.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_OBJECT_META_H_
#define HPTRAIN_CONTROLLER_RECONCILE_OBJECT_META_H_

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/string_view.h"

namespace hptrain::reconcile {

using Json = nlohmann::json;

// The value at `path` (object keys, outermost first), or nullptr when a key is missing or a value
// on the way is not an object. Find(obj, {}) is &obj.
const Json* Find(const Json& object, std::initializer_list<absl::string_view> path);

// The string at `path`, or "" when absent or not a string.
std::string StringAt(const Json& object, std::initializer_list<absl::string_view> path);

// The integer at `path`, or `fallback` when absent or not an integer (a float with an integral
// value counts as an integer: JSON does not tell 2 from 2.0 reliably).
int64_t IntAt(const Json& object, std::initializer_list<absl::string_view> path,
              int64_t fallback = 0);

// metadata.name / namespace / uid / resourceVersion; "" when absent.
std::string Name(const Json& object);
std::string Namespace(const Json& object);
std::string Uid(const Json& object);
std::string ResourceVersion(const Json& object);

// metadata.generation; 0 when absent.
int64_t Generation(const Json& object);

// True when metadata.deletionTimestamp is set: the object is being deleted (it still exists, and
// its name stays taken, until its finalizers and grace period are done).
bool IsTerminating(const Json& object);

// metadata.labels[key] / metadata.annotations[key]; "" when absent.
std::string Label(const Json& object, absl::string_view key);
std::string Annotation(const Json& object, absl::string_view key);

// Serializes without throwing: invalid UTF-8 is replaced rather than rejected. `indent` as in
// nlohmann::json::dump (-1: compact).
std::string DumpJson(const Json& value, int indent = -1);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_OBJECT_META_H_
