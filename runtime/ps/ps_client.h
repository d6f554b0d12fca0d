// PsClient: a worker's gRPC connection to the job's parameter-server shards (ps.proto). Every
// call carries the job token and a deadline of `timeout`; an error names the shard and its
// address ("parameter server shard 1 (10.0.0.3:29400) Push: ..."), so a worker whose PS died
// says which one. CancelPending cancels the calls in flight (grpc::ClientContext::TryCancel).
//
// Thread-safety: calls may run concurrently (one per shard at a time, ps_connection.h);
// CancelPending and the byte counters may be used from any thread.
#ifndef HPTRAIN_RUNTIME_PS_PS_CLIENT_H_
#define HPTRAIN_RUNTIME_PS_PS_CLIENT_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "proto/hptrain/v1/ps.grpc.pb.h"
#include "runtime/comm/kv_store.h"
#include "runtime/ps/ps_connection.h"

namespace hptrain::ps {

// The key-value store key under which shard `shard` registers its address.
std::string ShardAddressKey(int shard);

class PsClient : public PsConnection {
 public:
  PsClient(std::vector<std::string> addresses, std::string token,
           std::chrono::milliseconds timeout);

  // Looks the shards' addresses up in the coordinator's store (waiting up to `timeout` for them
  // to register) and connects.
  static absl::StatusOr<std::unique_ptr<PsClient>> Discover(comm::KeyValueStore& store,
                                                            int shards, std::string token,
                                                            std::chrono::milliseconds timeout);

  int shards() const override { return static_cast<int>(addresses_.size()); }
  const std::string& address(int shard) const { return addresses_[shard]; }

  absl::Status Init(int shard, int rank, const ShardLayoutInfo& layout,
                    const ShardState& state) override;
  absl::StatusOr<int64_t> Push(int shard, const PushInfo& push,
                               const std::vector<std::vector<uint8_t>>& tensors) override;
  absl::StatusOr<PullResult> Pull(int shard, int rank, int64_t min_version, int bits) override;
  absl::StatusOr<ShardState> GetState(int shard, int64_t version) override;
  void CancelPending() override;

 private:
  // A call's context, registered for CancelPending while the call runs.
  class Call;

  void Prepare(grpc::ClientContext* context) const;  // deadline and token
  absl::Status Failed(int shard, const char* call, const absl::Status& status) const;

  std::vector<std::string> addresses_;
  std::string token_;
  std::chrono::milliseconds timeout_;
  std::vector<std::unique_ptr<hptrain::v1::ParameterServer::Stub>> stubs_;
  std::mutex calls_mu_;
  std::set<grpc::ClientContext*> calls_;  // the calls in flight
};

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_PS_CLIENT_H_
