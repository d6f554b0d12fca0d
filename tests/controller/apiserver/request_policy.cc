#include "tests/controller/apiserver/request_policy.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/controller/apiserver/api_status.h"

namespace hptrain::testing {

bool ResourceMatches(const std::string& pattern, const std::string& resource,
                     const std::string& subresource) {
  if (pattern.empty()) return true;
  if (absl::EndsWith(pattern, "/*")) return pattern.substr(0, pattern.size() - 2) == resource;
  if (subresource.empty()) return pattern == resource;
  return pattern == absl::StrCat(resource, "/", subresource);
}

void RequestPolicy::AddToken(const std::string& token, const std::string& user) {
  absl::MutexLock lock(&mu_);
  tokens_[token] = user;
}

absl::StatusOr<std::string> RequestPolicy::Authenticate(const std::string& authorization) const {
  absl::MutexLock lock(&mu_);
  if (tokens_.empty()) return std::string("system:admin");
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWith(authorization, kBearer)) return UnauthorizedError();
  auto it = tokens_.find(authorization.substr(kBearer.size()));
  if (it == tokens_.end()) return UnauthorizedError();
  return it->second;
}

void RequestPolicy::SetAuthorizer(Authorizer authorizer) {
  absl::MutexLock lock(&mu_);
  authorizer_ = std::move(authorizer);
}

absl::Status RequestPolicy::Authorize(const RequestAttributes& attributes) {
  Authorizer authorizer;
  {
    absl::MutexLock lock(&mu_);
    authorizer = authorizer_;
  }
  // The authorizer runs outside the lock: it is the test's code and may be slow.
  if (!authorizer || authorizer(attributes)) return absl::OkStatus();
  {
    absl::MutexLock lock(&mu_);
    denials_.push_back(attributes);
  }
  if (!attributes.resource_request) {
    return ApiError(FailureBody(403, "Forbidden",
                                absl::StrCat("forbidden: User \"", attributes.user, "\" cannot ",
                                             attributes.verb, " path \"", attributes.path, "\""),
                                nlohmann::json::object()));
  }
  return ForbiddenError(attributes.user, attributes.verb, attributes.group, attributes.resource,
                        attributes.subresource, attributes.ns, attributes.name);
}

std::vector<RequestAttributes> RequestPolicy::Denials() const {
  absl::MutexLock lock(&mu_);
  return denials_;
}

void RequestPolicy::InjectFault(Fault fault) {
  absl::MutexLock lock(&mu_);
  faults_.push_back(std::move(fault));
}

void RequestPolicy::ClearFaults() {
  absl::MutexLock lock(&mu_);
  faults_.clear();
}

std::optional<Fault> RequestPolicy::TakeFault(const std::string& verb, const std::string& resource,
                                              const std::string& subresource,
                                              const std::string& ns) {
  absl::MutexLock lock(&mu_);
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (!it->verb.empty() && it->verb != verb) continue;
    if (!it->ns.empty() && it->ns != ns) continue;
    if (!ResourceMatches(it->resource, resource, subresource)) continue;
    Fault fault = *it;
    if (it->times > 0 && --it->times == 0) faults_.erase(it);
    return fault;
  }
  return std::nullopt;
}

void RequestPolicy::Begin() {
  absl::MutexLock lock(&mu_);
  ++unrecorded_;
}

void RequestPolicy::Record(RequestRecord record) {
  absl::MutexLock lock(&mu_);
  log_.push_back(std::move(record));
  if (unrecorded_ > 0) --unrecorded_;
}

void RequestPolicy::AwaitRecordedLocked() const {
  bool (*none_left)(const int*) = [](const int* unrecorded) { return *unrecorded == 0; };
  mu_.AwaitWithTimeout(absl::Condition(none_left, &unrecorded_), absl::Seconds(5));
}

std::vector<RequestRecord> RequestPolicy::Log() const {
  absl::MutexLock lock(&mu_);
  AwaitRecordedLocked();
  return log_;
}

void RequestPolicy::ClearLog() {
  absl::MutexLock lock(&mu_);
  log_.clear();
}

int RequestPolicy::Count(const std::string& verb, const std::string& resource) const {
  absl::MutexLock lock(&mu_);
  AwaitRecordedLocked();
  int count = 0;
  for (const RequestRecord& record : log_) {
    if (!verb.empty() && record.verb != verb) continue;
    if (record.resource.empty() && !resource.empty()) continue;
    if (!ResourceMatches(resource, record.resource, record.subresource)) continue;
    ++count;
  }
  return count;
}

}  // namespace hptrain::testing
