// Log lines from the kube client's background threads.
//
// Informers, the event recorder and the leader elector run on their own threads and have no caller
// to hand an error to; they report what went wrong (a failed watch, a dropped event) as one line
// through this sink. The default sink writes "hptrain-controller: <line>\n" to stderr. The
// controller's main may redirect it; tests capture it.
//
// Thread-safety: all functions may be called from any thread. The sink is called with an internal
// lock held, so it must not call SetLogSink or LogLine itself.
#ifndef HPTRAIN_CONTROLLER_KUBE_LOG_H_
#define HPTRAIN_CONTROLLER_KUBE_LOG_H_

#include <functional>

#include "absl/strings/string_view.h"

namespace hptrain::kube {

using LogSink = std::function<void(absl::string_view line)>;

// Replaces the process-wide sink; an empty function restores the default (stderr).
void SetLogSink(LogSink sink);

// Hands one line (no trailing newline) to the sink.
void LogLine(absl::string_view line);

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_LOG_H_
