#include "controller/kube/log.h"

#include <cstdio>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace hptrain::kube {
namespace {

struct SinkState {
  absl::Mutex mu;
  LogSink sink ABSL_GUARDED_BY(mu);
};

SinkState& State() {
  static SinkState* state = new SinkState;  // never destroyed: threads may log during exit
  return *state;
}

}  // namespace

void SetLogSink(LogSink sink) {
  SinkState& state = State();
  absl::MutexLock lock(&state.mu);
  state.sink = std::move(sink);
}

void LogLine(absl::string_view line) {
  SinkState& state = State();
  absl::MutexLock lock(&state.mu);
  if (state.sink) {
    state.sink(line);
    return;
  }
  std::fprintf(stderr, "hptrain-controller: %.*s\n", static_cast<int>(line.size()), line.data());
}

}  // namespace hptrain::kube
