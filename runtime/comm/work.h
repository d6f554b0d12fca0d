// Work: the handle of one collective issued asynchronously (Communicator::AllReduceSumAsync),
// and BufferRef, the buffer such a collective works on.
//
// Contract of a Work:
//   - Completion. A collective is complete when its result is final, successful or not:
//     IsCompleted() says so without blocking (any thread). A Work created complete (Work::Done:
//     a blocking collective, an argument error) is complete from the start.
//   - Wait(timeout) returns the collective's status once it is complete: OK, or the error it
//     failed with (the same status on every later Wait). What OK promises depends on where the
//     buffer lives:
//       host buffer    the result is in the buffer when Wait returns (the host waited for it);
//       device buffer  the buffer's stream (BufferRef::stream) is ordered after the collective:
//                      Wait made that stream wait on the collective's completion event
//                      (cudaStreamWaitEvent) and returns at once, so work enqueued on that stream
//                      afterwards sees the result. The host waits for nothing; a host read of the
//                      buffer needs a synchronization of that stream first. Each Wait enqueues the
//                      wait again (harmless).
//     A host Wait that does not see completion within `timeout` returns DeadlineExceeded; the
//     collective goes on (its own failure is bounded by its communicator's timeout). Wait() with
//     no argument uses the timeout of the communicator that issued the Work.
//   - Bytes. bytes_sent() / bytes_received(): the payload bytes this collective moved, counted
//     as its communicator counts them (the CPU ring's exact chunk bytes; NCCL's algorithmic
//     formula), 0 for a collective that moved nothing or failed. Final once Wait returned OK;
//     read them after that.
//   - Lifetime. Works are shared (std::shared_ptr): the caller's reference and the back end's,
//     which it holds until it has published completion. The buffer must stay valid and untouched
//     (except by work ordered after Wait on its stream) until the collective is complete.
//     Dropping a Work neither waits for nor cancels its collective: the communicator finishes it
//     (a host communicator's destructor drains what is queued), so a caller that drops a Work
//     must still keep the buffer alive until the communicator is done with it.
//
// Thread-safety: every method may be called from any thread, also concurrently; completion is
// published by the thread that runs the collective (a host Work: under its mutex) and is seen by
// IsCompleted and Wait from then on.
#ifndef HPTRAIN_RUNTIME_COMM_WORK_H_
#define HPTRAIN_RUNTIME_COMM_WORK_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "absl/status/status.h"

namespace hptrain::comm {

// Where a buffer lives.
enum class Location { kHost, kDevice };

// The buffer of an asynchronous collective: `count` elements at `data` (floats for the
// all-reduce), in host or device memory. For a device buffer, `stream` is the stream (a
// cudaStream_t of the communicator's device; null is the legacy default stream) that consumes
// the result: Work::Wait orders it after the collective. Producing the buffer is ordered the
// other way round, by the caller: the collective runs on the communicator's own stream
// (Communicator::device_stream()), so work on other streams that writes the buffer must be
// ordered before it first (Communicator::WaitForStream). `stream` means nothing for host buffers.
struct BufferRef {
  void* data = nullptr;
  size_t count = 0;
  Location location = Location::kHost;
  void* stream = nullptr;

  static BufferRef Host(float* data, size_t count) {
    return BufferRef{data, count, Location::kHost, nullptr};
  }
  static BufferRef Device(float* data, size_t count, void* stream) {
    return BufferRef{data, count, Location::kDevice, stream};
  }
  float* floats() const { return static_cast<float*>(data); }
};

class Work {
 public:
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // See the contract above.
  virtual bool IsCompleted() const = 0;
  virtual absl::Status Wait(std::chrono::milliseconds timeout) = 0;
  absl::Status Wait() { return Wait(timeout_); }

  int64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_acquire); }
  int64_t bytes_received() const { return bytes_received_.load(std::memory_order_acquire); }
  // Seconds the collective itself ran, where its back end measures it (the host communicator's
  // communication thread does); 0 otherwise (a collective on a GPU stream, a Work::Done).
  double seconds() const { return seconds_.load(std::memory_order_acquire); }

  // A Work that is complete from the start with `status` (e.g. a collective that ran blocking,
  // or failed before it was issued) and the bytes it moved.
  static std::shared_ptr<Work> Done(absl::Status status, int64_t bytes_sent = 0,
                                    int64_t bytes_received = 0);
  // `inner` followed by `then`: a Work whose first Wait that sees `inner` succeed runs `then`
  // once, on the waiting thread (a host buffer: after the result is in it; a device buffer: after
  // the buffer's stream was ordered behind the collective, so `then` may enqueue work on that
  // stream), and returns its status; an error of `inner` is returned without running it.
  // IsCompleted reports `inner`'s completion; the result is final once Wait returned. Bytes and
  // seconds are `inner`'s.
  static std::shared_ptr<Work> Then(std::shared_ptr<Work> inner,
                                    std::function<absl::Status()> then);

  // The timeout Wait() with no argument uses.
  std::chrono::milliseconds timeout() const { return timeout_; }

 protected:
  explicit Work(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  // For the back ends: records what the collective moved and how long it ran (before it is
  // published as complete).
  void SetResult(int64_t sent, int64_t received, double seconds = 0) {
    bytes_sent_.store(sent, std::memory_order_release);
    bytes_received_.store(received, std::memory_order_release);
    seconds_.store(seconds, std::memory_order_release);
  }

 private:
  const std::chrono::milliseconds timeout_;
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};
  std::atomic<double> seconds_{0};
};

// A Work completed by a host thread (the host communicator's communication thread): Complete()
// publishes the status once; Wait blocks on a condition variable until then.
class HostWork : public Work {
 public:
  explicit HostWork(std::chrono::milliseconds timeout) : Work(timeout) {}

  bool IsCompleted() const override;
  using Work::Wait;
  absl::Status Wait(std::chrono::milliseconds timeout) override;

  // Called once, by the thread that ran the collective.
  void Complete(absl::Status status, int64_t sent, int64_t received, double seconds);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  absl::Status status_;
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_WORK_H_
