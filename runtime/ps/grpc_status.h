// Conversions between grpc::Status and absl::Status. The two share their code numbering, so the
// conversion is one-to-one.
#ifndef HPTRAIN_RUNTIME_PS_GRPC_STATUS_H_
#define HPTRAIN_RUNTIME_PS_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace hptrain::ps {

inline absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

inline grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

// Metadata key that carries the job token: "authorization: Bearer <token>".
inline constexpr char kAuthMetadataKey[] = "authorization";

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_GRPC_STATUS_H_
