#include "runtime/ps/coordinator_server.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "runtime/ps/grpc_server.h"

namespace hptrain::ps {

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const std::string& host, int port, std::unique_ptr<CoordinatorService> service,
    const std::vector<grpc::Service*>& extra_services) {
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer());
  server->service_ = std::move(service);
  std::vector<grpc::Service*> services = {server->service_.get()};
  services.insert(services.end(), extra_services.begin(), extra_services.end());
  absl::StatusOr<RunningServer> running = StartGrpcServer(host, port, services, "coordinator");
  if (!running.ok()) return running.status();
  server->server_ = std::move(running->server);
  server->port_ = running->port;
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
