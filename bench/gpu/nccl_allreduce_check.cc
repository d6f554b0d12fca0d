// nccl_allreduce_check: does the NCCL back end work on this GPU machine, and how fast?
//
//   nccl_allreduce_check [ranks=1] [mebibytes=64] [iterations=20]
//
// Rank r runs on CUDA device r in its own thread (rendezvous through an in-memory store), fills
// its buffer with (r + 1) · (i mod 1000) and all-reduces it through NcclCommunicator; the first
// result is checked element by element against the exact sum (integers, so float-exact). Then
// `iterations` more all-reduces are timed and reported as nccl-tests does:
//   algbw = bytes / time,  busbw = algbw · 2(n-1)/n  (0 for one rank: nothing crosses a link).
// Exit status: 0 verified, 1 wrong result or NCCL/CUDA error, 2 no usable CUDA device.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/comm/kv_store.h"
#include "runtime/comm/nccl/cuda_check.h"
#include "runtime/comm/nccl/nccl_communicator.h"

namespace hptrain::comm {
namespace {

struct RankResult {
  absl::Status status;
  double seconds_per_iteration = 0;
};

absl::Status RunRank(KeyValueStore& store, int rank, int ranks, size_t count, int iterations,
                     RankResult* result) {
  HPTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<NcclCommunicator> comm,
      NcclCommunicator::Create(store, rank, ranks, /*device=*/rank, std::chrono::seconds(60)));
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>((rank + 1) * (i % 1000));
  float* device = nullptr;
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&device, count * sizeof(float)));
  absl::Status status = [&]() -> absl::Status {
    HPTRAIN_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(device, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    // Host-side allocations can synchronize the device; finish them on every rank before any
    // NCCL kernel starts waiting for peers.
    HPTRAIN_RETURN_IF_ERROR(comm->Barrier(), "barrier before the check");
    HPTRAIN_RETURN_IF_ERROR(comm->AllReduceSum(device, count), "first all-reduce");
    HPTRAIN_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(host.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost));
    const float factor = static_cast<float>(ranks * (ranks + 1) / 2);
    for (size_t i = 0; i < count; ++i) {
      const float expected = factor * static_cast<float>(i % 1000);
      if (host[i] != expected) {
        return absl::DataLossError(
            absl::StrCat("element ", i, " is ", host[i], ", expected ", expected));
      }
    }
    HPTRAIN_RETURN_IF_ERROR(comm->Barrier(), "barrier before timing");
    const auto start = std::chrono::steady_clock::now();
    for (int k = 0; k < iterations; ++k) {
      HPTRAIN_RETURN_IF_ERROR(comm->AllReduceSum(device, count), "timed all-reduce ", k);
    }
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    result->seconds_per_iteration = elapsed.count() / iterations;
    return comm->Barrier();
  }();
  comm.reset();  // collective shutdown before the buffer goes (cudaFree may sync the device)
  cudaFree(device);
  return status;
}

int Main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 1;
  const long mebibytes = argc > 2 ? std::atol(argv[2]) : 64;
  const int iterations = argc > 3 ? std::atoi(argv[3]) : 20;
  if (ranks < 1 || mebibytes < 1 || iterations < 1) {
    std::fprintf(stderr, "usage: %s [ranks>=1] [mebibytes>=1] [iterations>=1]\n", argv[0]);
    return 1;
  }
  int devices = 0;
  absl::Status probe = HPTRAIN_CUDA_STATUS(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (!probe.ok() || devices == 0) {
    std::fprintf(
        stderr, "no CUDA device: %s\n",
        probe.ok() ? "cudaGetDeviceCount returned 0" : std::string(probe.message()).c_str());
    return 2;
  }
  if (ranks > devices) {
    std::fprintf(stderr, "%d ranks need %d devices, %d present\n", ranks, ranks, devices);
    return 2;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);

  const size_t count = static_cast<size_t>(mebibytes) * 1024 * 1024 / sizeof(float);
  InMemoryStore store;
  std::vector<RankResult> results(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back(
        [&, r] { results[r].status = RunRank(store, r, ranks, count, iterations, &results[r]); });
  }
  for (std::thread& t : threads) t.join();

  int failed = 0;
  for (int r = 0; r < ranks; ++r) {
    if (!results[r].status.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", r, results[r].status.ToString().c_str());
      ++failed;
    }
  }
  if (failed > 0) return 1;
  double seconds = 0;
  for (const RankResult& result : results)
    seconds = std::max(seconds, result.seconds_per_iteration);
  const double bytes = static_cast<double>(count * sizeof(float));
  const double algbw = bytes / seconds / 1e9;
  const double busbw = algbw * 2.0 * (ranks - 1) / ranks;
  std::printf(
      "nccl_allreduce_check: %s, NCCL %d, ranks %d, %ld MiB float32, %d iterations: "
      "%.1f us/all-reduce, algbw %.2f GB/s, busbw %.2f GB/s, result verified\n",
      prop.name, nccl_version, ranks, mebibytes, iterations, seconds * 1e6, algbw, busbw);
  return 0;
}

}  // namespace
}  // namespace hptrain::comm

int main(int argc, char** argv) { return hptrain::comm::Main(argc, argv); }
