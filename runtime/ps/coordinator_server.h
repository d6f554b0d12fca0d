// CoordinatorServer: runs a CoordinatorService on a gRPC server bound to host:port.
#ifndef HPTRAIN_RUNTIME_PS_COORDINATOR_SERVER_H_
#define HPTRAIN_RUNTIME_PS_COORDINATOR_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/ps/coordinator_service.h"

namespace grpc {
class Server;
class Service;
}

namespace hptrain::ps {

class CoordinatorServer {
 public:
  // Binds host:port (port 0 picks a free port) and starts serving. AlreadyExists with
  // "coordinator port HOST:PORT already in use" when the port is taken. `extra_services` (owned
  // by the caller, outliving the server) are served on the same port: the ps process's
  // parameter-server shard 0.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      const std::string& host, int port, std::unique_ptr<CoordinatorService> service,
      const std::vector<grpc::Service*>& extra_services = {});
  ~CoordinatorServer();

  int port() const { return port_; }
  CoordinatorService& service() { return *service_; }
  // Stops accepting calls and waits up to one second for running ones. Idempotent.
  void Stop();

 private:
  CoordinatorServer() = default;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_COORDINATOR_SERVER_H_
