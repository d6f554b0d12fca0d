#include "controller/promql/http_get.h"

#include <httplib.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hptrain::promql {
namespace {

constexpr absl::Duration kMaxConnectTimeout = absl::Seconds(5);

void SplitDuration(absl::Duration d, time_t* sec, time_t* usec) {
  int64_t micros = std::max<int64_t>(absl::ToInt64Microseconds(d), 1000);
  *sec = static_cast<time_t>(micros / 1000000);
  *usec = static_cast<time_t>(micros % 1000000);
}

std::string Describe(httplib::Error error, absl::Duration timeout) {
  switch (error) {
    case httplib::Error::Connection:
      return "cannot connect";
    case httplib::Error::ConnectionTimeout:
      return absl::StrCat("cannot connect within ", absl::FormatDuration(timeout));
    case httplib::Error::Read:
      return absl::StrCat("no complete response within ", absl::FormatDuration(timeout),
                          " (or the connection was closed)");
    case httplib::Error::Write:
      return "cannot send the request";
    case httplib::Error::SSLConnection:
      return "TLS handshake failed";
    case httplib::Error::SSLLoadingCerts:
      return "cannot load the CA file";
    case httplib::Error::SSLServerVerification:
      return "server certificate verification failed";
    default:
      return httplib::to_string(error);
  }
}

bool IsUnreserved(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
         c == '~';
}

}  // namespace

absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url, bool allow_query) {
  auto bad = [url](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("URL \"", url, "\": ", why, " (want http(s)://host[:port][/path])"));
  };
  HttpUrl out;
  size_t scheme_end = url.find("://");
  if (scheme_end == absl::string_view::npos) return bad("no scheme");
  std::string scheme = absl::AsciiStrToLower(url.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https") return bad(absl::StrCat("scheme \"", scheme, "\""));
  out.https = scheme == "https";
  out.port = out.https ? 443 : 80;
  absl::string_view rest = url.substr(scheme_end + 3);
  absl::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  rest.remove_prefix(authority.size());
  out.origin = absl::StrCat(scheme, "://", authority);
  if (authority.find('@') != absl::string_view::npos) return bad("user info is not supported");
  absl::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == absl::string_view::npos) return bad("unterminated IPv6 address");
    out.host = std::string(authority.substr(1, close - 1));
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') return bad("junk after the IPv6 address");
    if (!after.empty()) port = after.substr(1);
    if (!after.empty() && port.empty()) return bad("empty port");
  } else {
    size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return bad("empty port");
    }
  }
  if (out.host.empty()) return bad("empty host");
  for (char c : out.host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' &&
        c != ':' && c != '%') {
      return bad("bad character in host");
    }
  }
  if (!port.empty()) {
    int value = 0;
    if (!std::all_of(port.begin(), port.end(),
                     [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
        !absl::SimpleAtoi(port, &value) || value < 1 || value > 65535) {
      return bad(absl::StrCat("bad port \"", port, "\""));
    }
    out.port = value;
  }
  if (rest.find('#') != absl::string_view::npos) return bad("a fragment is not allowed");
  if (!allow_query) {
    if (rest.find('?') != absl::string_view::npos) return bad("a query is not allowed");
    while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  }
  for (char c : rest) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return bad("space or control in path");
  }
  out.path = std::string(rest);
  if (!out.path.empty() && out.path.front() == '?') out.path.insert(0, "/");
  return out;
}

std::string EncodeQueryComponent(absl::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() * 3);
  for (char c : text) {
    if (IsUnreserved(c)) {
      out.push_back(c);
    } else {
      auto byte = static_cast<unsigned char>(c);
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xf]);
    }
  }
  return out;
}

absl::StatusOr<HttpGetResponse> HttpGet(const HttpUrl& server, const HttpGetRequest& request) {
  // See the header: httplib writes with send(..., 0) and OpenSSL with write().
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { std::signal(SIGPIPE, SIG_IGN); });

  std::string what =
      absl::StrCat("GET ", server.origin, request.target.substr(0, request.target.find('?')));
  std::unique_ptr<httplib::ClientImpl> client;
  if (server.https) {
    auto ssl = std::make_unique<httplib::SSLClient>(server.host, server.port);
    if (request.insecure_skip_tls_verify) {
      ssl->enable_server_certificate_verification(false);
    } else if (!request.ca_file.empty()) {
      ssl->set_ca_cert_path(request.ca_file.c_str());
    }
    client = std::move(ssl);
  } else {
    client = std::make_unique<httplib::ClientImpl>(server.host, server.port);
  }
  client->set_url_encode(false);  // the target is encoded already
  client->set_follow_location(false);
  client->set_keep_alive(false);
  time_t sec = 0;
  time_t usec = 0;
  SplitDuration(std::min(request.timeout, kMaxConnectTimeout), &sec, &usec);
  client->set_connection_timeout(sec, usec);
  SplitDuration(request.timeout, &sec, &usec);
  client->set_read_timeout(sec, usec);
  client->set_write_timeout(sec, usec);

  httplib::Request req;
  req.method = "GET";
  req.path = request.target;
  for (const auto& [name, value] : request.headers) req.headers.emplace(name, value);

  // httplib's timeouts bound each wait, not the exchange: a server trickling bytes would keep a
  // plain read going forever, so the body reader also checks an overall deadline.
  const absl::Time deadline = absl::Now() + request.timeout;
  bool deadline_passed = false;
  HttpGetResponse response;
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (absl::Now() > deadline) {
      deadline_passed = true;
      return false;
    }
    response.body.append(data, size);
    return true;
  };
  httplib::Result result = client->send(req);
  if (deadline_passed) {
    return absl::UnavailableError(absl::StrCat(what, ": no complete response within ",
                                               absl::FormatDuration(request.timeout)));
  }
  if (!result) {
    return absl::UnavailableError(
        absl::StrCat(what, ": ", Describe(result.error(), request.timeout)));
  }
  response.status = result->status;
  response.content_type = result->get_header_value("Content-Type");
  return response;
}

}  // namespace hptrain::promql
