#include "runtime/comm/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/comm/collectives.h"
#include "runtime/comm/nccl/cuda_check.h"

// Non-blocking communicators (ncclConfig_t::blocking) and ncclCommFinalize arrived in 2.14; they
// are what lets init, collectives and shutdown honour a timeout.
static_assert(NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0), "hptrain needs NCCL 2.14 or newer");

namespace hptrain::comm {
namespace {

using Clock = std::chrono::steady_clock;

// Makes `device` current for the scope and restores the caller's device: collectives may be
// issued from any thread, and a caller's current device is not ours to change.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    status_ = HPTRAIN_CUDA_STATUS(cudaGetDevice(&saved_), "cudaGetDevice");
    if (status_.ok() && saved_ != device) {
      status_ = HPTRAIN_CUDA_STATUS(cudaSetDevice(device), "cudaSetDevice");
      restore_ = status_.ok();
    }
  }
  ~ScopedDevice() {
    if (restore_) cudaSetDevice(saved_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
  int saved_ = 0;
  bool restore_ = false;
};

// A non-blocking communicator's calls answer ncclSuccess or ncclInProgress when all is well.
absl::Status EnqueuedStatus(ncclResult_t result, const char* what, const char* file, int line) {
  if (result == ncclInProgress) return absl::OkStatus();
  return NcclStatus(result, what, file, line);
}
#define HPTRAIN_NCCL_ENQUEUED(result, what) EnqueuedStatus((result), (what), __FILE__, __LINE__)

// What every call on a broken communicator returns.
absl::Status Unusable(const absl::Status& broken, int rank, int size) {
  return absl::FailedPreconditionError(absl::StrCat("NCCL communicator (rank ", rank, " of ", size,
                                                    ") was aborted after: ", broken.message()));
}

std::chrono::milliseconds Remaining(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

// The Work of an asynchronous collective: an event recorded behind it on the communicator's
// stream, and the stream that consumes its buffer.
class DeviceWork : public Work {
 public:
  DeviceWork(std::chrono::milliseconds timeout, int device, cudaEvent_t done, void* consumer,
             int64_t sent, int64_t received)
      : Work(timeout), device_(device), done_(done), consumer_(consumer) {
    SetResult(sent, received);
  }
  ~DeviceWork() override { cudaEventDestroy(done_); }  // released once the event has occurred

  bool IsCompleted() const override {
    const cudaError_t query = cudaEventQuery(done_);
    return query != cudaErrorNotReady;  // done, or failed: final either way
  }

  absl::Status Wait(std::chrono::milliseconds) override {
    ScopedDevice scoped(device_);
    HPTRAIN_RETURN_IF_ERROR(scoped.status());
    const cudaError_t query = cudaEventQuery(done_);
    if (query != cudaSuccess && query != cudaErrorNotReady) {
      return HPTRAIN_CUDA_STATUS(query, "the all-reduce's completion event");
    }
    return HPTRAIN_CUDA_STATUS(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(consumer_), done_, 0),
        "cudaStreamWaitEvent (the consumer's stream after the all-reduce)");
  }

 private:
  const int device_;
  const cudaEvent_t done_;
  void* const consumer_;
};

}  // namespace

NcclCommunicator::NcclCommunicator(int rank, int size, int device,
                                   std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), device_(device), timeout_(timeout) {}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    KeyValueStore& store, int rank, int size, int device, std::chrono::milliseconds timeout,
    const std::string& key_prefix) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL communicator: rank ", rank, " of size ", size, " is out of range"));
  }
  if (device < 0) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL communicator: bad device ", device));
  }
  if (timeout <= std::chrono::milliseconds(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL communicator: timeout must be positive, got ", timeout.count(), " ms"));
  }
  int count = 0;
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (device >= count) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL communicator: device ", device,
                                                   " requested, but only ", count, " present"));
  }
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));

  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(rank, size, device, timeout));
  HPTRAIN_RETURN_IF_ERROR(comm->Init(store, key_prefix), "NCCL rendezvous of rank ", rank, " of ",
                          size, " on device ", device);
  return comm;
}

absl::Status NcclCommunicator::Init(KeyValueStore& store, const std::string& key_prefix) {
  // Non-blocking w.r.t. the legacy default stream: unrelated work of the caller on stream 0 must
  // neither wait for a collective nor make one wait.
  cudaStream_t stream = nullptr;
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
  // The barrier's value is never read, so the scratch float needs no initialization.
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&barrier_scratch_, sizeof(float)));
  cudaEvent_t ready = nullptr;
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  ready_event_ = ready;

  const Clock::time_point deadline = Clock::now() + timeout_;
  const std::string key = absl::StrCat(key_prefix, "/unique_id");
  ncclUniqueId id;
  if (rank_ == 0) {
    HPTRAIN_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    HPTRAIN_RETURN_IF_ERROR(store.Set(key, std::string(id.internal, sizeof(id.internal))),
                            "publishing the NCCL unique id under \"", key, "\"");
  } else {
    absl::StatusOr<std::string> value = store.Get(key, Remaining(deadline));
    if (!value.ok()) {
      return Annotate(value.status(),
                      absl::StrCat("waiting for rank 0's NCCL unique id under \"", key, "\""));
    }
    if (value->size() != sizeof(id.internal)) {
      return absl::InvalidArgumentError(absl::StrCat("NCCL unique id under \"", key, "\" has ",
                                                     value->size(), " bytes, expected ",
                                                     sizeof(id.internal)));
    }
    std::memcpy(id.internal, value->data(), sizeof(id.internal));
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t handle = nullptr;
  absl::Status started = HPTRAIN_NCCL_ENQUEUED(
      ncclCommInitRankConfig(&handle, size_, id, rank_, &config), "ncclCommInitRankConfig");
  comm_ = handle;
  if (!started.ok()) return Break(started);
  absl::Status joined = Poll("ncclCommInitRankConfig", deadline, /*drain_stream=*/false);
  if (!joined.ok()) return Break(joined);
  return absl::OkStatus();
}

NcclCommunicator::~NcclCommunicator() {
  // Errors are ignored: there is no caller left to tell, and leaking is better than aborting.
  int saved = 0;
  const bool restore = cudaGetDevice(&saved) == cudaSuccess;
  cudaSetDevice(device_);
  if (comm_ != nullptr) {
    // Finalize is collective (it waits for the peers to quiesce); if a peer is gone it would
    // hang, so it gets the timeout and falls back to abort.
    ncclResult_t finalizing = ncclCommFinalize(comm_);
    bool finalized = (finalizing == ncclSuccess || finalizing == ncclInProgress) &&
                     Poll("ncclCommFinalize", Clock::now() + timeout_, false).ok();
    if (finalized) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }
  if (barrier_scratch_ != nullptr) cudaFree(barrier_scratch_);
  if (ready_event_ != nullptr) cudaEventDestroy(ready_event_);
  if (compressed_scratch_ != nullptr) cudaFree(compressed_scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (restore) cudaSetDevice(saved);
}

absl::Status NcclCommunicator::Poll(const char* what, Clock::time_point deadline,
                                    bool drain_stream) {
  const Clock::time_point start = Clock::now();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    HPTRAIN_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(comm_, &state));
    if (state != ncclSuccess && state != ncclInProgress) {
      return HPTRAIN_NCCL_STATUS(state, what);
    }
    // Until NCCL leaves ncclInProgress the work may not be on the stream yet, so an idle stream
    // proves nothing before then.
    if (state == ncclSuccess) {
      if (!drain_stream) return absl::OkStatus();
      cudaError_t query = cudaStreamQuery(stream_);
      if (query == cudaSuccess) return absl::OkStatus();
      if (query != cudaErrorNotReady) return HPTRAIN_CUDA_STATUS(query, what);
      stream_polls_.fetch_add(1, std::memory_order_relaxed);
    } else {
      progress_polls_.fetch_add(1, std::memory_order_relaxed);
    }
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          what, " did not complete within ", timeout_.count(), " ms (rank ", rank_, " of ", size_,
          "; a peer is missing, stuck or issued a different collective)"));
    }
    // Spin briefly for latency-bound collectives, then stop burning a core on long ones.
    if (now - start < std::chrono::milliseconds(1)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

absl::Status NcclCommunicator::Break(absl::Status status) {
  if (comm_ != nullptr) {
    // After an error or a timeout nothing can be assumed about in-flight work; abort is the only
    // safe way out and also unblocks kernels still waiting on peers.
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  if (broken_.ok()) broken_ = status;
  return status;
}

absl::Status NcclCommunicator::Complete(const absl::Status& enqueued, const char* what) {
  if (!enqueued.ok()) return Break(enqueued);
  absl::Status done = Poll(what, Clock::now() + timeout_, /*drain_stream=*/true);
  if (!done.ok()) return Break(done);
  return absl::OkStatus();
}

void NcclCommunicator::Count(int64_t sent, int64_t received) {
  bytes_sent_.fetch_add(sent, std::memory_order_relaxed);
  bytes_received_.fetch_add(received, std::memory_order_relaxed);
}

int64_t NcclCommunicator::AllReduceBytes(size_t bytes) const {
  return 2 * static_cast<int64_t>(size_ - 1) * static_cast<int64_t>(bytes) / size_;
}

absl::Status NcclCommunicator::AllReduceSum(float* data, size_t count) {
  if (!broken_.ok()) return Unusable(broken_, rank_, size_);
  if (count == 0) return absl::OkStatus();
  if (data == nullptr) return absl::InvalidArgumentError("NCCL all-reduce of a null buffer");
  if (size_ == 1) return absl::OkStatus();  // the sum of one rank's buffer is that buffer
  ScopedDevice scoped(device_);
  HPTRAIN_RETURN_IF_ERROR(scoped.status());
  const std::string what =
      absl::StrCat("ncclAllReduce of ", count, " floats (rank ", rank_, " of ", size_, ")");
  const absl::Status enqueued = HPTRAIN_NCCL_ENQUEUED(
      ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_), what.c_str());
  HPTRAIN_RETURN_IF_ERROR(Complete(enqueued, what.c_str()));
  const int64_t bytes = AllReduceBytes(count * sizeof(float));
  Count(bytes, bytes);
  return absl::OkStatus();
}

std::shared_ptr<Work> NcclCommunicator::AllReduceSumAsync(const BufferRef& buffer) {
  if (buffer.location != Location::kDevice) {
    return Work::Done(absl::InvalidArgumentError("NCCL all-reduce of a host buffer"));
  }
  if (!broken_.ok()) return Work::Done(Unusable(broken_, rank_, size_));
  if (buffer.count == 0) return Work::Done(absl::OkStatus());
  if (buffer.data == nullptr) {
    return Work::Done(absl::InvalidArgumentError("NCCL all-reduce of a null buffer"));
  }
  // The sum of one rank's buffer is that buffer: no NCCL call and no event, as in AllReduceSum
  // (a one-worker GPU run issues one collective per bucket and step).
  if (size_ == 1) return Work::Done(absl::OkStatus());
  ScopedDevice scoped(device_);
  if (!scoped.status().ok()) return Work::Done(scoped.status());
  const std::string what = absl::StrCat("asynchronous ncclAllReduce of ", buffer.count,
                                        " floats (rank ", rank_, " of ", size_, ")");
  cudaEvent_t done = nullptr;
  absl::Status created =
      HPTRAIN_CUDA_STATUS(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), what.c_str());
  if (!created.ok()) return Work::Done(created);
  float* data = buffer.floats();
  absl::Status enqueued = HPTRAIN_NCCL_ENQUEUED(
      ncclAllReduce(data, data, buffer.count, ncclFloat32, ncclSum, comm_, stream_),
      what.c_str());
  // Until NCCL has put the collective on the stream (it may answer ncclInProgress while it
  // connects), an event recorded there would not be behind it.
  if (enqueued.ok()) enqueued = Poll(what.c_str(), Clock::now() + timeout_, false);
  if (enqueued.ok()) enqueued = HPTRAIN_CUDA_STATUS(cudaEventRecord(done, stream_), what.c_str());
  if (!enqueued.ok()) {
    cudaEventDestroy(done);
    return Work::Done(Break(enqueued));
  }
  const int64_t bytes = AllReduceBytes(buffer.count * sizeof(float));
  Count(bytes, bytes);
  return std::make_shared<DeviceWork>(timeout_, device_, done, buffer.stream, bytes, bytes);
}

absl::Status NcclCommunicator::WaitForStream(void* stream) {
  if (!broken_.ok()) return Unusable(broken_, rank_, size_);
  ScopedDevice scoped(device_);
  HPTRAIN_RETURN_IF_ERROR(scoped.status());
  // One event, re-recorded: a stream wait takes the record current at its call.
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaEventRecord(ready_event_, static_cast<cudaStream_t>(stream)));
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, ready_event_, 0));
  return absl::OkStatus();
}

absl::Status NcclCommunicator::AllReduceSumCompressed(float* data, size_t count,
                                                      ChunkCodec& codec) {
  if (!broken_.ok()) return Unusable(broken_, rank_, size_);
  if (!codec.on_device()) {
    return absl::InvalidArgumentError(
        "NCCL compressed all-reduce needs a device codec (runtime/sync/codecs/device_codecs.h)");
  }
  if (count == 0) return absl::OkStatus();
  if (data == nullptr) return absl::InvalidArgumentError("NCCL all-reduce of a null buffer");
  ScopedDevice scoped(device_);
  HPTRAIN_RETURN_IF_ERROR(scoped.status());
  const int n = size_;
  const int r = rank_;
  const std::string what = absl::StrCat("compressed all-reduce of ", count, " floats (rank ", r,
                                        " of ", n, ")");
  auto mod = [n](int x) { return RingIndex(x, n); };
  auto range = [&](int chunk, size_t* b, size_t* e) { ChunkRange(count, n, chunk, b, e); };
  auto encoded_size = [&](int chunk) {
    size_t b, e;
    range(chunk, &b, &e);
    return codec.EncodedBytes(e - b);
  };
  // Three slots: what this rank encodes, and two receive slots (the all-gather forwards the
  // previous step's while receiving the next). One stream orders every use of a slot after the
  // last, so the slots are reused from step to step. 16-byte aligned for the codecs' floats.
  const size_t slot = (codec.EncodedBytes(n == 1 ? count : (count + n - 1) / n) + 15) / 16 * 16;
  HPTRAIN_RETURN_IF_ERROR(EnsureCompressedScratch(3 * slot), what);
  uint8_t* out = compressed_scratch_;
  uint8_t* in[2] = {compressed_scratch_ + slot, compressed_scratch_ + 2 * slot};
  // n - 1 encodes in the reduce-scatter and the owner's one.
  HPTRAIN_RETURN_IF_ERROR(codec.BeginDevice(stream_, n), what);
  int64_t sent = 0, received = 0;

  // The ring of compressed_ring_allreduce.cc, each step's transfer one grouped ncclSend/ncclRecv
  // on the stream, between the codec's kernels. Until NCCL has put the transfer on the stream
  // (Poll without draining) nothing may be enqueued behind it.
  auto transfer = [&](const uint8_t* send, size_t send_bytes, uint8_t* recv,
                      size_t recv_bytes) -> absl::Status {
    HPTRAIN_RETURN_IF_ERROR(EnqueueSendRecv(mod(r + 1), send, send_bytes, mod(r - 1), recv,
                                            recv_bytes, what.c_str()));
    HPTRAIN_RETURN_IF_ERROR(Poll(what.c_str(), Clock::now() + timeout_, /*drain_stream=*/false));
    sent += static_cast<int64_t>(send_bytes);
    received += static_cast<int64_t>(recv_bytes);
    return absl::OkStatus();
  };
  auto ring = [&]() -> absl::Status {
    if (n == 1) {
      // One rank: the codec still applies, as on the CPU ring.
      HPTRAIN_RETURN_IF_ERROR(codec.Encode(data, count, 0, 0, out));
      return codec.Decode(out, codec.EncodedBytes(count), count, data);
    }
    // Reduce-scatter: step s sends chunk (r - s) and adds the incoming chunk (r - s - 1).
    for (int s = 0; s < n - 1; ++s) {
      size_t b, e;
      range(mod(r - s), &b, &e);
      HPTRAIN_RETURN_IF_ERROR(codec.Encode(data + b, e - b, b, static_cast<uint64_t>(s), out),
                              "encoding chunk ", mod(r - s), " in reduce-scatter step ", s + 1);
      const size_t incoming = encoded_size(mod(r - s - 1));
      HPTRAIN_RETURN_IF_ERROR(transfer(out, encoded_size(mod(r - s)), in[0], incoming));
      range(mod(r - s - 1), &b, &e);
      HPTRAIN_RETURN_IF_ERROR(codec.DecodeAccumulate(in[0], incoming, e - b, data + b));
    }
    // The owner encodes its reduced chunk once and keeps what the others will decode.
    size_t ob, oe;
    const int owned = mod(r + 1);
    range(owned, &ob, &oe);
    HPTRAIN_RETURN_IF_ERROR(codec.Encode(data + ob, oe - ob, ob, static_cast<uint64_t>(n), out),
                            "encoding reduced chunk ", owned);
    HPTRAIN_RETURN_IF_ERROR(codec.Decode(out, encoded_size(owned), oe - ob, data + ob));
    // All-gather: step 0 sends the owned chunk, step s forwards what step s - 1 received.
    for (int s = 0; s < n - 1; ++s) {
      const uint8_t* send = s == 0 ? out : in[(s - 1) % 2];
      const size_t incoming = encoded_size(mod(r - s));
      HPTRAIN_RETURN_IF_ERROR(transfer(send, encoded_size(mod(r + 1 - s)), in[s % 2], incoming));
      size_t b, e;
      range(mod(r - s), &b, &e);
      HPTRAIN_RETURN_IF_ERROR(codec.Decode(in[s % 2], incoming, e - b, data + b));
    }
    return absl::OkStatus();
  };
  // A failure part-way leaves the peers waiting on this rank's transfers: abort, so that they
  // fail too instead of hanging.
  if (absl::Status done = ring(); !done.ok()) return Break(Annotate(done, StatusContext(what)));
  HPTRAIN_RETURN_IF_ERROR(Complete(absl::OkStatus(), what.c_str()));
  Count(sent, received);
  // A non-finite gradient: every rank finished the collective, so the communicator stays usable.
  return Annotate(codec.FinishDevice(), StatusContext(what));
}

absl::Status NcclCommunicator::EnqueueSendRecv(int to, const void* send, size_t send_bytes,
                                               int from, void* recv, size_t recv_bytes,
                                               const char* what) {
  // Grouped: NCCL matches the pair as one operation, so every rank of a ring may send first.
  // A non-blocking communicator may answer ncclInProgress to any of these calls.
  auto going = [](ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; };
  ncclResult_t result = ncclGroupStart();
  if (going(result) && send_bytes > 0) {
    result = ncclSend(send, send_bytes, ncclUint8, to, comm_, stream_);
  }
  if (going(result) && recv_bytes > 0) {
    result = ncclRecv(recv, recv_bytes, ncclUint8, from, comm_, stream_);
  }
  const ncclResult_t ended = ncclGroupEnd();
  if (going(result)) result = ended;
  return HPTRAIN_NCCL_ENQUEUED(result, what);
}

absl::Status NcclCommunicator::EnsureCompressedScratch(size_t bytes) {
  if (bytes <= compressed_scratch_bytes_) return absl::OkStatus();
  // Every collective drains the stream before returning: nothing uses the old buffer now.
  if (compressed_scratch_ != nullptr) cudaFree(compressed_scratch_);
  compressed_scratch_ = nullptr;
  compressed_scratch_bytes_ = 0;
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&compressed_scratch_, bytes));
  compressed_scratch_bytes_ = bytes;
  return absl::OkStatus();
}

absl::Status NcclCommunicator::AllGather(const void* send, void* recv, size_t block_bytes) {
  if (!broken_.ok()) return Unusable(broken_, rank_, size_);
  if (block_bytes == 0) return absl::OkStatus();
  if (send == nullptr || recv == nullptr) {
    return absl::InvalidArgumentError("NCCL all-gather with a null buffer");
  }
  ScopedDevice scoped(device_);
  HPTRAIN_RETURN_IF_ERROR(scoped.status());
  const std::string what = absl::StrCat("ncclAllGather of ", block_bytes, " bytes per rank (rank ",
                                        rank_, " of ", size_, ")");
  const absl::Status enqueued = HPTRAIN_NCCL_ENQUEUED(
      ncclAllGather(send, recv, block_bytes, ncclUint8, comm_, stream_), what.c_str());
  HPTRAIN_RETURN_IF_ERROR(Complete(enqueued, what.c_str()));
  const int64_t bytes = static_cast<int64_t>(size_ - 1) * static_cast<int64_t>(block_bytes);
  Count(bytes, bytes);
  return absl::OkStatus();
}

absl::Status NcclCommunicator::ReduceScatterSum(const float* send, float* recv,
                                                size_t recv_count) {
  if (!broken_.ok()) return Unusable(broken_, rank_, size_);
  if (recv_count == 0) return absl::OkStatus();
  if (send == nullptr || recv == nullptr) {
    return absl::InvalidArgumentError("NCCL reduce-scatter with a null buffer");
  }
  ScopedDevice scoped(device_);
  HPTRAIN_RETURN_IF_ERROR(scoped.status());
  const std::string what = absl::StrCat("ncclReduceScatter of ", recv_count,
                                        " floats per rank (rank ", rank_, " of ", size_, ")");
  const absl::Status enqueued = HPTRAIN_NCCL_ENQUEUED(
      ncclReduceScatter(send, recv, recv_count, ncclFloat32, ncclSum, comm_, stream_),
      what.c_str());
  HPTRAIN_RETURN_IF_ERROR(Complete(enqueued, what.c_str()));
  const int64_t bytes =
      static_cast<int64_t>(size_ - 1) * static_cast<int64_t>(recv_count * sizeof(float));
  Count(bytes, bytes);
  return absl::OkStatus();
}

absl::Status NcclCommunicator::SendRecv(int to, const void* send, size_t send_bytes, int from,
                                        void* recv, size_t recv_bytes) {
  if (!broken_.ok()) return Unusable(broken_, rank_, size_);
  if ((send_bytes > 0 && (to < 0 || to >= size_)) ||
      (recv_bytes > 0 && (from < 0 || from >= size_))) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL send/recv: rank ", to, " / ", from,
                                                   " outside [0, ", size_, ")"));
  }
  if (send_bytes == 0 && recv_bytes == 0) return absl::OkStatus();
  if ((send_bytes > 0 && send == nullptr) || (recv_bytes > 0 && recv == nullptr)) {
    return absl::InvalidArgumentError("NCCL send/recv with a null buffer");
  }
  ScopedDevice scoped(device_);
  HPTRAIN_RETURN_IF_ERROR(scoped.status());
  const std::string what = absl::StrCat("ncclSend of ", send_bytes, " bytes to rank ", to,
                                        " and ncclRecv of ", recv_bytes, " bytes from rank ",
                                        from, " (rank ", rank_, " of ", size_, ")");
  HPTRAIN_RETURN_IF_ERROR(Complete(
      EnqueueSendRecv(to, send, send_bytes, from, recv, recv_bytes, what.c_str()), what.c_str()));
  Count(static_cast<int64_t>(send_bytes), static_cast<int64_t>(recv_bytes));
  return absl::OkStatus();
}

absl::Status NcclCommunicator::AllGatherV(const void* send, size_t send_bytes,
                                          std::vector<std::string>* blocks) {
  if (!broken_.ok()) return Unusable(broken_, rank_, size_);
  ScopedDevice scoped(device_);
  HPTRAIN_RETURN_IF_ERROR(scoped.status());
  // 1. Every rank's size, gathered on the device.
  uint64_t* sizes_device = nullptr;
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&sizes_device, sizeof(uint64_t) * size_));
  std::vector<uint64_t> sizes(size_);
  const uint64_t mine = send_bytes;
  absl::Status status = HPTRAIN_CUDA_STATUS(
      cudaMemcpy(sizes_device + rank_, &mine, sizeof(mine), cudaMemcpyHostToDevice),
      "copying the all-gather-v size");
  if (status.ok()) status = AllGather(sizes_device + rank_, sizes_device, sizeof(uint64_t));
  if (status.ok()) {
    status = HPTRAIN_CUDA_STATUS(cudaMemcpy(sizes.data(), sizes_device, sizeof(uint64_t) * size_,
                                            cudaMemcpyDeviceToHost),
                                 "reading the all-gather-v sizes");
  }
  cudaFree(sizes_device);
  HPTRAIN_RETURN_IF_ERROR(status);
  // 2. One broadcast per rank, each into a scratch buffer of that rank's size.
  blocks->assign(size_, std::string());
  for (int j = 0; j < size_; ++j) {
    (*blocks)[j].resize(sizes[j]);
    if (sizes[j] == 0) continue;
    void* scratch = nullptr;
    HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch, sizes[j]));
    status = j == rank_ ? HPTRAIN_CUDA_STATUS(cudaMemcpy(scratch, send, sizes[j],
                                                         cudaMemcpyDeviceToDevice),
                                              "copying the all-gather-v block")
                        : absl::OkStatus();
    if (status.ok()) status = Broadcast(scratch, sizes[j], j);
    if (status.ok()) {
      status = HPTRAIN_CUDA_STATUS(
          cudaMemcpy((*blocks)[j].data(), scratch, sizes[j], cudaMemcpyDeviceToHost),
          "reading an all-gather-v block");
    }
    cudaFree(scratch);
    HPTRAIN_RETURN_IF_ERROR(status, "all-gather-v block of rank ", j);
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::AllGatherVInto(const void* send, const std::vector<size_t>& sizes,
                                              void* recv) {
  if (!broken_.ok()) return Unusable(broken_, rank_, size_);
  if (sizes.size() != static_cast<size_t>(size_)) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL all-gather-v: ", sizes.size(),
                                                   " block sizes for ", size_, " ranks"));
  }
  const int n = size_;
  const int r = rank_;
  std::vector<size_t> offsets(n + 1, 0);
  for (int j = 0; j < n; ++j) offsets[j + 1] = offsets[j] + sizes[j];
  if (offsets[n] == 0) return absl::OkStatus();
  if (recv == nullptr || (sizes[r] > 0 && send == nullptr)) {
    return absl::InvalidArgumentError("NCCL all-gather-v with a null buffer");
  }
  ScopedDevice scoped(device_);
  HPTRAIN_RETURN_IF_ERROR(scoped.status());
  const std::string what = absl::StrCat("all-gather-v of ", offsets[n], " bytes (rank ", r,
                                        " of ", n, ")");
  auto* base = static_cast<uint8_t*>(recv);
  if (sizes[r] > 0 && send != base + offsets[r]) {
    HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(base + offsets[r], send, sizes[r],
                                                 cudaMemcpyDeviceToDevice, stream_));
  }
  int64_t sent = 0, received = 0;
  auto ring = [&]() -> absl::Status {
    for (int s = 0; s < n - 1; ++s) {
      const int out = RingIndex(r - s, n);
      const int in = RingIndex(r - s - 1, n);
      HPTRAIN_RETURN_IF_ERROR(EnqueueSendRecv(RingIndex(r + 1, n), base + offsets[out],
                                              sizes[out], RingIndex(r - 1, n), base + offsets[in],
                                              sizes[in], what.c_str()));
      HPTRAIN_RETURN_IF_ERROR(Poll(what.c_str(), Clock::now() + timeout_, /*drain_stream=*/false));
      sent += static_cast<int64_t>(sizes[out]);
      received += static_cast<int64_t>(sizes[in]);
    }
    return absl::OkStatus();
  };
  if (absl::Status done = ring(); !done.ok()) return Break(Annotate(done, StatusContext(what)));
  HPTRAIN_RETURN_IF_ERROR(Complete(absl::OkStatus(), what.c_str()));
  Count(sent, received);
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Broadcast(void* data, size_t bytes, int root) {
  if (!broken_.ok()) return Unusable(broken_, rank_, size_);
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL broadcast root ", root, " is not a rank of ", size_));
  }
  if (bytes == 0) return absl::OkStatus();
  if (data == nullptr) return absl::InvalidArgumentError("NCCL broadcast of a null buffer");
  if (size_ == 1) return absl::OkStatus();  // the root's buffer is already everyone's
  ScopedDevice scoped(device_);
  HPTRAIN_RETURN_IF_ERROR(scoped.status());
  const std::string what = absl::StrCat("ncclBroadcast of ", bytes, " bytes from rank ", root,
                                        " (rank ", rank_, " of ", size_, ")");
  const absl::Status enqueued = HPTRAIN_NCCL_ENQUEUED(
      ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_), what.c_str());
  HPTRAIN_RETURN_IF_ERROR(Complete(enqueued, what.c_str()));
  if (size_ > 1) {
    const int64_t payload = static_cast<int64_t>(bytes);
    if (rank_ == root) {
      Count(payload, 0);
    } else {
      Count(0, payload);
    }
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Barrier() {
  if (!broken_.ok()) return Unusable(broken_, rank_, size_);
  if (size_ == 1) return absl::OkStatus();
  ScopedDevice scoped(device_);
  HPTRAIN_RETURN_IF_ERROR(scoped.status());
  const std::string what = absl::StrCat("NCCL barrier (rank ", rank_, " of ", size_, ")");
  const absl::Status enqueued = HPTRAIN_NCCL_ENQUEUED(
      ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclFloat32, ncclSum, comm_, stream_),
      what.c_str());
  HPTRAIN_RETURN_IF_ERROR(Complete(enqueued, what.c_str()));
  const int64_t bytes = AllReduceBytes(sizeof(float));
  Count(bytes, bytes);
  return absl::OkStatus();
}

}  // namespace hptrain::comm
