#include "runtime/base/exit_codes.h"

#include <cstdio>

#include "absl/strings/str_replace.h"

namespace hptrain {

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kOutOfRange:
      return kExitBadInput;
    case absl::StatusCode::kCancelled:
      return kExitInterrupted;
    default:
      return kExitFailure;
  }
}

int ReportError(const std::string& who, const absl::Status& status) {
  return ReportErrorAs("hptrain " + who, status);
}

int ReportErrorAs(const std::string& invocation, const absl::Status& status) {
  // One line, whatever the message holds.
  std::string message = absl::StrReplaceAll(status.message(), {{"\n", " "}});
  std::fprintf(stderr, "%s: %s\n", invocation.c_str(), message.c_str());
  std::fflush(stderr);
  return ExitCodeFor(status);
}

}  // namespace hptrain
