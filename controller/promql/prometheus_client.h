// PrometheusClient: instant queries against a Prometheus server's HTTP API.
//
// The controller reads its workers' metrics (compute time, batch size, step rate) from the
// Prometheus that scrapes them, with PromQL:
//
//   PrometheusOptions options;
//   options.url = "http://prometheus.monitoring:9090";
//   HPTRAIN_ASSIGN_OR_RETURN(auto client, PrometheusClient::Create(options));
//   HPTRAIN_ASSIGN_OR_RETURN(
//       std::vector<Sample> rates,
//       client->Query("rate(hptrain_compute_seconds_count{trainingjob=\"mnist\"}[1m])"));
//
// Query sends GET {url}/api/v1/query?query=<expr, percent-encoded> (evaluated at the server's
// "now") with Accept: application/json and, when configured, Authorization: Bearer <token>, and
// decodes the documented response envelope
//   {"status":"success","data":{"resultType":"vector","result":[
//       {"metric":{"__name__":"up","job":"w"},"value":[1712000000.123,"1"]}, ...]}}
// Warnings in the envelope are ignored.
//
// Errors of Query, all one line:
//   Unavailable      the server cannot be reached, TLS fails, or no complete response arrives
//                    within the timeout: "GET http://prom:9090/api/v1/query: <what>";
//   InvalidArgument  Prometheus rejected the query (HTTP 400 or 422, e.g. a syntax error):
//                    "prometheus: bad_data: <error>"; or the result is a range vector or a
//                    string ("expected an instant vector, got resultType \"matrix\"");
//   Unavailable      any other error response (503 timeout or overload, 500, a proxy's 502...):
//                    "prometheus: <errorType>: <error>", or "HTTP 502: <start of the body>"
//                    when the body is not a Prometheus error;
//   Internal         a success response whose body is not JSON or not shaped as above,
//                    naming what was wrong ("prometheus: bad response: data.result[1].value[1]:
//                    not a string"); a native-histogram sample, which this client does not read.
// Messages do not repeat the expression; callers add it where it helps.
//
// Thread-safety: Query may be called concurrently from any number of threads; each call opens its
// own connection. Blocking: Query blocks for one exchange, bounded by options.timeout.
// Creating a client ignores SIGPIPE process-wide (http_get.h).
#ifndef HPTRAIN_CONTROLLER_PROMQL_PROMETHEUS_CLIENT_H_
#define HPTRAIN_CONTROLLER_PROMQL_PROMETHEUS_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "controller/promql/http_get.h"
#include "controller/promql/sample.h"

namespace hptrain::promql {

struct PrometheusOptions {
  std::string url;                             // "http://host:port" or "https://host:port[/prefix]"
  absl::Duration timeout = absl::Seconds(10);  // per query, connect to last byte
  std::string bearer_token;                    // sent as Authorization when not empty
  std::string ca_file;                         // https: trusted CA bundle (PEM file)
  bool insecure_skip_tls_verify = false;       // https: trust any server certificate
};

class PrometheusClient {
 public:
  // Checks the options: InvalidArgument for a URL that is not http(s)://host[:port][/path-prefix]
  // (a query or fragment included), a timeout that is not positive, or a ca_file that cannot be
  // read. Does not contact the server.
  static absl::StatusOr<std::unique_ptr<PrometheusClient>> Create(PrometheusOptions options);

  PrometheusClient(const PrometheusClient&) = delete;
  PrometheusClient& operator=(const PrometheusClient&) = delete;

  // Evaluates the PromQL expression `expr` at the server's current time. A "vector" result gives
  // one Sample per series (labels from "metric", value and timestamp from "value"), possibly
  // none; a "scalar" result gives one Sample with no labels. Values may be NaN or +-Inf. Errors
  // as in the file comment.
  absl::StatusOr<std::vector<Sample>> Query(const std::string& expr) const;

  // The configured URL, as given.
  const std::string& url() const { return options_.url; }

 private:
  PrometheusClient(PrometheusOptions options, HttpUrl server);

  const PrometheusOptions options_;
  const HttpUrl server_;
};

}  // namespace hptrain::promql

#endif  // HPTRAIN_CONTROLLER_PROMQL_PROMETHEUS_CLIENT_H_
