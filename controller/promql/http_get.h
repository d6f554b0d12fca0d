// HttpGet: the one HTTP(S) exchange both readers of metrics need, a GET with a deadline.
//
// Shared by PrometheusClient (the HTTP API) and ScrapeMetrics (a /metrics page). Each call opens
// its own connection (no pool: the controller reads metrics every few seconds, not per
// request), so concurrent calls share nothing. TLS checks the server's certificate and host
// name against `ca_file` when one is given, else the system trust store, and nothing with
// insecure_skip_tls_verify. (cpp-httplib 0.11 may add the system store to a given CA file, see
// controller/kube/http_transport.cc; unlike the API server's, a metrics endpoint does not need
// the CA to be the only one trusted.)
//
// Errors: any response, whatever its status, is a success here; connecting, TLS, reading,
// writing, and the deadline passing fail with Unavailable "GET <url>: <what went wrong>", where
// <url> is the origin and path without the query string (a PromQL expression would make the
// message long and say nothing the caller does not know).
//
// The first call ignores SIGPIPE process-wide (as controller/kube's transport does): writing to a
// connection the server has just closed must fail with EPIPE, not kill the controller.
//
// Thread-safety: all functions may be called concurrently. HttpGet blocks for the exchange.
#ifndef HPTRAIN_CONTROLLER_PROMQL_HTTP_GET_H_
#define HPTRAIN_CONTROLLER_PROMQL_HTTP_GET_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hptrain::promql {

// A parsed "http(s)://host[:port][/path][?query]".
struct HttpUrl {
  bool https = false;
  std::string host;    // without brackets for IPv6
  int port = 80;       // 80 / 443 when the URL gives none
  std::string origin;  // "http://host:port" as written, for messages
  std::string path;    // "" or "/..." (with the query when allowed)
};

// Parses `url`. With `allow_query` false the path is a prefix: a query or fragment is refused and
// a trailing '/' dropped. InvalidArgument naming what is wrong otherwise (scheme not http or
// https, empty host, user info, bad port, a fragment).
absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url, bool allow_query);

// Percent-encodes `text` for a query component: everything but A-Z a-z 0-9 - _ . ~ becomes %XX
// (so '+' and ' ' survive any decoder).
std::string EncodeQueryComponent(absl::string_view text);

struct HttpGetRequest {
  std::string target;  // path and encoded query, starting with '/'
  std::vector<std::pair<std::string, std::string>> headers;
  absl::Duration timeout = absl::Seconds(10);  // for the whole exchange
  std::string ca_file;                         // https only; empty: the system trust store
  bool insecure_skip_tls_verify = false;       // https only
};

struct HttpGetResponse {
  int status = 0;
  std::string content_type;
  std::string body;
};

// GETs `request.target` from `server` (whose own path is not used: put it in the target).
// Unavailable as described above.
absl::StatusOr<HttpGetResponse> HttpGet(const HttpUrl& server, const HttpGetRequest& request);

}  // namespace hptrain::promql

#endif  // HPTRAIN_CONTROLLER_PROMQL_HTTP_GET_H_
