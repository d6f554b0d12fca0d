// Watch events and the decoder of a watch stream.
//
// A watch (GET ...?watch=1&allowWatchBookmarks=true&resourceVersion=RV&timeoutSeconds=T) answers
// HTTP 200 with a chunked body of newline-delimited JSON events:
//   {"type":"ADDED","object":{...}}
//   {"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"242"}}}
//   {"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired",...}}
// and ends when the server's timeoutSeconds elapse. A resourceVersion too old for the server's
// watch cache is not an HTTP 410: it is HTTP 200 followed by one ERROR event carrying a Status
// with code 410 (fixture 38). Client::Watch (client.h) runs the request; WatchDecoder splits the
// bytes into events, whatever the chunk boundaries.
//
// Thread-safety: WatchDecoder is not thread-safe (one per stream).
#ifndef HPTRAIN_CONTROLLER_KUBE_WATCH_H_
#define HPTRAIN_CONTROLLER_KUBE_WATCH_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "controller/kube/canceller.h"
#include "nlohmann/json.hpp"

namespace hptrain::kube {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

// "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR".
const char* WatchEventTypeName(WatchEventType type);

struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  nlohmann::json object;  // the object; a Status for kError; only metadata for kBookmark

  // object.metadata.resourceVersion, or "" (an ERROR event has none).
  std::string ResourceVersion() const;
};

struct WatchOptions {
  std::string resource_version;  // "" = start with the current state ("ADDED" for each object)
  std::string label_selector;
  std::string field_selector;
  bool allow_bookmarks = true;
  int timeout_seconds = 300;  // server-side end of the stream; 0 = server default
  // Client-side bound on a silent stream (no byte for this long fails with Unavailable);
  // zero: timeout_seconds + 30 s, or 10 min without timeout_seconds.
  absl::Duration idle_timeout = absl::ZeroDuration();
  Canceller* cancel = nullptr;  // optional, not owned: aborts the watch from another thread
};

// Called on the watching thread for each event, in stream order. A non-OK return ends the watch
// and becomes its result.
using WatchHandler = std::function<absl::Status(const WatchEvent& event)>;

// Splits a watch body into events.
class WatchDecoder {
 public:
  // Largest accepted event line; a longer one is an error (protects memory).
  static constexpr size_t kMaxEventBytes = 64u << 20;

  // Appends `bytes` and calls `handler` for every complete event. Returns the first non-OK
  // handler result, or Internal "malformed watch event: ..." for a line that is not an event;
  // the decoder must not be fed again after an error.
  absl::Status Feed(absl::string_view bytes, const WatchHandler& handler);

  // True when a partial line is pending (a stream that ends here was cut mid-event).
  bool HasPartialEvent() const;

 private:
  std::string buffer_;
};

// Parses one event line.
absl::StatusOr<WatchEvent> ParseWatchEvent(absl::string_view line);

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_WATCH_H_
