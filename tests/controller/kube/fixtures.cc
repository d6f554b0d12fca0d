#include "tests/controller/kube/fixtures.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#ifndef HPTRAIN_KUBE_FIXTURE_DIR
#define HPTRAIN_KUBE_FIXTURE_DIR ""
#endif

namespace hptrain::kube::testing {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::string FixtureDir() {
  if (const char* env = std::getenv("HPTRAIN_KUBE_FIXTURES"); env != nullptr && IsDirectory(env)) {
    return env;
  }
  return IsDirectory(HPTRAIN_KUBE_FIXTURE_DIR) ? HPTRAIN_KUBE_FIXTURE_DIR : "";
}

nlohmann::json Fixture::RequestJson() const {
  if (request_body.is_string()) {
    return nlohmann::json::parse(request_body.get<std::string>(), nullptr, false);
  }
  return request_body;
}

nlohmann::json Fixture::ResponseJson() const {
  return nlohmann::json::parse(response_body, nullptr, false);
}

std::string Fixture::ResponseBytes() const {
  if (!raw_http.empty()) return raw_http;
  std::string out = absl::StrCat("HTTP/1.1 ", status, " ", reason, "\r\n");
  if (response_headers.is_object()) {
    for (auto it = response_headers.begin(); it != response_headers.end(); ++it) {
      std::string name = absl::AsciiStrToLower(it.key());
      if (name == "content-length" || name == "transfer-encoding" || name == "connection") {
        continue;
      }
      if (it->is_string()) absl::StrAppend(&out, it.key(), ": ", it->get<std::string>(), "\r\n");
    }
  }
  absl::StrAppend(&out, "Content-Length: ", response_body.size(), "\r\nConnection: close\r\n\r\n",
                  response_body);
  return out;
}

absl::StatusOr<Fixture> LoadFixture(absl::string_view number) {
  std::string dir = FixtureDir();
  if (dir.empty()) return absl::NotFoundError("fixture directory not found");
  std::string file;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* entry = ::readdir(d)) {
      std::string name = entry->d_name;
      if (absl::StartsWith(name, absl::StrCat(number, "-")) && absl::EndsWith(name, ".json")) {
        file = absl::StrCat(dir, "/", name);
      }
    }
    ::closedir(d);
  }
  if (file.empty()) return absl::NotFoundError(absl::StrCat("no fixture ", number, "-*.json"));
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  if (!doc.is_object()) return absl::InvalidArgumentError(absl::StrCat(file, ": not JSON"));
  Fixture f;
  f.file = file;
  const nlohmann::json& request = doc["request"];
  const nlohmann::json& response = doc["response"];
  f.method = request.value("method", "");
  f.path = request.value("path", "");
  f.request_headers = request.value("headers", nlohmann::json::object());
  f.request_body = request.value("body", nlohmann::json());
  f.status = response.value("status", 0);
  f.reason = response.value("reason", "");
  f.response_headers = response.value("headers", nlohmann::json::object());
  f.response_body = response.value("body", "");
  std::string raw = response.value("raw_http_base64", "");
  if (!raw.empty() && !absl::Base64Unescape(raw, &f.raw_http)) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": bad raw_http_base64"));
  }
  return f;
}

FakeServer::Handler ReplayHandler(const Fixture& fixture) {
  std::string bytes = fixture.ResponseBytes();
  return [bytes](const RecordedRequest&, Connection& connection) { connection.Write(bytes); };
}

}  // namespace hptrain::kube::testing
