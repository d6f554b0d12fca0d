// NcclCommunicator: the GPU back end of Communicator, NCCL collectives on device buffers.
//
// Every pointer passed to a collective is a DEVICE pointer on this communicator's CUDA device
// (cudaMalloc'ed or managed memory); the caller owns it and must keep it alive until the call
// returns. The caller must also have finished writing it: the collective runs on this object's
// own stream (stream()), not on the caller's, so a producing kernel on another stream has to be
// synchronized (or enqueued on stream()) first.
//
// Blocking: like the CPU back end, each collective enqueues on the communicator's stream and
// returns only after that stream has drained, so the result is in `data` on return. Waiting is a
// poll of cudaStreamQuery and ncclCommGetAsyncError bounded by the timeout given to Create(); on
// expiry the NCCL communicator is aborted (ncclCommAbort) and the call returns DeadlineExceeded.
// The communicator is NCCL "non-blocking" (ncclConfig_t::blocking = 0), so initialization and
// lazy connection setup inside the first collectives are bounded by the same timeout.
//
// Failure is final: after a timeout or an asynchronous NCCL error (a peer died, a CUDA fault)
// the NCCL communicator has been aborted and every later call returns FailedPrecondition carrying
// the first error. Recovery means building a new communicator with a new key prefix.
//
// Byte accounting: NCCL reports no traffic, so the counters add, per completed collective (an
// asynchronous one: when it is issued), the
// payload the ring algorithm moves per rank (S = payload bytes, N = size()):
//   all-reduce  sends and receives 2(N-1)/N · S    (integer division: 2(N-1)·S / N)
//   all-gather  sends and receives (N-1) · block_bytes
//   reduce-scatter  sends and receives (N-1) · recv bytes, i.e. (N-1)/N of the input
//   send/recv   exactly the bytes sent and received
//   broadcast   the root sends S; every other rank receives S
//   barrier     a 1-float all-reduce: 2(N-1)/N · 4
// These are ALGORITHMIC bytes, identical on every rank and comparable with the CPU back end's
// counts. They are not wire bytes: NCCL may choose trees, NVLS or CollNet, split into channels,
// or (for broadcast) forward through intermediate ranks, and none of that is visible here.
//
// Asynchronous all-reduce (AllReduceSumAsync, the Work contract of work.h): the collective is
// enqueued on the communicator's stream, a completion event is recorded behind it, and the call
// returns. Work::Wait makes the buffer's consumer stream (BufferRef::stream) wait on that event
// (cudaStreamWaitEvent) and IsCompleted queries it: nothing waits on the host, and the next
// collective can be enqueued while this one runs. Producers on other streams are ordered before
// it with WaitForStream. The host polls only while NCCL has not yet put the collective on the
// stream (ncclInProgress, during the lazy connection setup of a peer's first collectives);
// host_stream_polls() and host_progress_polls() count the iterations of the host's waiting
// loops, so a run can check that the asynchronous route has none of the first kind. A
// collective that never completes (a peer stuck, not dead) is not bounded by the timeout on this
// route: its consumer stream waits; the next blocking collective, which drains the stream, times
// out and aborts the communicator.
//
// World size 1: AllReduceSum, Broadcast and Barrier return at once, without NCCL (their result
// is the input), so a single worker's buckets cost no NCCL call and no wait for its stream.
//
// Thread-safety: as Communicator: collectives from one thread at a time (any thread: each call
// makes the communicator's device current for its duration and restores the caller's device);
// the byte counters may be read from any thread. Destruction must not race a collective.
#ifndef HPTRAIN_RUNTIME_COMM_NCCL_NCCL_COMMUNICATOR_H_
#define HPTRAIN_RUNTIME_COMM_NCCL_NCCL_COMMUNICATOR_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/kv_store.h"

// Opaque handles, declared as nccl.h and cuda_runtime_api.h do (ncclComm_t, cudaStream_t), so
// that users of this header need neither.
struct ncclComm;
struct CUstream_st;
struct CUevent_st;

namespace hptrain::comm {

class NcclCommunicator : public Communicator {
 public:
  // Joins rank `rank` of `size` ranks into one NCCL communicator on CUDA device `device`.
  //
  // Rendezvous, in order:
  //   1. Check the arguments and that `device` exists; make it current for this thread.
  //   2. Create the communicator's stream and a one-float device scratch buffer for Barrier().
  //   3. Rank 0 calls ncclGetUniqueId and stores the 128 raw bytes under "<key_prefix>/unique_id";
  //      every other rank Gets that key from `store`, waiting for it.
  //   4. ncclCommInitRankConfig (non-blocking), then poll ncclCommGetAsyncError until every rank
  //      has joined.
  // Steps 3 and 4 share one deadline, `timeout` from the call; the same `timeout` then bounds
  // every collective and the shutdown in the destructor.
  // `key_prefix` must be fresh for every communicator built from one store (e.g. "nccl/<epoch>"):
  // a stale unique id left from an earlier communicator would send ranks to a dead root.
  //
  // Returns the communicator on success; on failure:
  //   InvalidArgument     size < 1, rank outside [0, size), device < 0 or not present,
  //                       timeout <= 0, or a stored unique id of the wrong length;
  //   FailedPrecondition  no CUDA device or driver (from cudaGetDeviceCount), or NCCL rejects the
  //                       setup (ncclInvalidUsage, e.g. two ranks on one GPU in NCCL versions
  //                       that forbid it: "Duplicate GPU detected");
  //   DeadlineExceeded    the unique id did not appear, or not every rank joined, in time (the
  //                       half-built NCCL communicator is aborted);
  //   Unavailable/Internal other NCCL or CUDA failures, with NCCL's message and file:line.
  // Blocks for up to `timeout`. Thread-safe: ranks of one job may call it concurrently from
  // different threads (each thread's current device is set to `device` and left so).
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      KeyValueStore& store, int rank, int size, int device, std::chrono::milliseconds timeout,
      const std::string& key_prefix = "nccl");

  // Shuts NCCL down: ncclCommFinalize, waited for up to the timeout, then ncclCommDestroy; if
  // finalizing fails or times out (a peer is gone) or the communicator was already broken, it is
  // aborted instead. Then frees the scratch buffer and destroys the stream. Never throws or
  // aborts the process; errors at this point are ignored.
  ~NcclCommunicator() override;

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // The CUDA device ordinal every buffer must live on.
  int device() const { return device_; }
  // The stream collectives run on (a cudaStream_t). Work enqueued on it before a collective is
  // ordered before it, which spares the caller a synchronization.
  CUstream_st* stream() const { return stream_; }

  // In-place sum of `count` floats at device pointer `data` over every rank (ncclAllReduce,
  // ncclFloat32). NCCL's reduction order is deterministic for a fixed topology, and all ranks
  // end with the same bits. Returns OK with the sum in `data`; DeadlineExceeded after the
  // timeout (communicator aborted); FailedPrecondition if already broken; Unavailable/Internal
  // on NCCL or CUDA errors (communicator aborted). count == 0 returns OK at once.
  absl::Status AllReduceSum(float* data, size_t count) override;

  // The same sum, asynchronous (see the top of this file). `buffer` must be a device buffer
  // (Location::kDevice) on this device; its stream is the consumer's. Errors (in the Work, which
  // is then complete): as AllReduceSum's, InvalidArgument for a host buffer. count == 0 gives a
  // complete Work at once; world size 1 goes through NCCL like any other (unlike AllReduceSum).
  std::shared_ptr<Work> AllReduceSumAsync(const BufferRef& buffer) override;

  // The communicator's stream waits (cudaStreamWaitEvent) for the work enqueued on `stream`
  // before the call; see Communicator::WaitForStream. FailedPrecondition if broken.
  absl::Status WaitForStream(void* stream) override;

  // Iterations of the host's waiting loop that found the stream still busy (blocking
  // collectives drain it), and that found NCCL still enqueueing (ncclInProgress). Any thread.
  int64_t host_stream_polls() const { return stream_polls_.load(std::memory_order_relaxed); }
  int64_t host_progress_polls() const {
    return progress_polls_.load(std::memory_order_relaxed);
  }

  // In-place sum of `count` floats at device pointer `data` with every chunk encoded by `codec`
  // on the wire: the ring of compressed_ring_allreduce.cc (same chunks, salts, error feedback and
  // bytes), each step one grouped ncclSend/ncclRecv to the right and from the left neighbour on
  // this object's stream, with the codec's kernels between them on the same stream, so the host
  // never waits inside the ring. `codec` must be a device codec (ChunkCodec::on_device(), e.g.
  // runtime/sync/codecs/device_codecs.h), else InvalidArgument. Counts the encoded bytes sent and
  // received: 2(N-1) chunks each way. A non-finite value found by the codec is InvalidArgument
  // once every rank has finished (the communicator stays usable); other errors as AllReduceSum.
  absl::Status AllReduceSumCompressed(float* data, size_t count, ChunkCodec& codec) override;

  // Device buffer `recv` (size() * block_bytes) receives every rank's `block_bytes` of device
  // buffer `send`, in rank order (ncclAllGather on bytes). `send` may be recv + rank() *
  // block_bytes (in place). Errors as AllReduceSum.
  absl::Status AllGather(const void* send, void* recv, size_t block_bytes) override;
  // `send` is a device pointer; the gathered blocks are copied to host memory. Built from an
  // all-gather of the sizes and one broadcast per rank, so it costs N collectives: meant for
  // small, irregular payloads (sparse indices), not for bulk data.
  absl::Status AllGatherV(const void* send, size_t send_bytes,
                          std::vector<std::string>* blocks) override;

  // Device buffer `recv` (Σ sizes bytes) receives every rank's block, back to back in rank
  // order; this rank's (sizes[rank()] bytes of device buffer `send`) is copied there first. The
  // ring of the CPU's AllGatherV: size() - 1 steps, each one grouped ncclSend/ncclRecv that
  // forwards the block received in the step before, enqueued back to back on the stream. Counts
  // Σ_{s < N-1} sizes[(rank - s) mod N] sent and Σ sizes[(rank - s - 1) mod N] received.
  // InvalidArgument if sizes has not size() entries; otherwise errors as AllReduceSum.
  absl::Status AllGatherVInto(const void* send, const std::vector<size_t>& sizes,
                              void* recv) override;
  void* device_stream() override { return stream_; }

  // Device buffer `recv` (recv_count floats) receives this rank's block of the sum over every
  // rank of device buffer `send` (size() * recv_count floats): block r of the sum goes to rank r
  // (ncclReduceScatter, ncclFloat32). `recv` may be send + rank() * recv_count (in place).
  // Counts (N-1)/N of the send buffer's bytes each way. Errors as AllReduceSum.
  absl::Status ReduceScatterSum(const float* send, float* recv, size_t recv_count);

  // One grouped point-to-point exchange: `send_bytes` of device buffer `send` to rank `to` and
  // `recv_bytes` from rank `from` into device buffer `recv` (ncclSend and ncclRecv in one
  // ncclGroupStart/End, so a ring of them cannot deadlock). Either side may be skipped with a
  // byte count of 0. InvalidArgument for a rank outside [0, size()); otherwise errors as
  // AllReduceSum. Counts exactly the bytes sent and received.
  absl::Status SendRecv(int to, const void* send, size_t send_bytes, int from, void* recv,
                        size_t recv_bytes);

  // Copies `bytes` of device buffer `data` on `root` into `data` on every rank (ncclBroadcast,
  // in place). InvalidArgument if `root` is outside [0, size()); otherwise errors as
  // AllReduceSum.
  absl::Status Broadcast(void* data, size_t bytes, int root) override;

  // Returns once every rank has called Barrier (a one-float all-reduce on the scratch buffer,
  // whose completion on this rank implies every rank contributed). Errors as AllReduceSum.
  absl::Status Barrier() override;

  // Algorithmic payload bytes of completed collectives since construction (see the top of this
  // file); readable from any thread.
  int64_t bytes_sent() const override { return bytes_sent_.load(std::memory_order_relaxed); }
  int64_t bytes_received() const override {
    return bytes_received_.load(std::memory_order_relaxed);
  }

 private:
  NcclCommunicator(int rank, int size, int device, std::chrono::milliseconds timeout);

  // Steps 2-4 of Create() on a constructed object, so that the destructor cleans up whatever a
  // failed step left behind.
  absl::Status Init(KeyValueStore& store, const std::string& key_prefix);

  // Takes the outcome of enqueueing a non-blocking NCCL call (HPTRAIN_NCCL_ENQUEUED in the .cc), then
  // waits for the work to leave NCCL and for the stream to drain. Any failure aborts the
  // communicator and is remembered in broken_.
  absl::Status Complete(const absl::Status& enqueued, const char* what);

  // Polls until the communicator's asynchronous state is no longer ncclInProgress and, if
  // `drain_stream`, the stream is idle; DeadlineExceeded at `deadline`. Does not abort.
  absl::Status Poll(const char* what, std::chrono::steady_clock::time_point deadline,
                    bool drain_stream);

  // Enqueues one grouped ncclSend (to `to`) and ncclRecv (from `from`) on the stream, a side
  // skipped when its byte count is 0; returns the outcome of enqueueing, without waiting.
  absl::Status EnqueueSendRecv(int to, const void* send, size_t send_bytes, int from, void* recv,
                               size_t recv_bytes, const char* what);

  // Grows the device scratch of AllReduceSumCompressed to at least `bytes`.
  absl::Status EnsureCompressedScratch(size_t bytes);

  // ncclCommAbort (if there is a communicator) and remembers `status` as the reason; returns it.
  absl::Status Break(absl::Status status);

  // Adds `sent` / `received` bytes to the counters.
  void Count(int64_t sent, int64_t received);
  // 2(N-1)·bytes / N: a ring all-reduce's per-rank payload.
  int64_t AllReduceBytes(size_t bytes) const;

  const int rank_;
  const int size_;
  const int device_;
  const std::chrono::milliseconds timeout_;

  ncclComm* comm_ = nullptr;          // ncclComm_t; null until initialized and after abort
  CUstream_st* stream_ = nullptr;     // cudaStream_t, non-blocking w.r.t. the legacy stream
  float* barrier_scratch_ = nullptr;  // one device float for Barrier()
  CUevent_st* ready_event_ = nullptr;     // cudaEvent_t of WaitForStream (re-recorded)
  uint8_t* compressed_scratch_ = nullptr;  // AllReduceSumCompressed's slots (grow-only)
  size_t compressed_scratch_bytes_ = 0;
  absl::Status broken_;               // first fatal error; OK while usable

  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};
  std::atomic<int64_t> stream_polls_{0};
  std::atomic<int64_t> progress_polls_{0};
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_NCCL_NCCL_COMMUNICATOR_H_
