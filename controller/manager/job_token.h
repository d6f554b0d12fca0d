// The job token: the shared secret a TrainingJob's pods authenticate their RPCs with (docs/design.md,
// "Every RPC carries the job's token"). The controller draws a fresh one for every reconcile
// pass; the reconciler uses it only when it must create the job's Secret, so a job keeps the
// token its Secret was created with.
//
// Thread-safe.
#ifndef HPTRAIN_CONTROLLER_MANAGER_JOB_TOKEN_H_
#define HPTRAIN_CONTROLLER_MANAGER_JOB_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"

namespace hptrain::manager {

// 64 lowercase hex digits: 32 bytes from OpenSSL's cryptographic random generator. Internal
// when the generator fails (it is not seeded), which never happens on a Linux host.
absl::StatusOr<std::string> NewJobToken();

}  // namespace hptrain::manager

#endif  // HPTRAIN_CONTROLLER_MANAGER_JOB_TOKEN_H_
