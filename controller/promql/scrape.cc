#include "controller/promql/scrape.h"

#include "absl/strings/str_cat.h"
#include "controller/promql/http_get.h"
#include "controller/promql/text_format.h"
#include "runtime/base/status.h"

namespace hptrain::promql {

absl::StatusOr<std::vector<Sample>> ScrapeMetrics(const std::string& url, absl::Duration timeout) {
  HPTRAIN_ASSIGN_OR_RETURN(HttpUrl server, ParseHttpUrl(url, /*allow_query=*/true));
  HttpGetRequest request;
  request.target = server.path.empty() ? "/" : server.path;
  // Only the 0.0.4 text format is parsed; without this header an exporter built on
  // client_golang could pick protobuf or OpenMetrics.
  request.headers.emplace_back("Accept", "text/plain;version=0.0.4");
  request.headers.emplace_back("User-Agent", "hptrain-controller");
  request.timeout = timeout;
  HPTRAIN_ASSIGN_OR_RETURN(HttpGetResponse response, HttpGet(server, request));
  if (response.status != 200) {
    return absl::UnavailableError(absl::StrCat("GET ", url, ": HTTP ", response.status));
  }
  absl::StatusOr<std::vector<Sample>> samples = ParseTextFormat(response.body);
  if (!samples.ok()) return Annotate(samples.status(), url);
  return samples;
}

}  // namespace hptrain::promql
