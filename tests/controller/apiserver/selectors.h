// Label and field selectors of list and watch requests, with kube-apiserver's syntax:
//
//   labelSelector: comma-separated requirements, all of which must hold:
//     key=value, key==value, key!=value, key in (a,b), key notin (a,b), key, !key
//   fieldSelector: comma-separated key=value, key==value, key!=value over the fields a resource
//     allows (metadata.name, metadata.namespace, and e.g. status.phase for pods).
//
// Thread-safety: immutable after Parse; Matches may be called from any thread.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_SELECTORS_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_SELECTORS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace hptrain::testing {

class LabelSelector {
 public:
  // The empty selector (matches everything).
  LabelSelector() = default;
  // Errors: a 400 BadRequest API error (api_status.h) naming the bad requirement.
  static absl::StatusOr<LabelSelector> Parse(absl::string_view text);
  // A metav1.LabelSelector object ({matchLabels, matchExpressions} with operators In, NotIn,
  // Exists, DoesNotExist), as RBAC's aggregationRule and workload specs carry it; what is not an
  // object, and an expression with another operator, adds no requirement.
  static LabelSelector FromObject(const nlohmann::json& selector);

  // True when `labels` (an object of string values, or null) satisfies every requirement.
  bool Matches(const nlohmann::json& labels) const;
  bool empty() const { return requirements_.empty(); }

 private:
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kNotExists };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };
  std::vector<Requirement> requirements_;
};

class FieldSelector {
 public:
  FieldSelector() = default;
  // `allowed` lists the keys accepted besides metadata.name and metadata.namespace. Errors: 400
  // BadRequest for bad syntax or "field label not supported: <key>".
  static absl::StatusOr<FieldSelector> Parse(absl::string_view text,
                                             const std::vector<std::string>& allowed);

  // True when every requirement holds for `object` (a missing field reads as "").
  bool Matches(const nlohmann::json& object) const;
  bool empty() const { return requirements_.empty(); }

 private:
  struct Requirement {
    std::vector<std::string> path;
    bool equals;
    std::string value;
  };
  std::vector<Requirement> requirements_;
};

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_SELECTORS_H_
