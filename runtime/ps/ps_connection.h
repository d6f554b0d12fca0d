// PsConnection: a worker's handle on the job's parameter-server shards, as the PS strategies
// (runtime/sync/parameter_server.cc) use it. Implemented over gRPC by PsClient (ps_client.h) and
// in-process by LocalPsConnection (for tests). Calls on different shards may run concurrently;
// calls on one shard are issued by one thread at a time.
//
// Byte counters count tensor payload bytes (ps_codec.h), in both directions, including the
// initialisation and checkpoint-state transfers; gRPC framing is not counted.
#ifndef HPTRAIN_RUNTIME_PS_PS_CONNECTION_H_
#define HPTRAIN_RUNTIME_PS_PS_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/ps/param_store.h"

namespace hptrain::ps {

class PsConnection {
 public:
  virtual ~PsConnection() = default;

  virtual int shards() const = 0;
  virtual absl::Status Init(int shard, int rank, const ShardLayoutInfo& layout,
                            const ShardState& state) = 0;
  // Returns the shard's version after the push.
  virtual absl::StatusOr<int64_t> Push(int shard, const PushInfo& push,
                                       const std::vector<std::vector<uint8_t>>& tensors) = 0;
  virtual absl::StatusOr<PullResult> Pull(int shard, int rank, int64_t min_version,
                                          int bits) = 0;
  virtual absl::StatusOr<ShardState> GetState(int shard, int64_t version) = 0;

  int64_t bytes_sent() const { return sent_.load(); }
  int64_t bytes_received() const { return received_.load(); }

 protected:
  void CountSent(int64_t bytes) { sent_ += bytes; }
  void CountReceived(int64_t bytes) { received_ += bytes; }

 private:
  std::atomic<int64_t> sent_{0};
  std::atomic<int64_t> received_{0};
};

// Payload bytes of a state's sections (4 per value).
int64_t StateBytes(const ShardState& state);

// Shards in this process: ParamStores owned by the caller (tests, benchmarks of the strategies).
class LocalPsConnection : public PsConnection {
 public:
  LocalPsConnection(std::vector<ParamStore*> stores,
                    std::chrono::milliseconds timeout = std::chrono::seconds(60))
      : stores_(std::move(stores)), timeout_(timeout) {}

  int shards() const override { return static_cast<int>(stores_.size()); }
  absl::Status Init(int shard, int rank, const ShardLayoutInfo& layout,
                    const ShardState& state) override;
  absl::StatusOr<int64_t> Push(int shard, const PushInfo& push,
                               const std::vector<std::vector<uint8_t>>& tensors) override;
  absl::StatusOr<PullResult> Pull(int shard, int rank, int64_t min_version, int bits) override;
  absl::StatusOr<ShardState> GetState(int shard, int64_t version) override;

 private:
  std::vector<ParamStore*> stores_;
  std::chrono::milliseconds timeout_;
};

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_PS_CONNECTION_H_
