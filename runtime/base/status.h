// Status helpers shared by every hptrain module.
//
// hptrain propagates errors as absl::Status / absl::StatusOr<T>. These macros return early on error
// and, where the caller would lose context, prepend a short description of what was being done:
//
//   HPTRAIN_RETURN_IF_ERROR(ring.Step(k), "all-reduce ring step ", k, " of ", n);
//   HPTRAIN_ASSIGN_OR_RETURN(auto spec, ParseJob(path));
//
// ErrnoStatus() wraps a failed libc call (errno) into a Status that names the call and file:line,
// the way NCCL's checks.h wraps foreign error codes. Nothing here throws.
#ifndef HPTRAIN_RUNTIME_BASE_STATUS_H_
#define HPTRAIN_RUNTIME_BASE_STATUS_H_

#include <cerrno>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace hptrain {

// Returns `status` with "context: " prepended to its message; OK stays OK.
inline absl::Status Annotate(const absl::Status& status, const std::string& context) {
  if (status.ok() || context.empty()) return status;
  absl::Status annotated(status.code(), absl::StrCat(context, ": ", status.message()));
  // Payloads (e.g. a Kubernetes API error's details) survive the added context.
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    annotated.SetPayload(url, payload);
  });
  return annotated;
}

// Joins context parts into one string; no parts give "".
template <typename... Args>
std::string StatusContext(const Args&... args) {
  return absl::StrCat(args...);
}

// Maps an errno value to the closest absl status code, with "what: strerror (file:line)".
absl::Status ErrnoStatus(int err, const std::string& what, const char* file, int line);

}  // namespace hptrain

#define HPTRAIN_ERRNO(what) ::hptrain::ErrnoStatus(errno, (what), __FILE__, __LINE__)

#define HPTRAIN_STATUS_CONCAT_INNER(a, b) a##b
#define HPTRAIN_STATUS_CONCAT(a, b) HPTRAIN_STATUS_CONCAT_INNER(a, b)

// HPTRAIN_RETURN_IF_ERROR(expr [, context parts...])
#define HPTRAIN_RETURN_IF_ERROR(expr, ...)                                         \
  do {                                                                             \
    ::absl::Status hptrain_status_ = (expr);                                       \
    if (!hptrain_status_.ok()) {                                                   \
      return ::hptrain::Annotate(hptrain_status_, ::hptrain::StatusContext(__VA_ARGS__)); \
    }                                                                              \
  } while (0)

#define HPTRAIN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

// HPTRAIN_ASSIGN_OR_RETURN(lhs, expr): evaluates a StatusOr, returns its status on error.
#define HPTRAIN_ASSIGN_OR_RETURN(lhs, expr) \
  HPTRAIN_ASSIGN_OR_RETURN_IMPL(HPTRAIN_STATUS_CONCAT(hptrain_statusor_, __LINE__), lhs, expr)

#endif  // HPTRAIN_RUNTIME_BASE_STATUS_H_
