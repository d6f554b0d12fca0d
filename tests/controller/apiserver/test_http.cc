#include "tests/controller/apiserver/test_http.h"

#include <utility>

#include "httplib.h"

namespace hptrain::testing {
namespace {

constexpr time_t kTimeoutSeconds = 20;
// A watch may see no event for a long time (the real server sends no heartbeats); the
// destructor ends it.
constexpr time_t kWatchReadTimeoutSeconds = 300;

httplib::Headers HeadersFor(const std::string& token) {
  httplib::Headers headers = {{"Accept", "application/json"}};
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  return headers;
}

}  // namespace

TestClient::TestClient(int port, std::string token) : port_(port), token_(std::move(token)) {}

HttpResult TestClient::Send(const std::string& method, const std::string& path,
                            const std::string& body, const std::string& content_type,
                            const std::vector<std::pair<std::string, std::string>>& headers) const {
  httplib::Client client("127.0.0.1", port_);
  client.set_read_timeout(kTimeoutSeconds);
  client.set_write_timeout(kTimeoutSeconds);
  httplib::Request request;
  request.method = method;
  request.path = path;
  request.headers = HeadersFor(token_);
  if (!content_type.empty()) request.headers.emplace("Content-Type", content_type);
  for (const auto& [key, value] : headers) {
    request.headers.erase(key);  // a header given replaces the default one (Accept)
    request.headers.emplace(key, value);
  }
  request.body = body;
  httplib::Result result = client.send(request);
  HttpResult out;
  if (!result) return out;
  out.status = result->status;
  out.text = result->body;
  out.content_type = result->get_header_value("Content-Type");
  out.body = nlohmann::json::parse(out.text, nullptr, /*allow_exceptions=*/false);
  return out;
}

HttpResult TestClient::Get(const std::string& path) const { return Send("GET", path, "", ""); }

HttpResult TestClient::Post(const std::string& path, const nlohmann::json& body) const {
  return Send("POST", path, body.dump(), "application/json");
}

HttpResult TestClient::Put(const std::string& path, const nlohmann::json& body) const {
  return Send("PUT", path, body.dump(), "application/json");
}

HttpResult TestClient::Patch(const std::string& path, const nlohmann::json& body,
                             const std::string& content_type) const {
  return Send("PATCH", path, body.dump(), content_type);
}

HttpResult TestClient::Delete(const std::string& path, const nlohmann::json& body) const {
  if (body.is_null()) return Send("DELETE", path, "", "");
  return Send("DELETE", path, body.dump(), "application/json");
}

WatchStream::WatchStream(int port, std::string path, std::string token)
    : client_(std::make_unique<httplib::Client>("127.0.0.1", port)) {
  client_->set_read_timeout(kWatchReadTimeoutSeconds);
  thread_ = std::thread([this, path = std::move(path), token = std::move(token)] {
    httplib::Headers headers = HeadersFor(token);
    httplib::Result result = client_->Get(
        path, headers,
        [this](const httplib::Response& response) {
          absl::MutexLock lock(&mu_);
          status_ = response.status;
          return true;
        },
        [this](const char* data, size_t length) {
          absl::MutexLock lock(&mu_);
          partial_.append(data, length);
          size_t newline;
          while ((newline = partial_.find('\n')) != std::string::npos) {
            events_.push_back(nlohmann::json::parse(partial_.substr(0, newline), nullptr, false));
            partial_.erase(0, newline + 1);
          }
          return true;
        });
    absl::MutexLock lock(&mu_);
    if (!result) status_ = 0;
    ended_ = true;
  });
}

WatchStream::~WatchStream() {
  // Shuts the socket down; repeated in case the request had not started yet.
  do {
    client_->stop();
  } while (!WaitForEnd(absl::Milliseconds(100)));
  thread_.join();
}

std::vector<nlohmann::json> WatchStream::WaitForEvents(size_t count, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto enough = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return events_.size() >= count || ended_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  return events_;
}

bool WatchStream::WaitForEnd(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_; };
  return mu_.AwaitWithTimeout(absl::Condition(&ended), timeout);
}

std::vector<nlohmann::json> WatchStream::events() const {
  absl::MutexLock lock(&mu_);
  return events_;
}

int WatchStream::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

std::vector<std::string> WatchStream::types() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> types;
  for (const nlohmann::json& event : events_) {
    types.push_back(event.is_object() ? event.value("type", "?") : "?");
  }
  return types;
}

}  // namespace hptrain::testing
