#include "tests/controller/kube/fake_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hptrain::kube::testing {
namespace {

constexpr int kPollMillis = 20;
constexpr size_t kMaxRequestBytes = 16u << 20;

// Reads one request from `fd`; false when the peer closes first or the server stops.
bool ReadRequest(int fd, const std::atomic<bool>& stopping, RecordedRequest* request) {
  std::string data;
  size_t header_end = std::string::npos;
  size_t content_length = 0;
  while (true) {
    if (header_end != std::string::npos && data.size() >= header_end + 4 + content_length) break;
    if (stopping.load() || data.size() > kMaxRequestBytes) return false;
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, kPollMillis);
    if (ready < 0 && errno != EINTR) return false;
    if (ready <= 0) continue;
    char buf[8192];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    data.append(buf, static_cast<size_t>(n));
    if (header_end == std::string::npos) {
      header_end = data.find("\r\n\r\n");
      if (header_end == std::string::npos) continue;
      std::vector<std::string> lines = absl::StrSplit(data.substr(0, header_end), "\r\n");
      std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
      if (first.size() < 2) return false;
      request->method = first[0];
      request->target = first[1];
      size_t q = request->target.find('?');
      request->path = request->target.substr(0, q);
      request->query = q == std::string::npos ? "" : request->target.substr(q + 1);
      for (size_t i = 1; i < lines.size(); ++i) {
        size_t colon = lines[i].find(':');
        if (colon == std::string::npos) continue;
        std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
        std::string value(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
        request->headers[name] = value;
      }
      auto length = request->headers.find("content-length");
      if (length != request->headers.end() && !absl::SimpleAtoi(length->second, &content_length)) {
        return false;
      }
    }
  }
  request->body = data.substr(header_end + 4, content_length);
  return true;
}

}  // namespace

std::string PercentDecode(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    int value = 0;
    if (text[i] == '%' && i + 2 < text.size() &&
        absl::SimpleHexAtoi(text.substr(i + 1, 2), &value)) {
      out.push_back(static_cast<char>(value));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::string RecordedRequest::Header(absl::string_view name) const {
  auto it = headers.find(absl::AsciiStrToLower(name));
  return it == headers.end() ? "" : it->second;
}

std::vector<std::pair<std::string, std::string>> RecordedRequest::Params() const {
  std::vector<std::pair<std::string, std::string>> params;
  if (query.empty()) return params;
  for (absl::string_view pair : absl::StrSplit(query, '&')) {
    size_t eq = pair.find('=');
    params.emplace_back(PercentDecode(pair.substr(0, eq)),
                        eq == absl::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1)));
  }
  return params;
}

std::string RecordedRequest::Param(absl::string_view key) const {
  for (const auto& [k, v] : Params()) {
    if (k == key) return v;
  }
  return "";
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

bool Connection::Write(absl::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool Connection::Respond(int status, absl::string_view body, absl::string_view content_type) {
  return Write(absl::StrCat("HTTP/1.1 ", status, " ", ReasonPhrase(status),
                            "\r\nContent-Type: ", content_type, "\r\nContent-Length: ", body.size(),
                            "\r\nConnection: close\r\n\r\n", body));
}

bool Connection::StartChunked(int status, absl::string_view content_type) {
  return Write(absl::StrCat("HTTP/1.1 ", status, " ", ReasonPhrase(status),
                            "\r\nContent-Type: ", content_type,
                            "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"));
}

bool Connection::Chunk(absl::string_view data) {
  if (data.empty()) return true;
  return Write(absl::StrCat(absl::Hex(data.size()), "\r\n", data, "\r\n"));
}

bool Connection::EndChunked() { return Write("0\r\n\r\n"); }

bool Connection::WaitClosed(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (stopping()) return true;
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, kPollMillis);
    if (ready > 0) {
      char c;
      ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
      if (n > 0) {
        ::recv(fd_, &c, 1, 0);  // unexpected bytes: discard
      }
    }
  }
  return false;
}

FakeServer::FakeServer(Handler handler) : handler_(std::move(handler)) {}

FakeServer::~FakeServer() { Stop(); }

absl::Status FakeServer::Start() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    return absl::InternalError(absl::StrCat("bind/listen: ", std::strerror(errno)));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

void FakeServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (accept_thread_.joinable()) accept_thread_.join();
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

std::string FakeServer::url() const { return absl::StrCat("http://127.0.0.1:", port_); }

std::vector<RecordedRequest> FakeServer::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

void FakeServer::ClearRequests() {
  absl::MutexLock lock(&mu_);
  requests_.clear();
}

void FakeServer::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollMillis) <= 0) continue;
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    absl::MutexLock lock(&mu_);
    open_fds_.insert(fd);
    threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

void FakeServer::Serve(int fd) {
  RecordedRequest request;
  if (ReadRequest(fd, stopping_, &request)) {
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(request);
    }
    Connection connection(fd, &stopping_);
    handler_(request, connection);
  }
  absl::MutexLock lock(&mu_);
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
  open_fds_.erase(fd);
}

}  // namespace hptrain::kube::testing
