#include "tests/controller/apiserver/request_info.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace hptrain::testing {

RequestInfo ParseRequestInfo(const std::string& method, const std::string& path,
                             const std::string& watch_param) {
  RequestInfo info;
  info.verb = absl::AsciiStrToLower(method);
  info.parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  const std::vector<std::string>& parts = info.parts;
  size_t rest = 0;
  if (parts.size() >= 3 && parts[0] == "api") {
    info.version = parts[1];
    rest = 2;
  } else if (parts.size() >= 4 && parts[0] == "apis") {
    info.group = parts[1];
    info.version = parts[2];
    rest = 3;
  } else {
    return info;
  }
  std::vector<std::string> tail(parts.begin() + rest, parts.end());
  bool watch = watch_param == "1" || watch_param == "true";
  if (!tail.empty() && tail[0] == "watch") {
    watch = true;
    tail.erase(tail.begin());
  }
  if (tail.empty()) return info;
  info.resource_request = true;
  if (tail[0] == "namespaces" && tail.size() >= 2) {
    if (tail.size() == 2 || (tail.size() == 3 && (tail[2] == "status" || tail[2] == "finalize"))) {
      info.resource = "namespaces";
      info.name = tail[1];
      if (tail.size() == 3) info.subresource = tail[2];
      tail.clear();
    } else {
      info.ns = tail[1];
      tail.erase(tail.begin(), tail.begin() + 2);
    }
  }
  if (!tail.empty()) {
    info.resource = tail[0];
    if (tail.size() >= 2) info.name = tail[1];
    if (tail.size() >= 3) info.subresource = tail[2];
    if (tail.size() > 3) info.malformed = true;
  }
  if (method == "GET") {
    info.verb = watch ? "watch" : (!info.name.empty() ? "get" : "list");
  } else if (method == "POST") {
    info.verb = "create";
  } else if (method == "PUT") {
    info.verb = "update";
  } else if (method == "PATCH") {
    info.verb = "patch";
  } else if (method == "DELETE") {
    info.verb = info.name.empty() ? "deletecollection" : "delete";
  }
  return info;
}

}  // namespace hptrain::testing
