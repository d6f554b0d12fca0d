// Conversions between grpc::Status and absl::Status. The two share their code numbering, so the
// conversion is one-to-one.
#ifndef HPTRAIN_RUNTIME_PS_GRPC_STATUS_H_
#define HPTRAIN_RUNTIME_PS_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/server_context.h"
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

// Why a call's token is refused: "missing_token", "bad_token", or "" when it carries `token`.
inline std::string TokenRejection(const grpc::ServerContext& context, const std::string& token) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kAuthMetadataKey);
  if (it == metadata.end()) return "missing_token";
  if (std::string(it->second.data(), it->second.size()) != "Bearer " + token) return "bad_token";
  return "";
}

// The UNAUTHENTICATED status for a TokenRejection reason.
inline grpc::Status Unauthenticated(const std::string& reason) {
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, reason == "missing_token"
                                                             ? "job token missing"
                                                             : "job token does not match");
}

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_GRPC_STATUS_H_
