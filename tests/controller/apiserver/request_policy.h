// RequestPolicy: what the API server double does to a request before serving it, and what it
// remembers afterwards.
//
//  - Authentication: bearer tokens mapped to user names. With no token configured every request
//    is accepted as user "system:admin"; otherwise a missing or unknown token is 401 (fixture 40).
//  - Authorization: an optional hook (user, verb, group, resource, subresource, namespace, name)
//    -> allow/deny; a denial is 403 with the real server's message (fixture 42) and is kept in a
//    list of denials, so a test can tell a missing RBAC grant from other 403s. rbac.h builds
//    hooks from RBAC rules.
//  - Fault injection: the next N requests matching verb/resource/namespace fail with a given
//    HTTP code (Status body with the matching reason), optionally after a delay; a fault with
//    code 0 only delays.
//  - Request log: method, path, query, verb, resource, namespace, name, user and response code
//    of every request, with counts by verb and resource ("no duplicate create" assertions).
//
// Resource names in faults and counts: "" (any), "pods" (the resource itself, no subresource),
// "pods/status" (that subresource), "pods/*" (the resource and all its subresources).
//
// Thread-safety: all methods are thread-safe.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_REQUEST_POLICY_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_REQUEST_POLICY_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hptrain::testing {

// The attributes an authorizer decides on (Kubernetes SubjectAccessReview attributes).
struct RequestAttributes {
  std::string user;
  std::string verb;  // get, list, watch, create, update, patch, delete, deletecollection
  std::string group;
  std::string resource;
  std::string subresource;
  std::string ns;
  std::string name;
  bool resource_request = true;
  std::string path;  // for non-resource requests (/version, /apis, ...)
};
// True allows the request.
using Authorizer = std::function<bool(const RequestAttributes&)>;

struct Fault {
  std::string verb;      // "" = any verb
  std::string resource;  // see the header comment; "" = any
  std::string ns;        // "" = any namespace
  int times = 1;         // matching requests to fail; -1 = all of them
  int code = 500;        // HTTP status to answer; 0 = answer normally (latency only)
  absl::Duration latency = absl::ZeroDuration();  // added before answering
  std::string message;                            // Status message; empty = a generic one
};

struct RequestRecord {
  std::string method;
  std::string path;
  std::string query;  // raw query string, without '?'
  std::string verb;
  std::string group;
  std::string resource;
  std::string subresource;
  std::string ns;
  std::string name;
  std::string user;
  int status = 0;
};

class RequestPolicy {
 public:
  // Accepts bearer `token` as `user`. Once a token is added, requests need one.
  void AddToken(const std::string& token, const std::string& user);
  // The user behind an Authorization header value. Errors: 401 Unauthorized API error.
  absl::StatusOr<std::string> Authenticate(const std::string& authorization) const;

  // Replaces the authorizer; an empty function allows everything (the default).
  void SetAuthorizer(Authorizer authorizer);
  // Errors: 403 Forbidden API error when the authorizer denies (the request is then added to
  // Denials()).
  absl::Status Authorize(const RequestAttributes& attributes);
  // The requests the authorizer denied, oldest first.
  std::vector<RequestAttributes> Denials() const;

  void InjectFault(Fault fault);
  void ClearFaults();
  // The first fault matching the request, consuming one of its `times`; nullopt when none.
  std::optional<Fault> TakeFault(const std::string& verb, const std::string& resource,
                                 const std::string& subresource, const std::string& ns);

  // A request is begun before it is served and recorded once its response is written, so a
  // reader never sees a write's effect without its log entry: Log() and Count() first wait (up
  // to 5 s) until every begun request is recorded. A watch is recorded when its stream opens.
  void Begin();
  void Record(RequestRecord record);
  std::vector<RequestRecord> Log() const;
  void ClearLog();
  // Logged requests with `verb` ("" = any) on `resource` (matching as described above).
  int Count(const std::string& verb, const std::string& resource) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> tokens_ ABSL_GUARDED_BY(mu_);
  Authorizer authorizer_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestAttributes> denials_ ABSL_GUARDED_BY(mu_);
  std::vector<Fault> faults_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestRecord> log_ ABSL_GUARDED_BY(mu_);
  int unrecorded_ ABSL_GUARDED_BY(mu_) = 0;  // begun, not yet recorded

  void AwaitRecordedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

// True when `pattern` ("", "pods", "pods/status", "pods/*") covers resource/subresource.
bool ResourceMatches(const std::string& pattern, const std::string& resource,
                     const std::string& subresource);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_REQUEST_POLICY_H_
