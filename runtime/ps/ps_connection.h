// PsConnection: a worker's handle on the job's parameter-server shards, as the PS strategies
// (runtime/sync/parameter_server.cc) use it. Implemented over gRPC by PsClient (ps_client.h) and
// in-process by LocalPsConnection (for tests). Calls on different shards may run concurrently;
// calls on one shard are issued by one thread at a time.
//
// Byte counters count tensor payload bytes (ps_codec.h), in both directions, including the
// initialisation and checkpoint-state transfers; gRPC framing is not counted.
//
// Membership epochs (docs/elastic.md): the connection stamps Init, Push and Pull with its
// membership epoch (set_membership_epoch; 0 until set). At a change of members the worker calls
// CancelPending, which ends every call in flight with Cancelled (a pull waiting for a round that
// will never complete returns at once) and refuses, with Cancelled, every call started after it,
// until set_membership_epoch re-arms the connection for the next epoch: the old epoch's
// background pushes and pulls end promptly whatever their timing, and the same connection then
// serves the new epoch.
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

  // Ends every call in flight with Cancelled and refuses later ones until set_membership_epoch.
  // Does not block; thread-safe.
  virtual void CancelPending() = 0;

  // The epoch Init, Push and Pull carry from now on; re-arms a connection CancelPending stopped.
  // Call it between calls (not while the strategy has calls in flight).
  void set_membership_epoch(int64_t epoch);
  int64_t membership_epoch() const { return epoch_.load(); }

  int64_t bytes_sent() const { return sent_.load(); }
  int64_t bytes_received() const { return received_.load(); }

 protected:
  void CountSent(int64_t bytes) { sent_ += bytes; }
  void CountReceived(int64_t bytes) { received_ += bytes; }
  // Whether CancelPending stopped the connection (and set_membership_epoch has not re-armed it).
  bool cancelled() const { return cancelled_.load(); }
  const std::atomic<bool>* cancelled_flag() const { return &cancelled_; }
  // Sets or clears the flag; implementations cancel their calls after raising it.
  void set_cancelled(bool cancelled) { cancelled_ = cancelled; }
  // The error of a call refused or ended by CancelPending.
  static absl::Status CancelledCall(int shard, const char* call);

 private:
  std::atomic<int64_t> sent_{0};
  std::atomic<int64_t> received_{0};
  std::atomic<int64_t> epoch_{0};
  std::atomic<bool> cancelled_{false};
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
  // Wakes the waits of this connection's calls (not other connections' on the same stores).
  void CancelPending() override;

 private:
  std::vector<ParamStore*> stores_;
  std::chrono::milliseconds timeout_;
};

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_PS_CONNECTION_H_
