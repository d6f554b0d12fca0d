#include "controller/manager/job_token.h"

#include <openssl/rand.h>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace hptrain::manager {

absl::StatusOr<std::string> NewJobToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return absl::InternalError("job token: the random generator failed");
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

}  // namespace hptrain::manager
