// Query: builds the query string of an API request in the order parameters are added.
//
//   Query q;
//   q.Add("labelSelector", "hptrain.io/job=resnet");
//   q.Add("limit", 500);
//   path + q.Encoded()   // "?labelSelector=hptrain.io/job%3Dresnet&limit=500"
//
// Values are percent-encoded except for unreserved characters (RFC 3986) and '/', which the API
// server accepts as is and which keeps label keys such as "hptrain.io/job" readable in logs.
// Not thread-safe (a value type).
#ifndef HPTRAIN_CONTROLLER_KUBE_QUERY_H_
#define HPTRAIN_CONTROLLER_KUBE_QUERY_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace hptrain::kube {

// Percent-encodes `value` for a query string (see above).
std::string EncodeQueryValue(absl::string_view value);

class Query {
 public:
  Query& Add(absl::string_view key, absl::string_view value);
  Query& Add(absl::string_view key, int64_t value);
  // Adds the pair only when `value` is not empty.
  Query& AddIfSet(absl::string_view key, absl::string_view value);

  bool empty() const { return params_.empty(); }

  // "" when empty, otherwise "?k=v&k2=v2".
  std::string Encoded() const;

 private:
  std::vector<std::pair<std::string, std::string>> params_;
};

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_QUERY_H_
