// Communicator: the collectives a strategy uses, on flat buffers, with byte accounting.
//
// Back ends: CPU (collectives over a Transport: Gloo TCP in jobs, loopback in tests) and NCCL
// (GPU buffers; nccl/nccl_communicator.h). Strategies see only this interface; which back end a
// worker uses is chosen by name in comm_registry.h from the job's device.
//
// Asynchronous collectives (AllReduceSumAsync) return a Work (work.h: Wait, IsCompleted, the
// bytes it moved) and may be in flight while the caller issues the next: every collective,
// blocking or not, runs in the order it was issued, which all ranks keep the same. The blocking
// methods return when their collective (and every one issued before it) is complete.
//
// Thread-safety: collectives are issued from one thread at a time (the bucketed reducer's
// communication thread during backward, the trainer thread otherwise; never both at once).
// The byte counters may be read from any thread.
#ifndef HPTRAIN_RUNTIME_COMM_COMMUNICATOR_H_
#define HPTRAIN_RUNTIME_COMM_COMMUNICATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "runtime/comm/chunk_codec.h"
#include "runtime/comm/transport.h"
#include "runtime/comm/work.h"

namespace hptrain::comm {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In-place sum of `count` floats over every rank; all ranks end bit-identical.
  virtual absl::Status AllReduceSum(float* data, size_t count) = 0;
  // The same sum, issued asynchronously on `buffer` (buffer.count floats; host memory on the host
  // back ends, device memory on device back ends, else the Work fails with InvalidArgument); the
  // Work's contract is work.h's. The default runs AllReduceSum at once on the calling thread and
  // returns a complete Work with the bytes the counters gained meanwhile, for back ends with no
  // communication thread or stream of their own (the hierarchical communicator, test doubles).
  virtual std::shared_ptr<Work> AllReduceSumAsync(const BufferRef& buffer);
  // In-place sum with every chunk encoded by `codec` on the wire; all ranks end bit-identical.
  // Unimplemented on back ends without compressed collectives.
  virtual absl::Status AllReduceSumCompressed(float* data, size_t count, ChunkCodec& codec) = 0;
  // `recv` (size() * block_bytes) receives every rank's block of `send`, in rank order.
  virtual absl::Status AllGather(const void* send, void* recv, size_t block_bytes) = 0;
  // Every rank contributes `send_bytes` (sizes may differ); blocks[j] receives rank j's bytes.
  virtual absl::Status AllGatherV(const void* send, size_t send_bytes,
                                  std::vector<std::string>* blocks) = 0;
  // All-gather-v into one buffer, for back ends whose buffers live on a device (NCCL): every
  // rank knows every block's size already (sizes[j] bytes from rank j, e.g. from an AllGather of
  // the sizes); `recv` (Σ sizes bytes) receives the blocks back to back in rank order, this
  // rank's copied from `send`. A ring of size() - 1 steps, each forwarding the block received
  // last, so the bytes are AllGatherV's less its sizes: Σ_{s < N-1} sizes[(rank - s) mod N] sent.
  // Unimplemented where buffers are host memory (use AllGatherV).
  virtual absl::Status AllGatherVInto(const void* send, const std::vector<size_t>& sizes,
                                      void* recv) {
    (void)send;
    (void)sizes;
    (void)recv;
    return absl::UnimplementedError("AllGatherVInto: this back end has no device buffers");
  }
  // The stream (a cudaStream_t) a device back end runs its collectives on, so that a strategy
  // can order its own kernels before and after them without synchronizing; null on the CPU back
  // ends.
  virtual void* device_stream() { return nullptr; }
  // Device back ends: every collective issued after this call starts only after the work
  // enqueued on `stream` (a cudaStream_t of this device; null: the legacy default stream) before
  // the call: the communicator's stream waits on an event recorded there (cudaStreamWaitEvent);
  // the host waits for nothing. How a producer on another stream hands its buffer to the
  // collectives. Host back ends have nothing to order: OK.
  virtual absl::Status WaitForStream(void* stream) {
    (void)stream;
    return absl::OkStatus();
  }
  // Copies `bytes` of `data` on `root` to every rank.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root) = 0;
  // Returns once every rank has called Barrier.
  virtual absl::Status Barrier() = 0;

  // Payload bytes handed to / taken from the transport since construction.
  virtual int64_t bytes_sent() const = 0;
  virtual int64_t bytes_received() const = 0;
  // Of those, the bytes exchanged with ranks on other nodes (docs/algorithms.md §2c). A
  // communicator that knows no topology treats every rank as a node of its own: all of them.
  virtual int64_t inter_node_bytes_sent() const { return bytes_sent(); }
  virtual int64_t inter_node_bytes_received() const { return bytes_received(); }
  // The communicator among the ranks of this rank's node (hierarchical_communicator.h), for
  // strategies that act inside a node; null when the communicator knows no topology.
  virtual Communicator* node_communicator() { return nullptr; }

  // The point-to-point transport under the collectives, for exchanges between two ranks
  // (p2p_channel.h); null on back ends without one. Its transfers use tags apart from the
  // collectives' and count in the same byte counters.
  virtual Transport* transport() { return nullptr; }
};

// A Communicator over a point-to-point Transport (CPU back ends).
//
// Asynchronous collectives run on a communication thread of this object (started by the first
// one), one at a time, in issue order; their Works complete from that thread (HostWork) and a
// Work's bytes are the ring's exact chunk bytes. Blocking collectives run on the caller's thread
// once every collective issued before them has completed, so a communicator that never issues
// an asynchronous collective runs no thread. When an asynchronous collective fails, the ones
// queued behind it fail without running (Aborted, naming the first error): its peers are no
// longer in step with this rank. The destructor lets the thread finish what is queued.
class TransportCommunicator : public Communicator {
 public:
  explicit TransportCommunicator(std::unique_ptr<Transport> transport);
  ~TransportCommunicator() override;
  TransportCommunicator(const TransportCommunicator&) = delete;
  TransportCommunicator& operator=(const TransportCommunicator&) = delete;

  int rank() const override { return transport_->rank(); }
  int size() const override { return transport_->size(); }
  absl::Status AllReduceSum(float* data, size_t count) override;
  std::shared_ptr<Work> AllReduceSumAsync(const BufferRef& buffer) override;
  absl::Status AllReduceSumCompressed(float* data, size_t count, ChunkCodec& codec) override;
  absl::Status AllGather(const void* send, void* recv, size_t block_bytes) override;
  absl::Status AllGatherV(const void* send, size_t send_bytes,
                          std::vector<std::string>* blocks) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Barrier() override;
  int64_t bytes_sent() const override { return transport_->counters().sent.load(); }
  int64_t bytes_received() const override { return transport_->counters().received.load(); }
  Transport* transport() override { return transport_.get(); }

 private:
  struct Queued {
    uint64_t ticket = 0;
    uint64_t tag = 0;
    BufferRef buffer;
    std::shared_ptr<HostWork> work;
  };

  // Runs `collective` with the next tag on the calling thread, once every collective issued
  // before it has completed.
  absl::Status RunInOrder(const std::function<absl::Status(uint64_t tag)>& collective);
  // The communication thread: runs the queued collectives in ticket order.
  void CommLoop();

  std::unique_ptr<Transport> transport_;

  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_tag_ = 1;  // every collective gets its own tag, in call order (same on all ranks)
  uint64_t next_ticket_ = 0;      // tickets handed out, one per collective, in issue order
  uint64_t finished_tickets_ = 0;  // collectives complete: tickets [0, finished_tickets_)
  std::deque<Queued> queue_;       // asynchronous collectives not yet run
  absl::Status queue_failed_;      // the failure that fails the rest of the queue
  bool stop_ = false;
  std::thread thread_;             // started by the first asynchronous collective
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_COMMUNICATOR_H_
