// ScrapeMetrics: reading one process's /metrics page directly, the way Prometheus scrapes it.
//
// The controller's fallback when no Prometheus is configured: it reads each worker's endpoint
// (runtime/metrics/http_server.h) itself. One GET with Accept: text/plain;version=0.0.4, the body
// parsed by ParseTextFormat (text_format.h). The samples carry the page's own labels only:
// there is no "job"/"instance" target labelling and no timestamp unless the page gives one.
//
// Thread-safety: may be called concurrently. Blocks for one exchange, bounded by `timeout`.
// The first call ignores SIGPIPE process-wide (http_get.h).
#ifndef HPTRAIN_CONTROLLER_PROMQL_SCRAPE_H_
#define HPTRAIN_CONTROLLER_PROMQL_SCRAPE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "controller/promql/sample.h"

namespace hptrain::promql {

// GETs `url` ("http://host:port/metrics"; https is accepted and verified against the system trust
// store) and parses the page. Errors, all naming `url`:
//   InvalidArgument  a malformed URL, or a malformed page: "<url>: line 7: <what is wrong>";
//   Unavailable      cannot connect, no complete response within `timeout`, or a status other
//                    than 200: "GET <url>: HTTP 404".
absl::StatusOr<std::vector<Sample>> ScrapeMetrics(const std::string& url, absl::Duration timeout);

}  // namespace hptrain::promql

#endif  // HPTRAIN_CONTROLLER_PROMQL_SCRAPE_H_
