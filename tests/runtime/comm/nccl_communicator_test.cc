#include "runtime/comm/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <iostream>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "runtime/base/status.h"
#include "runtime/comm/kv_store.h"
#include "runtime/comm/nccl/cuda_check.h"
#include "tests/cuda_test_util.h"
#include "tests/runtime/comm/spawn.h"

namespace hptrain::comm {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using cuda_test::NoCudaDeviceReason;

// A cudaMalloc'ed buffer, freed on scope exit. Not tests/cuda_test_util.h's: that one's Download()
// synchronizes the device, which two ranks on one GPU must not do (see ThreadBarrier).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) { status_ = cudaMalloc(&ptr_, bytes); }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  cudaError_t status() const { return status_; }
  void* get() const { return ptr_; }
  float* floats() const { return static_cast<float*>(ptr_); }

  template <typename T>
  cudaError_t Upload(const std::vector<T>& host) {
    return cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice);
  }
  template <typename T>
  cudaError_t Download(std::vector<T>* host) const {
    host->resize(bytes_ / sizeof(T));
    return cudaMemcpy(host->data(), ptr_, bytes_, cudaMemcpyDeviceToHost);
  }

 private:
  size_t bytes_;
  void* ptr_ = nullptr;
  cudaError_t status_;
};

// Lets threads wait for each other (C++17 has no std::barrier). Two ranks on one GPU need it:
// a host-side CUDA call that synchronizes the device must not run while a peer's NCCL kernel
// waits for this rank.
class ThreadBarrier {
 public:
  explicit ThreadBarrier(int parties) : parties_(parties) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const int generation = generation_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int parties_;
  int arrived_ = 0;
  int generation_ = 0;
};

TEST(CudaCheck, CudaErrorsCarryNameTextAndPlace) {
  absl::Status status = CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(&p, n)", "x.cc", 12);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("cudaMalloc(&p, n): cudaErrorMemoryAllocation"),
            absl::string_view::npos)
      << status;
  EXPECT_NE(status.message().find("(x.cc:12)"), absl::string_view::npos) << status;
  EXPECT_TRUE(CudaStatus(cudaSuccess, "ok", "x.cc", 1).ok());
  EXPECT_EQ(CudaStatus(cudaErrorInvalidValue, "f", "x.cc", 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaStatus(cudaErrorNoDevice, "f", "x.cc", 1).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(CudaCheck, NcclResultsMapToStatusCodes) {
  EXPECT_TRUE(NcclStatus(ncclSuccess, "ok", "y.cc", 1).ok());
  absl::Status usage = NcclStatus(ncclInvalidUsage, "ncclCommInitRank", "y.cc", 7);
  EXPECT_EQ(usage.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(usage.message().find(ncclGetErrorString(ncclInvalidUsage)), absl::string_view::npos)
      << usage;
  EXPECT_NE(usage.message().find("(y.cc:7)"), absl::string_view::npos) << usage;
  EXPECT_EQ(NcclStatus(ncclRemoteError, "f", "y.cc", 1).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(NcclStatus(ncclInvalidArgument, "f", "y.cc", 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclStatus(ncclUnhandledCudaError, "f", "y.cc", 1).code(), absl::StatusCode::kInternal);
}

absl::Status ReturnsThroughMacros(cudaError_t cuda, ncclResult_t nccl) {
  HPTRAIN_CUDA_RETURN_IF_ERROR(cuda);
  HPTRAIN_NCCL_RETURN_IF_ERROR(nccl);
  return absl::OkStatus();
}

TEST(CudaCheck, MacrosReturnOnlyOnError) {
  EXPECT_TRUE(ReturnsThroughMacros(cudaSuccess, ncclSuccess).ok());
  EXPECT_EQ(ReturnsThroughMacros(cudaErrorInvalidDevice, ncclSuccess).code(),
            absl::StatusCode::kInvalidArgument);
  // ncclInProgress is not success for the strict macro.
  EXPECT_EQ(ReturnsThroughMacros(cudaSuccess, ncclInProgress).code(),
            absl::StatusCode::kUnavailable);
}

TEST(NcclCommunicator, RejectsBadArgumentsBeforeTouchingCuda) {
  InMemoryStore store;
  for (auto [rank, size, device, timeout] : std::vector<std::tuple<int, int, int, int>>{
           {0, 0, 0, 1000}, {2, 2, 0, 1000}, {-1, 2, 0, 1000}, {0, 1, -1, 1000}, {0, 1, 0, 0}}) {
    auto comm = NcclCommunicator::Create(store, rank, size, device, milliseconds(timeout));
    EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument)
        << rank << "/" << size << " dev " << device << ": " << comm.status();
  }
}

TEST(NcclCommunicator, CreateWithoutADeviceReturnsAnError) {
  if (NoCudaDeviceReason().empty()) GTEST_SKIP() << "a CUDA device is present";
  InMemoryStore store;
  auto comm = NcclCommunicator::Create(store, 0, 1, 0, seconds(1));
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.status().message().find("cudaGetDeviceCount"), absl::string_view::npos)
      << comm.status();
}

TEST(NcclCommunicator, SingleRankCollectivesAreIdentity) {
  SKIP_WITHOUT_CUDA_DEVICE();
  InMemoryStore store;
  auto created = NcclCommunicator::Create(store, 0, 1, 0, seconds(30), "single");
  ASSERT_TRUE(created.ok()) << created.status();
  NcclCommunicator& comm = **created;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);

  const size_t count = 4097;
  std::vector<float> input(count);
  for (size_t i = 0; i < count; ++i) input[i] = 0.25f * static_cast<float>(i % 13) - 1.0f;
  DeviceBuffer data(count * sizeof(float));
  ASSERT_EQ(data.status(), cudaSuccess);
  ASSERT_EQ(data.Upload(input), cudaSuccess);

  ASSERT_TRUE(comm.AllReduceSum(data.floats(), count).ok());
  std::vector<float> output;
  ASSERT_EQ(data.Download(&output), cudaSuccess);
  EXPECT_EQ(output, input);

  ASSERT_TRUE(comm.Broadcast(data.get(), count * sizeof(float), 0).ok());
  ASSERT_EQ(data.Download(&output), cudaSuccess);
  EXPECT_EQ(output, input);

  DeviceBuffer gathered(count * sizeof(float));
  ASSERT_EQ(gathered.status(), cudaSuccess);
  ASSERT_TRUE(comm.AllGather(data.get(), gathered.get(), count * sizeof(float)).ok());
  ASSERT_EQ(gathered.Download(&output), cudaSuccess);
  EXPECT_EQ(output, input);

  EXPECT_TRUE(comm.Barrier().ok());
  EXPECT_TRUE(comm.AllReduceSum(nullptr, 0).ok());
  EXPECT_EQ(comm.Broadcast(data.get(), 4, 1).code(), absl::StatusCode::kInvalidArgument);
  // One rank moves nothing by any of the formulas.
  EXPECT_EQ(comm.bytes_sent(), 0);
  EXPECT_EQ(comm.bytes_received(), 0);
}

// Reduce-scatter and grouped send/recv with one rank: the sum is the input, and a rank may send
// to itself. The byte counters: (N-1)/N of the reduce-scatter's input (0 here) and exactly the
// point-to-point bytes.
TEST(NcclCommunicator, SingleRankReduceScatterAndSendRecv) {
  SKIP_WITHOUT_CUDA_DEVICE();
  InMemoryStore store;
  auto created = NcclCommunicator::Create(store, 0, 1, 0, seconds(30), "single_p2p");
  ASSERT_TRUE(created.ok()) << created.status();
  NcclCommunicator& comm = **created;

  const size_t count = 1031;
  std::vector<float> input(count);
  for (size_t i = 0; i < count; ++i) input[i] = 0.5f * static_cast<float>(i % 11) - 2.0f;
  DeviceBuffer send(count * sizeof(float)), recv(count * sizeof(float));
  ASSERT_EQ(send.Upload(input), cudaSuccess);
  ASSERT_EQ(recv.Upload(std::vector<float>(count, 0.0f)), cudaSuccess);
  ASSERT_TRUE(comm.ReduceScatterSum(send.floats(), recv.floats(), count).ok());
  std::vector<float> output;
  ASSERT_EQ(recv.Download(&output), cudaSuccess);
  EXPECT_EQ(output, input);
  EXPECT_EQ(comm.bytes_sent(), 0);

  ASSERT_EQ(recv.Upload(std::vector<float>(count, 0.0f)), cudaSuccess);
  absl::Status status =
      comm.SendRecv(0, send.get(), count * sizeof(float), 0, recv.get(), count * sizeof(float));
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(recv.Download(&output), cudaSuccess);
  EXPECT_EQ(output, input);
  EXPECT_EQ(comm.bytes_sent(), static_cast<int64_t>(count * sizeof(float)));
  EXPECT_EQ(comm.bytes_received(), static_cast<int64_t>(count * sizeof(float)));

  EXPECT_EQ(comm.SendRecv(1, send.get(), 4, 0, recv.get(), 4).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(comm.SendRecv(0, nullptr, 0, 0, nullptr, 0).ok());
}

// The all-gather-v into one device buffer with one rank: the rank's block lands at its offset,
// nothing is counted (no ring step), and sizes for another world size are refused.
TEST(NcclCommunicator, SingleRankAllGatherVInto) {
  SKIP_WITHOUT_CUDA_DEVICE();
  InMemoryStore store;
  auto created = NcclCommunicator::Create(store, 0, 1, 0, seconds(30), "single_gatherv");
  ASSERT_TRUE(created.ok()) << created.status();
  NcclCommunicator& comm = **created;
  EXPECT_NE(comm.device_stream(), nullptr);
  std::vector<uint8_t> block(100);
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<uint8_t>(3 * i + 1);
  DeviceBuffer send(block.size()), recv(block.size());
  ASSERT_EQ(send.Upload(block), cudaSuccess);
  absl::Status status = comm.AllGatherVInto(send.get(), {block.size()}, recv.get());
  ASSERT_TRUE(status.ok()) << status;
  std::vector<uint8_t> output;
  ASSERT_EQ(recv.Download(&output), cudaSuccess);
  EXPECT_EQ(output, block);
  EXPECT_EQ(comm.bytes_sent(), 0);
  EXPECT_EQ(comm.AllGatherVInto(send.get(), {4, 4}, recv.get()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(comm.AllGatherVInto(nullptr, {0}, nullptr).ok());
}

TEST(NcclCommunicator, TwoRanksOnOneDevice) {
  SKIP_WITHOUT_CUDA_DEVICE();
  constexpr int kRanks = 2;
  constexpr int kRoot = 1;
  constexpr size_t kCount = 1001;     // not a multiple of the rank count
  constexpr size_t kBlock = 24;       // all-gather bytes per rank
  constexpr size_t kBroadcast = 333;  // broadcast bytes

  // Every buffer is made and filled before the ranks start (see ThreadBarrier), on its rank's
  // GPU: rank r uses GPU r mod the GPUs present, so two GPUs give each rank its own.
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  std::vector<std::unique_ptr<DeviceBuffer>> sums, blocks, gathered, broadcast;
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaSetDevice(r % devices), cudaSuccess);
    std::vector<float> values(kCount);
    for (size_t i = 0; i < kCount; ++i) values[i] = static_cast<float>(r + 1 + i % 7);
    sums.push_back(std::make_unique<DeviceBuffer>(kCount * sizeof(float)));
    ASSERT_EQ(sums[r]->Upload(values), cudaSuccess);
    blocks.push_back(std::make_unique<DeviceBuffer>(kBlock));
    ASSERT_EQ(blocks[r]->Upload(std::vector<uint8_t>(kBlock, static_cast<uint8_t>(10 + r))),
              cudaSuccess);
    gathered.push_back(std::make_unique<DeviceBuffer>(kRanks * kBlock));
    ASSERT_EQ(gathered[r]->Upload(std::vector<uint8_t>(kRanks * kBlock, 0)), cudaSuccess);
    std::vector<uint8_t> bytes(kBroadcast);
    for (size_t i = 0; i < kBroadcast; ++i) bytes[i] = static_cast<uint8_t>(r == kRoot ? i : 0);
    broadcast.push_back(std::make_unique<DeviceBuffer>(kBroadcast));
    ASSERT_EQ(broadcast[r]->Upload(bytes), cudaSuccess);
  }

  InMemoryStore store;
  ThreadBarrier barrier(kRanks);
  std::vector<absl::Status> created(kRanks), ran(kRanks);
  std::vector<int64_t> sent(kRanks), received(kRanks);
  testing::Spawn(kRanks, [&](int r) {
    auto comm =
        NcclCommunicator::Create(store, r, kRanks, r % devices, seconds(30), "two_ranks");
    created[r] = comm.status();
    barrier.Wait();
    if (!created[0].ok() || !created[1].ok()) return;
    NcclCommunicator& c = **comm;
    ran[r] = [&]() -> absl::Status {
      HPTRAIN_RETURN_IF_ERROR(c.AllReduceSum(sums[r]->floats(), kCount), "all-reduce");
      HPTRAIN_RETURN_IF_ERROR(c.Broadcast(broadcast[r]->get(), kBroadcast, kRoot), "broadcast");
      HPTRAIN_RETURN_IF_ERROR(c.AllGather(blocks[r]->get(), gathered[r]->get(), kBlock),
                              "all-gather");
      return c.Barrier();
    }();
    sent[r] = c.bytes_sent();
    received[r] = c.bytes_received();
    barrier.Wait();  // nobody tears down while a peer's kernels may still run
    comm->reset();   // ncclCommFinalize is collective: both ranks shut down concurrently
  });

  for (int r = 0; r < kRanks; ++r) {
    if (!created[r].ok() && created[r].message().find("Duplicate GPU") != absl::string_view::npos) {
      GTEST_SKIP() << "this NCCL refuses two ranks on one GPU: " << created[r];
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(created[r].ok()) << "rank " << r << ": " << created[r];
    ASSERT_TRUE(ran[r].ok()) << "rank " << r << ": " << ran[r];
  }

  for (int r = 0; r < kRanks; ++r) {
    std::vector<float> sum;
    ASSERT_EQ(sums[r]->Download(&sum), cudaSuccess);
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(sum[i], static_cast<float>(3 + 2 * (i % 7))) << "rank " << r << " element " << i;
    }
    std::vector<uint8_t> bytes;
    ASSERT_EQ(broadcast[r]->Download(&bytes), cudaSuccess);
    for (size_t i = 0; i < kBroadcast; ++i) ASSERT_EQ(bytes[i], static_cast<uint8_t>(i));
    ASSERT_EQ(gathered[r]->Download(&bytes), cudaSuccess);
    for (size_t i = 0; i < kRanks * kBlock; ++i) {
      ASSERT_EQ(bytes[i], static_cast<uint8_t>(10 + i / kBlock)) << "rank " << r << " byte " << i;
    }
  }

  // The documented formulas with N = 2: all-reduce 2(N-1)/N·S = S each way; broadcast: the root
  // sends S, the other rank receives it; all-gather (N-1)·block; barrier a 4-byte all-reduce.
  const int64_t all_reduce = kCount * sizeof(float);
  const int64_t common = all_reduce + kBlock + 4;
  EXPECT_EQ(sent[0], common);
  EXPECT_EQ(received[0], common + static_cast<int64_t>(kBroadcast));
  EXPECT_EQ(sent[1], common + static_cast<int64_t>(kBroadcast));
  EXPECT_EQ(received[1], common);
}

// The asynchronous all-reduce with one rank: the sum is the input (returned at once, with no
// NCCL call, as the blocking one), Wait leaves a consumer stream usable, a host buffer is
// refused, and the host polls the stream not once (the counter the GPU run reports; the
// two-rank test below exercises the NCCL route itself).
TEST(NcclCommunicator, SingleRankAsyncAllReduce) {
  SKIP_WITHOUT_CUDA_DEVICE();
  constexpr size_t kCount = 1 << 16;
  std::vector<float> input(kCount);
  for (size_t i = 0; i < kCount; ++i) input[i] = 0.5f * static_cast<float>(i % 9) - 1.0f;
  DeviceBuffer data(kCount * sizeof(float));
  ASSERT_EQ(data.status(), cudaSuccess);
  ASSERT_EQ(data.Upload(input), cudaSuccess);
  cudaStream_t consumer = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  InMemoryStore store;
  auto created = NcclCommunicator::Create(store, 0, 1, 0, seconds(30), "single_async");
  ASSERT_TRUE(created.ok()) << created.status();
  NcclCommunicator& comm = **created;

  ASSERT_TRUE(comm.WaitForStream(consumer).ok());
  std::vector<std::shared_ptr<Work>> works;
  std::vector<int64_t> progress_polls;  // after each issue: NCCL still connecting
  for (int k = 0; k < 3; ++k) {
    works.push_back(comm.AllReduceSumAsync(BufferRef::Device(data.floats(), kCount, consumer)));
    progress_polls.push_back(comm.host_progress_polls());
  }
  for (auto& work : works) ASSERT_TRUE(work->Wait().ok());
  std::vector<float> output(kCount);
  ASSERT_EQ(cudaMemcpyAsync(output.data(), data.get(), kCount * sizeof(float),
                            cudaMemcpyDeviceToHost, consumer),
            cudaSuccess);
  const int64_t stream_polls = comm.host_stream_polls();
  ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  for (auto& work : works) {
    EXPECT_TRUE(work->IsCompleted());
    EXPECT_EQ(work->bytes_sent(), 0);  // 2(N-1)/N · S with N = 1
  }
  EXPECT_EQ(output, input);
  EXPECT_EQ(stream_polls, 0);
  std::cout << "nccl async route: 1 rank, 3 all-reduces: host stream polls " << stream_polls
            << ", host progress polls (NCCL enqueueing) after each issue " << progress_polls[0]
            << ", " << progress_polls[1] << ", " << progress_polls[2] << std::endl;

  float host = 1;
  std::shared_ptr<Work> refused = comm.AllReduceSumAsync(BufferRef::Host(&host, 1));
  EXPECT_TRUE(refused->IsCompleted());
  EXPECT_EQ(refused->Wait().code(), absl::StatusCode::kInvalidArgument);
  // The blocking all-reduce of one rank still returns at once, without NCCL.
  EXPECT_TRUE(comm.AllReduceSum(data.floats(), kCount).ok());
  EXPECT_EQ(comm.host_stream_polls(), 0);
  cudaStreamDestroy(consumer);
}

// Two ranks issue three asynchronous all-reduces each before waiting for any; Wait orders a
// consumer stream after them, and a copy on that stream sees the sums. The host polls the
// stream not once on this route (the counter the GPU run reports).
TEST(NcclCommunicator, TwoRanksAsyncAllReducesWaitOnTheConsumerStream) {
  SKIP_WITHOUT_CUDA_DEVICE();
  constexpr int kRanks = 2;
  constexpr int kBuckets = 3;
  constexpr size_t kCount = 1 << 16;
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  // Buffers and streams are made before the ranks start (see ThreadBarrier).
  std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> buckets(kRanks);
  std::vector<cudaStream_t> consumers(kRanks, nullptr);
  std::vector<std::vector<float>> host(kRanks, std::vector<float>(kBuckets * kCount));
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaSetDevice(r % devices), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&consumers[r], cudaStreamNonBlocking), cudaSuccess);
    for (int k = 0; k < kBuckets; ++k) {
      std::vector<float> values(kCount);
      for (size_t i = 0; i < kCount; ++i) values[i] = static_cast<float>(r + 1 + k + i % 5);
      buckets[r].push_back(std::make_unique<DeviceBuffer>(kCount * sizeof(float)));
      ASSERT_EQ(buckets[r][k]->Upload(values), cudaSuccess);
    }
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  InMemoryStore store;
  ThreadBarrier barrier(kRanks);
  std::vector<absl::Status> created(kRanks), ran(kRanks);
  std::vector<int64_t> stream_polls(kRanks, -1), progress_polls(kRanks, -1);
  std::vector<int64_t> work_bytes(kRanks, 0), counted(kRanks, 0);
  testing::Spawn(kRanks, [&](int r) {
    auto comm = NcclCommunicator::Create(store, r, kRanks, r % devices, seconds(30), "async");
    created[r] = comm.status();
    barrier.Wait();
    if (!created[0].ok() || !created[1].ok()) return;
    NcclCommunicator& c = **comm;
    ran[r] = [&]() -> absl::Status {
      const int64_t polls_before = c.host_stream_polls();
      HPTRAIN_RETURN_IF_ERROR(c.WaitForStream(consumers[r]), "ordering after the producer");
      std::vector<std::shared_ptr<Work>> works;
      for (int k = 0; k < kBuckets; ++k) {
        works.push_back(c.AllReduceSumAsync(
            BufferRef::Device(buckets[r][k]->floats(), kCount, consumers[r])));
      }
      for (auto& work : works) {
        HPTRAIN_RETURN_IF_ERROR(work->Wait(), "waiting");
        work_bytes[r] += work->bytes_sent();
      }
      // The consumer's stream copies the sums out behind the waits.
      for (int k = 0; k < kBuckets; ++k) {
        HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
            host[r].data() + k * kCount, buckets[r][k]->get(), kCount * sizeof(float),
            cudaMemcpyDeviceToHost, consumers[r]));
      }
      stream_polls[r] = c.host_stream_polls() - polls_before;
      progress_polls[r] = c.host_progress_polls();
      HPTRAIN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(consumers[r]));
      for (auto& work : works) {
        if (!work->IsCompleted()) return absl::InternalError("a Work is not complete");
      }
      counted[r] = c.bytes_sent();
      return absl::OkStatus();
    }();
    barrier.Wait();  // nobody tears down while a peer's kernels may still run
    comm->reset();
  });
  for (int r = 0; r < kRanks; ++r) cudaStreamDestroy(consumers[r]);

  for (int r = 0; r < kRanks; ++r) {
    if (!created[r].ok() && created[r].message().find("Duplicate GPU") != absl::string_view::npos) {
      GTEST_SKIP() << "this NCCL refuses two ranks on one GPU: " << created[r];
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(created[r].ok()) << "rank " << r << ": " << created[r];
    ASSERT_TRUE(ran[r].ok()) << "rank " << r << ": " << ran[r];
  }
  for (int r = 0; r < kRanks; ++r) {
    for (int k = 0; k < kBuckets; ++k) {
      for (size_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(host[r][k * kCount + i], static_cast<float>(3 + 2 * k + 2 * (i % 5)))
            << "rank " << r << " bucket " << k << " element " << i;
      }
    }
    // N = 2: each all-reduce moves S each way; the Works' bytes are the counters'.
    EXPECT_EQ(work_bytes[r], static_cast<int64_t>(kBuckets * kCount * sizeof(float)));
    EXPECT_EQ(work_bytes[r], counted[r]);
    EXPECT_EQ(stream_polls[r], 0) << "rank " << r;
    std::cout << "nccl async route: rank " << r << " host stream polls " << stream_polls[r]
              << ", host progress polls (connection setup) " << progress_polls[r] << std::endl;
  }
}

TEST(NcclCommunicator, RendezvousTimesOutWithoutRankZero) {
  SKIP_WITHOUT_CUDA_DEVICE();
  InMemoryStore store;
  auto comm = NcclCommunicator::Create(store, 1, 2, 0, milliseconds(300), "no_root");
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_NE(comm.status().message().find("no_root/unique_id"), absl::string_view::npos)
      << comm.status();
}

TEST(NcclCommunicator, InitTimesOutWhenAPeerNeverJoins) {
  SKIP_WITHOUT_CUDA_DEVICE();
  InMemoryStore store;
  const auto start = std::chrono::steady_clock::now();
  auto comm = NcclCommunicator::Create(store, 0, 2, 0, milliseconds(1000), "lonely_root");
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  // The abort must not hang: allow generous slack over the 1 s timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(20));
}

}  // namespace
}  // namespace hptrain::comm
