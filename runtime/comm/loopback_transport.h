// LoopbackTransport: ranks as threads of one process, exchanging through shared memory.
// For fast multi-rank tests (gloo's spawn() pattern) and for 1-rank runs.
#ifndef HPTRAIN_RUNTIME_COMM_LOOPBACK_TRANSPORT_H_
#define HPTRAIN_RUNTIME_COMM_LOOPBACK_TRANSPORT_H_

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/comm/transport.h"

namespace hptrain::comm {

// Shared by the transports of all ranks of one in-process group.
class LoopbackHub {
 public:
  explicit LoopbackHub(int size, std::chrono::milliseconds timeout = std::chrono::seconds(30))
      : size_(size), timeout_(timeout), gone_(size, false) {}
  int size() const { return size_; }

 private:
  friend class LoopbackTransport;
  using Key = std::tuple<int, int, uint64_t>;  // from, to, tag
  int size_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, std::vector<std::string>> mailbox_;
  std::vector<bool> gone_;  // per rank: its transport was destroyed (a closed connection)
};

class LoopbackTransport : public Transport {
 public:
  LoopbackTransport(std::shared_ptr<LoopbackHub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}
  // Marks the rank gone, as a process whose connections closed.
  ~LoopbackTransport() override;
  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }
  void AbortUntimedRecvs() override;
  std::chrono::milliseconds timeout() const override { return hub_->timeout_; }

 protected:
  absl::Status DoSendRecv(int to, const void* send, size_t send_bytes, int from, void* recv,
                          size_t recv_bytes, uint64_t tag) override;
  // Waits with no time limit, like GlooTransport's, until the message arrives, the peer's
  // transport is destroyed, or AbortUntimedRecvs.
  absl::Status DoUntimedRecv(int from, void* recv, size_t bytes, uint64_t tag) override;

 private:
  // Takes the oldest message under `key` (the hub's mutex held; one must be there).
  absl::Status TakeMessage(const LoopbackHub::Key& key, void* recv, size_t bytes);

  bool untimed_aborted_ = false;  // guarded by the hub's mutex
  std::shared_ptr<LoopbackHub> hub_;
  int rank_;
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_LOOPBACK_TRANSPORT_H_
