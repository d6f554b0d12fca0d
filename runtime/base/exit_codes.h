// Exit codes of every hptrain command, and the one-line error report.
//   0 success; 1 runtime failure; 2 bad input (job file, flags, data, ports); 130 interrupted.
#ifndef HPTRAIN_RUNTIME_BASE_EXIT_CODES_H_
#define HPTRAIN_RUNTIME_BASE_EXIT_CODES_H_

#include <string>

#include "absl/status/status.h"

namespace hptrain {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitInterrupted = 130;

// Bad input is whatever the user can fix in what they gave us.
int ExitCodeFor(const absl::Status& status);

// Prints "hptrain <who>: <message>" as one line on stderr and returns ExitCodeFor(status).
int ReportError(const std::string& who, const absl::Status& status);
// The same for any program: "<invocation>: <message>" ("hptrain run", "hptrain-allreduce-latency").
int ReportErrorAs(const std::string& invocation, const absl::Status& status);

}  // namespace hptrain

#endif  // HPTRAIN_RUNTIME_BASE_EXIT_CODES_H_
