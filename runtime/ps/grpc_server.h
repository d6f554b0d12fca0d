// Starts a gRPC server for the ps process's services (the coordinator, a parameter-server shard).
#ifndef HPTRAIN_RUNTIME_PS_GRPC_SERVER_H_
#define HPTRAIN_RUNTIME_PS_GRPC_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"

namespace hptrain::ps {

struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// Binds host:port (0 picks a free port) without SO_REUSEPORT, so a port in use is an error:
// AlreadyExists "<what> port HOST:PORT already in use or not bindable". Serves with
// `credentials`, or the process's default (tls_credentials.h: TLS after UseTls(), else plaintext).
absl::StatusOr<RunningServer> StartGrpcServer(
    const std::string& host, int port, const std::vector<grpc::Service*>& services,
    const std::string& what, std::shared_ptr<grpc::ServerCredentials> credentials = nullptr);

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_GRPC_SERVER_H_
