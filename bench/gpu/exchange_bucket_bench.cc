// exchange_bucket_bench: what does a compressed bucket exchange cost on the GPU, next to the
// fp32 all-reduce it replaces?
//
//   exchange_bucket_bench [mebibytes=25] [iterations=30]
//
// On CUDA device 0, one fp32 bucket of `mebibytes` (gradient-like values, N(0, 1e-3)) is
//   compressed path: quantize to 8 bits (QuantizeCudaAsync: minmax scale, stochastic rounding,
//                    512-element buckets) -> NCCL all-gather of the encoded bytes (meta + codes)
//                    -> decode (DequantizeCuda), everything on the communicator's stream;
//   fp32 path:       NCCL all-reduce of the bucket (NcclCommunicator::AllReduceSum).
// Both run through NcclCommunicator at world size 1 (in-memory rendezvous store), so the NCCL
// steps measure launch and synchronization overhead plus one device copy, not a network: the
// point is the encode + decode cost, timed separately with CUDA events. The decoded bucket is
// checked once against the input (every element within its bucket's level spacing).
//
// The network is modeled: a ring all-reduce of S fp32 bytes over N workers at 10 Gbit/s moves
// 2(N-1)/N · S per worker, t = 2(N-1)/N · S · 8 / 1e10 s; encode + decode is reported as a share
// of that for N = 4 and N = 16, next to the modeled all-gather of the encoded bytes
// ((N-1) · E · 8 / 1e10 s).
//
// Output: a table, then one line "exchange_bucket_bench: {json}". Medians over `iterations`
// timed repetitions after 3 warm-ups. Exit status: 0 verified, 1 wrong result or CUDA/NCCL
// error, 2 no usable CUDA device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/quantize/quantize.h"
#include "runtime/base/status.h"
#include "runtime/comm/kv_store.h"
#include "runtime/comm/nccl/cuda_check.h"
#include "runtime/comm/nccl/nccl_communicator.h"

namespace hptrain::comm {
namespace {

constexpr int kWarmup = 3;
constexpr double kLinkBitsPerSecond = 10e9;
// A decoded element lies within one level spacing of its input; the slack covers float rounding
// of lo + q·delta.
constexpr double kMaxErrorInDeltas = 1.0 + 1e-3;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Device buffers, freed on every path.
struct DeviceBuffers {
  float* bucket = nullptr;     // n floats: the input and the all-reduce buffer
  uint8_t* encoded = nullptr;  // meta (2·buckets floats) then codes (n bytes)
  uint8_t* gathered = nullptr;
  float* decoded = nullptr;
  int* error = nullptr;
  ~DeviceBuffers() {
    cudaFree(bucket);
    cudaFree(encoded);
    cudaFree(gathered);
    cudaFree(decoded);
    cudaFree(error);
  }
};

struct Timings {
  std::vector<double> exchange_s, encode_s, decode_s, allreduce_s;
  size_t encoded_bytes = 0;
  double max_error_in_deltas = 0;
};

absl::Status Run(size_t n, int iterations, Timings* out) {
  InMemoryStore store;
  HPTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> comm,
                           NcclCommunicator::Create(store, /*rank=*/0, /*size=*/1, /*device=*/0,
                                                    std::chrono::seconds(60)));
  cudaStream_t stream = comm->stream();
  kernels::QuantizeParams params;  // 8 bits, 512-element buckets, minmax, stochastic
  const int64_t buckets = kernels::NumBuckets(static_cast<int64_t>(n), params.bucket_size);
  const size_t meta_bytes = 2 * buckets * sizeof(float);
  const size_t encoded_bytes = meta_bytes + kernels::QuantizedCodeBytes(n, params.bits);
  out->encoded_bytes = encoded_bytes;

  DeviceBuffers d;
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&d.bucket, n * sizeof(float)));
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&d.encoded, encoded_bytes));
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&d.gathered, encoded_bytes * comm->size()));
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&d.decoded, n * sizeof(float)));
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&d.error, sizeof(int)));
  std::vector<float> host(n);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  for (float& x : host) x = normal(rng);
  HPTRAIN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(d.bucket, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));

  cudaEvent_t marks[4];
  for (cudaEvent_t& e : marks) HPTRAIN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
  absl::Status status = [&]() -> absl::Status {
    float* meta = reinterpret_cast<float*>(d.encoded);
    uint8_t* codes = d.encoded + meta_bytes;
    for (int k = 0; k < kWarmup + iterations; ++k) {
      params.step = static_cast<uint64_t>(k);
      const auto start = std::chrono::steady_clock::now();
      HPTRAIN_CUDA_RETURN_IF_ERROR(cudaEventRecord(marks[0], stream));
      HPTRAIN_RETURN_IF_ERROR(kernels::QuantizeCudaAsync(d.bucket, static_cast<int64_t>(n), params,
                                                         meta, codes, d.error, stream),
                              "encode");
      HPTRAIN_CUDA_RETURN_IF_ERROR(cudaEventRecord(marks[1], stream));
      // Ordered after the encode: the all-gather runs on the same stream.
      HPTRAIN_RETURN_IF_ERROR(comm->AllGather(d.encoded, d.gathered, encoded_bytes), "exchange");
      HPTRAIN_CUDA_RETURN_IF_ERROR(cudaEventRecord(marks[2], stream));
      // Every rank's block decoded and summed (one block at world size 1).
      for (int r = 0; r < comm->size(); ++r) {
        const uint8_t* block = d.gathered + r * encoded_bytes;
        const float* block_meta = reinterpret_cast<const float*>(block);
        if (r == 0) {
          kernels::DequantizeCuda(block_meta, block + meta_bytes, static_cast<int64_t>(n), params,
                                  d.decoded, stream);
        } else {
          kernels::DequantizeAccumulateCuda(block_meta, block + meta_bytes, static_cast<int64_t>(n),
                                            params, d.decoded, stream);
        }
      }
      HPTRAIN_CUDA_RETURN_IF_ERROR(cudaEventRecord(marks[3], stream));
      HPTRAIN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
      int error = 0;
      HPTRAIN_CUDA_RETURN_IF_ERROR(
          cudaMemcpy(&error, d.error, sizeof(int), cudaMemcpyDeviceToHost));
      if (error != 0) return absl::InternalError(absl::StrCat("encode flagged error ", error));
      float encode_ms = 0, decode_ms = 0;
      HPTRAIN_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&encode_ms, marks[0], marks[1]));
      HPTRAIN_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&decode_ms, marks[2], marks[3]));
      if (k >= kWarmup) {
        out->exchange_s.push_back(wall.count());
        out->encode_s.push_back(encode_ms * 1e-3);
        out->decode_s.push_back(decode_ms * 1e-3);
      }
    }

    // Check the last decode: |decoded - x| < delta of the element's bucket (stochastic rounding
    // picks one of the two neighbouring levels).
    std::vector<float> decoded(n), meta_host(2 * buckets);
    HPTRAIN_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(decoded.data(), d.decoded, n * sizeof(float), cudaMemcpyDeviceToHost));
    HPTRAIN_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(meta_host.data(), d.gathered, meta_bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) {
      const float delta = meta_host[2 * (i / params.bucket_size) + 1];
      const double error = std::fabs(static_cast<double>(decoded[i]) - host[i]);
      const double in_deltas = delta > 0 ? error / delta : (error == 0 ? 0 : INFINITY);
      if (!(in_deltas <= kMaxErrorInDeltas)) {
        return absl::DataLossError(absl::StrCat("element ", i, " decoded to ", decoded[i],
                                                ", input ", host[i], ", level spacing ", delta));
      }
      out->max_error_in_deltas = std::max(out->max_error_in_deltas, in_deltas);
    }

    for (int k = 0; k < kWarmup + iterations; ++k) {
      const auto start = std::chrono::steady_clock::now();
      HPTRAIN_RETURN_IF_ERROR(comm->AllReduceSum(d.bucket, n), "fp32 all-reduce");
      const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
      if (k >= kWarmup) out->allreduce_s.push_back(wall.count());
    }
    return absl::OkStatus();
  }();
  for (cudaEvent_t& e : marks) cudaEventDestroy(e);
  comm.reset();  // collective shutdown before the buffers go
  return status;
}

int Main(int argc, char** argv) {
  const long mebibytes = argc > 1 ? std::atol(argv[1]) : 25;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 30;
  if (mebibytes < 1 || iterations < 1) {
    std::fprintf(stderr, "usage: %s [mebibytes>=1] [iterations>=1]\n", argv[0]);
    return 1;
  }
  int devices = 0;
  absl::Status probe = HPTRAIN_CUDA_STATUS(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (!probe.ok() || devices == 0) {
    std::fprintf(
        stderr, "exchange_bucket_bench: no CUDA device: %s\n",
        probe.ok() ? "cudaGetDeviceCount returned 0" : std::string(probe.message()).c_str());
    return 2;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);

  const size_t n = static_cast<size_t>(mebibytes) * 1024 * 1024 / sizeof(float);
  Timings t;
  if (absl::Status s = Run(n, iterations, &t); !s.ok()) {
    std::fprintf(stderr, "exchange_bucket_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  const double bytes = static_cast<double>(n * sizeof(float));
  const double exchange = Median(t.exchange_s), encode = Median(t.encode_s);
  const double decode = Median(t.decode_s), allreduce = Median(t.allreduce_s);
  const double codec = encode + decode;
  const int workers[] = {4, 16};
  double modeled_allreduce[2], modeled_allgather[2];
  for (int i = 0; i < 2; ++i) {
    const int w = workers[i];
    modeled_allreduce[i] = 2.0 * (w - 1) / w * bytes * 8 / kLinkBitsPerSecond;
    modeled_allgather[i] = (w - 1) * static_cast<double>(t.encoded_bytes) * 8 / kLinkBitsPerSecond;
  }

  std::printf("exchange_bucket_bench: %s, %ld MiB fp32 bucket (%zu elements), %d iterations\n",
              prop.name, mebibytes, n, iterations);
  std::printf("  encoded size             %10.2f MiB (%.3f of fp32)\n", t.encoded_bytes / 1048576.0,
              t.encoded_bytes / bytes);
  std::printf("  encode (quantize-8)      %10.3f ms  (%.0f GB/s of fp32 input)\n", encode * 1e3,
              bytes / encode / 1e9);
  std::printf("  decode                   %10.3f ms\n", decode * 1e3);
  std::printf("  encode+all-gather+decode %10.3f ms  (world 1, wall, with syncs)\n",
              exchange * 1e3);
  std::printf("  fp32 NCCL all-reduce     %10.3f ms  (world 1, wall)\n", allreduce * 1e3);
  std::printf("  max decode error         %10.3f level spacings (checked <= %.3f)\n",
              t.max_error_in_deltas, kMaxErrorInDeltas);
  std::printf(
      "  at 10 Gbit/s   modeled fp32 all-reduce   modeled 8-bit all-gather   "
      "encode+decode share of fp32\n");
  for (int i = 0; i < 2; ++i) {
    std::printf("  N = %-2d        %12.2f ms %24.2f ms %22.2f %%\n", workers[i],
                modeled_allreduce[i] * 1e3, modeled_allgather[i] * 1e3,
                100 * codec / modeled_allreduce[i]);
  }
  std::printf(
      "exchange_bucket_bench: {\"device\": \"%s\", \"bucket_bytes\": %.0f, \"encoded_bytes\": %zu, "
      "\"iterations\": %d, \"encode_ms\": %.4f, \"decode_ms\": %.4f, \"exchange_ms\": %.4f, "
      "\"allreduce_fp32_ms\": %.4f, \"modeled_allreduce_10g_ms\": {\"4\": %.3f, \"16\": %.3f}, "
      "\"modeled_allgather_8bit_10g_ms\": {\"4\": %.3f, \"16\": %.3f}, "
      "\"codec_share_of_modeled_allreduce\": {\"4\": %.5f, \"16\": %.5f}, "
      "\"max_error_level_spacings\": %.4f}\n",
      prop.name, bytes, t.encoded_bytes, iterations, encode * 1e3, decode * 1e3, exchange * 1e3,
      allreduce * 1e3, modeled_allreduce[0] * 1e3, modeled_allreduce[1] * 1e3,
      modeled_allgather[0] * 1e3, modeled_allgather[1] * 1e3, codec / modeled_allreduce[0],
      codec / modeled_allreduce[1], t.max_error_in_deltas);
  return 0;
}

}  // namespace
}  // namespace hptrain::comm

int main(int argc, char** argv) { return hptrain::comm::Main(argc, argv); }
