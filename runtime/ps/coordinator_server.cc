#include "runtime/ps/coordinator_server.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"

namespace hptrain::ps {

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const std::string& host, int port, std::unique_ptr<CoordinatorService> service) {
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer());
  server->service_ = std::move(service);
  grpc::ServerBuilder builder;
  // Without this gRPC binds with SO_REUSEPORT and silently shares a port that is in use.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.AddListeningPort(absl::StrCat(host, ":", port), grpc::InsecureServerCredentials(),
                           &server->port_);
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || server->port_ == 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("coordinator port ", host, ":", port, " already in use or not bindable"));
  }
  return server;
}

void CoordinatorServer::Stop() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }
}

CoordinatorServer::~CoordinatorServer() { Stop(); }

}  // namespace hptrain::ps
