// Transport: point-to-point byte exchange between the ranks of one job, with byte accounting.
//
// The CPU collectives (ring_allreduce.h, allgather.h, broadcast.h) are written once over this
// interface; back ends implement it in their own folders (gloo/ for TCP, and an in-process
// loopback for tests). Every payload byte handed to the wire or taken from it is counted here, so
// the counters are the communicator's truth that benchmarks compare with interface counters.
//
// Thread-safety: one collective at a time per Transport (callers serialise); the counters may be
// read from any thread.
#ifndef HPTRAIN_RUNTIME_COMM_TRANSPORT_H_
#define HPTRAIN_RUNTIME_COMM_TRANSPORT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace hptrain::comm {

struct ByteCounters {
  std::atomic<int64_t> sent{0};
  std::atomic<int64_t> received{0};
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sends `send_bytes` from `send` to rank `to` and, concurrently, receives exactly `recv_bytes`
  // into `recv` from rank `from`. Either side may be skipped with a null pointer. Blocks until
  // both complete; DeadlineExceeded after the transport's timeout, Unavailable if a peer is gone.
  // Both ends of one transfer must pass the same `tag` and byte count.
  absl::Status SendRecv(int to, const void* send, size_t send_bytes, int from, void* recv,
                        size_t recv_bytes, uint64_t tag);

  const ByteCounters& counters() const { return counters_; }

 protected:
  virtual absl::Status DoSendRecv(int to, const void* send, size_t send_bytes, int from,
                                  void* recv, size_t recv_bytes, uint64_t tag) = 0;

 private:
  ByteCounters counters_;
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_TRANSPORT_H_
