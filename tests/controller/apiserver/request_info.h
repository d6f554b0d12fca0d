// RequestInfo: what a Kubernetes API request addresses, parsed from method + path the way
// kube-apiserver's RequestInfoFactory does:
//
//   /api/v1/[namespaces/N/]R[/NAME[/SUB]]            core group
//   /apis/G/V/[namespaces/N/]R[/NAME[/SUB]]          named groups
//   /api/v1/namespaces/NAME[/status|/finalize]       the namespace itself
//   /api/v1/watch/...                                 legacy watch prefix
//
// Verbs: GET get | list | watch (watch=1|true or the watch prefix; with a name it watches that
// one object), POST create, PUT update,
// PATCH patch, DELETE delete | deletecollection. Anything else under /api or /apis
// (/version, /api, /apis, /apis/G, /apis/G/V) is a non-resource request.
//
// Thread-safety: free function without shared state.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_REQUEST_INFO_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_REQUEST_INFO_H_

#include <string>
#include <vector>

namespace hptrain::testing {

struct RequestInfo {
  bool resource_request = false;
  std::string verb;  // Kubernetes verb; for non-resource requests the lower-case HTTP method
  std::string group;
  std::string version;
  std::string ns;
  std::string resource;
  std::string name;
  std::string subresource;
  bool malformed = false;          // a resource path with too many segments
  std::vector<std::string> parts;  // path segments
};

// Parses `method` (upper-case HTTP method) and `path` (no query). `watch_param` is the value of
// the watch query parameter ("" when absent).
RequestInfo ParseRequestInfo(const std::string& method, const std::string& path,
                             const std::string& watch_param);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_REQUEST_INFO_H_
