#include "runtime/base/status.h"

#include <cstring>

namespace hptrain {

absl::Status ErrnoStatus(int err, const std::string& what, const char* file, int line) {
  std::string message = absl::StrCat(what, ": ", std::strerror(err), " (", file, ":", line, ")");
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EADDRINUSE:
    case EEXIST:
      return absl::AlreadyExistsError(message);
    case EINVAL:
      return absl::InvalidArgumentError(message);
    case ETIMEDOUT:
      return absl::DeadlineExceededError(message);
    case EINTR:
    case EAGAIN:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace hptrain
