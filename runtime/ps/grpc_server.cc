#include "runtime/ps/grpc_server.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "runtime/ps/tls_credentials.h"

namespace hptrain::ps {

absl::StatusOr<RunningServer> StartGrpcServer(
    const std::string& host, int port, const std::vector<grpc::Service*>& services,
    const std::string& what, std::shared_ptr<grpc::ServerCredentials> credentials) {
  RunningServer running;
  grpc::ServerBuilder builder;
  // Without this gRPC binds with SO_REUSEPORT and silently shares a port that is in use.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.AddListeningPort(absl::StrCat(host, ":", port),
                           credentials ? credentials : DefaultServerCredentials(), &running.port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  running.server = builder.BuildAndStart();
  if (!running.server || running.port == 0) {
    return absl::AlreadyExistsError(
        absl::StrCat(what, " port ", host, ":", port, " already in use or not bindable"));
  }
  return running;
}

}  // namespace hptrain::ps
