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
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/types/span.h"

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
  // How long a transfer waits for its peer before it fails.
  virtual std::chrono::milliseconds timeout() const { return std::chrono::seconds(60); }

  // Sends `send_bytes` from `send` to rank `to` and, concurrently, receives exactly `recv_bytes`
  // into `recv` from rank `from`. Either side may be skipped with a null pointer. Blocks until
  // both complete; DeadlineExceeded after the transport's timeout, Unavailable if a peer is gone.
  // Both ends of one transfer must pass the same `tag` and byte count.
  absl::Status SendRecv(int to, const void* send, size_t send_bytes, int from, void* recv,
                        size_t recv_bytes, uint64_t tag);

  // One step of a RingPass: send `send_bytes` from `send`, receive `recv_bytes` into `recv`
  // (either may be empty).
  struct PassStep {
    const void* send = nullptr;
    size_t send_bytes = 0;
    void* recv = nullptr;
    size_t recv_bytes = 0;
  };

  // The steps of a ring collective, in order, with rank `to` (sends) and rank `from` (receives):
  // in step s, steps[s].send goes to `to` and steps[s].recv arrives from `from`; after step s's
  // receive completes, `on_received(s)` runs (it may change what later steps send). Both ends of
  // every transfer must pass the same `tag` and byte count. Same as calling SendRecv step by step,
  // except that a back end may post every receive before the first send (GlooTransport does:
  // the sender then writes each payload at once instead of waiting for the receiver to announce
  // it, which on a host with fewer cores than ranks is most of a step's latency). Earlier sends
  // may still be in flight during a step, so neither a receive nor on_received may change what
  // an earlier step sent. All sends have completed when the call returns OK. An error from
  // on_received(s) ends the pass: no later step is sent, the sends already posted complete, and
  // RingPass returns that error (the peers then fail on the missing steps, as when a rank dies).
  using OnReceived = std::function<absl::Status(int)>;
  absl::Status RingPass(int to, int from, absl::Span<const PassStep> steps, uint64_t tag,
                        const OnReceived& on_received);

  // Receives exactly `bytes` bytes under `tag` from rank `from` into `recv`, with no time limit:
  // blocks until the message arrives, the peer is gone (Unavailable: its connection closed) or
  // AbortUntimedRecvs() is called (Cancelled). For the background threads of an inbox, one per
  // peer. After an abort, `recv` must stay valid for the transport's lifetime and `from` must
  // not send under `tag` again (the receive may still be registered with the back end).
  absl::Status UntimedRecv(int from, void* recv, size_t bytes, uint64_t tag);
  // Ends every UntimedRecv in progress, and every later one, with Cancelled (any thread).
  virtual void AbortUntimedRecvs() {}

  const ByteCounters& counters() const { return counters_; }

 protected:
  virtual absl::Status DoSendRecv(int to, const void* send, size_t send_bytes, int from,
                                  void* recv, size_t recv_bytes, uint64_t tag) = 0;

  // The default: Unimplemented (a back end without untimed receives).
  virtual absl::Status DoUntimedRecv(int from, void* recv, size_t bytes, uint64_t tag);

  // The default runs the steps one SendRecv at a time.
  virtual absl::Status DoRingPass(int to, int from, absl::Span<const PassStep> steps, uint64_t tag,
                                  const OnReceived& on_received);

 private:
  // Adds a completed transfer to the counters (a null side moved nothing).
  void Count(const void* send, size_t send_bytes, const void* recv, size_t recv_bytes);

  ByteCounters counters_;
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_TRANSPORT_H_
