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
      : size_(size), timeout_(timeout) {}
  int size() const { return size_; }

 private:
  friend class LoopbackTransport;
  using Key = std::tuple<int, int, uint64_t>;  // from, to, tag
  int size_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, std::vector<std::string>> mailbox_;
};

class LoopbackTransport : public Transport {
 public:
  LoopbackTransport(std::shared_ptr<LoopbackHub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }

 protected:
  absl::Status DoSendRecv(int to, const void* send, size_t send_bytes, int from, void* recv,
                          size_t recv_bytes, uint64_t tag) override;

 private:
  std::shared_ptr<LoopbackHub> hub_;
  int rank_;
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_LOOPBACK_TRANSPORT_H_
