// PsService: one parameter-server shard as the gRPC service of proto/hptrain/v1/ps.proto, over a
// ParamStore. Checks the job token on every call, reassembles and validates the chunked tensors,
// and bounds every wait by the client's deadline and `max_wait`.
//
// Thread-safety: handlers run concurrently on gRPC's threads; the ParamStore is thread-safe.
#ifndef HPTRAIN_RUNTIME_PS_PS_SERVICE_H_
#define HPTRAIN_RUNTIME_PS_PS_SERVICE_H_

#include <chrono>
#include <functional>
#include <string>

#include "proto/hptrain/v1/ps.grpc.pb.h"
#include "runtime/ps/param_store.h"

namespace hptrain::ps {

class PsService final : public hptrain::v1::ParameterServer::Service {
 public:
  PsService(std::string token, ParamStore* store,
            std::chrono::milliseconds max_wait = std::chrono::minutes(5));

  // Called with "missing_token" or "bad_token" for every call refused for its token.
  void set_on_unauthenticated(std::function<void(const std::string&)> fn) {
    on_unauthenticated_ = std::move(fn);
  }

  grpc::Status Init(grpc::ServerContext*, grpc::ServerReader<hptrain::v1::InitRequest>*,
                    hptrain::v1::InitResponse*) override;
  grpc::Status Push(grpc::ServerContext*, grpc::ServerReader<hptrain::v1::PushRequest>*,
                    hptrain::v1::PushResponse*) override;
  grpc::Status Pull(grpc::ServerContext*, const hptrain::v1::PullRequest*,
                    grpc::ServerWriter<hptrain::v1::PullResponse>*) override;
  grpc::Status GetState(grpc::ServerContext*, const hptrain::v1::GetStateRequest*,
                        grpc::ServerWriter<hptrain::v1::GetStateResponse>*) override;

 private:
  grpc::Status Authorize(grpc::ServerContext* context);
  // The time left before the client's deadline, at most max_wait_.
  std::chrono::milliseconds WaitBudget(grpc::ServerContext* context) const;

  const std::string token_;
  ParamStore* store_;
  const std::chrono::milliseconds max_wait_;
  std::function<void(const std::string&)> on_unauthenticated_;
};

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_PS_SERVICE_H_
