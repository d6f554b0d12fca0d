// Throughput of the CUDA twins of the compression kernels on 64 MiB fp32 buffers (16 Mi
// elements), next to a device-to-device copy of the same buffer in the same run: the GPU side of
// kernels_benchmark.cc. Bytes per second count the fp32 input once, as there (the figure the
// ≥ 70 %-of-a-device-copy target compares).
//
// Each iteration is timed with CUDA events around the enqueued work (manual time), after a
// warm-up launch; blocking twins (QuantizeCuda, DgcSelectCuda) are timed including their small
// device-to-host copies and synchronisation, which is what a caller pays.
//
//   build/bin/hptrain-kernels-cuda-benchmark [--benchmark_repetitions=5 ...]
//
// Exits with status 2 and a one-line reason when there is no usable CUDA device.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/cast/cast.h"
#include "kernels/quantize/quantize.h"
#include "kernels/topk/topk.h"

namespace {

constexpr int64_t kElements = 16 << 20;  // 64 MiB of float

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "hptrain-kernels-cuda-benchmark: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

// A cudaMalloc'ed array of T, freed at exit of the benchmark.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    Check(cudaMalloc(&ptr_, count * sizeof(T)), "cudaMalloc");
  }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return ptr_; }
  size_t bytes() const { return count_ * sizeof(T); }
  void Upload(const std::vector<T>& host) {
    Check(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }

 private:
  T* ptr_ = nullptr;
  size_t count_;
};

// N(0, 1) input, uploaded once and shared by all benchmarks (never zeros, which can run faster).
const float* Input() {
  static const DeviceArray<float>* data = [] {
    std::vector<float> host(kElements);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& x : host) x = normal(rng);
    auto* d = new DeviceArray<float>(kElements);
    d->Upload(host);
    return d;
  }();
  return data->get();
}

// Runs `body` once to warm up, then times each iteration with events on the default stream.
template <typename Body>
void TimeIterations(benchmark::State& state, Body body) {
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  body();
  Check(cudaDeviceSynchronize(), "warm-up");
  for (auto _ : state) {
    Check(cudaEventRecord(start, nullptr), "cudaEventRecord");
    body();
    Check(cudaEventRecord(stop, nullptr), "cudaEventRecord");
    Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    Check(cudaGetLastError(), "kernel launch");
    float ms = 0.0f;
    Check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    state.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  state.SetBytesProcessed(state.iterations() * kElements * static_cast<int64_t>(sizeof(float)));
}

void OrDie(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "hptrain-kernels-cuda-benchmark: %s\n", status.ToString().c_str());
    std::exit(1);
  }
}

void BM_DeviceCopy(benchmark::State& state) {
  const float* x = Input();
  DeviceArray<float> out(kElements);
  TimeIterations(state, [&] {
    Check(cudaMemcpyAsync(out.get(), x, out.bytes(), cudaMemcpyDeviceToDevice, nullptr),
          "cudaMemcpyAsync D2D");
  });
}

void BM_Quantize(benchmark::State& state) {
  const float* x = Input();
  hptrain::kernels::QuantizeParams p;
  p.bits = static_cast<int>(state.range(0));
  DeviceArray<float> meta(2 * hptrain::kernels::NumBuckets(kElements, p.bucket_size));
  DeviceArray<uint8_t> codes(hptrain::kernels::QuantizedCodeBytes(kElements, p.bits));
  DeviceArray<int> flag(1);
  // The asynchronous entry point: the blocking one adds a 4-byte copy and a synchronisation.
  TimeIterations(state, [&] {
    p.step++;
    OrDie(hptrain::kernels::QuantizeCudaAsync(x, kElements, p, meta.get(), codes.get(), flag.get(),
                                              nullptr));
  });
}

void BM_DequantizeAccumulate(benchmark::State& state) {
  const float* x = Input();
  hptrain::kernels::QuantizeParams p;
  p.bits = 8;
  DeviceArray<float> meta(2 * hptrain::kernels::NumBuckets(kElements, p.bucket_size));
  DeviceArray<uint8_t> codes(hptrain::kernels::QuantizedCodeBytes(kElements, p.bits));
  OrDie(hptrain::kernels::QuantizeCuda(x, kElements, p, meta.get(), codes.get(), nullptr));
  DeviceArray<float> acc(kElements);
  Check(cudaMemset(acc.get(), 0, acc.bytes()), "cudaMemset");
  TimeIterations(state, [&] {
    hptrain::kernels::DequantizeAccumulateCuda(meta.get(), codes.get(), kElements, p, acc.get(),
                                               nullptr);
  });
}

void BM_Fp16Cast(benchmark::State& state) {
  const float* x = Input();
  DeviceArray<uint16_t> out(kElements);
  TimeIterations(state,
                 [&] { hptrain::kernels::FloatToHalfCuda(x, kElements, out.get(), nullptr); });
}

void BM_TopkThreshold(benchmark::State& state) {
  const float* x = Input();
  hptrain::kernels::DgcThresholdOptions options;
  options.density = 0.001;
  uint64_t step = 0;
  TimeIterations(state, [&] {
    auto selection = hptrain::kernels::DgcSelectCuda(x, kElements, options, 7, step++, nullptr);
    OrDie(selection.status());
    benchmark::DoNotOptimize(selection->threshold);
  });
}

void BM_ScatterAdd(benchmark::State& state) {
  // 1 % of the elements, ascending indices, into a 64 MiB dense buffer (as on the CPU).
  const int64_t k = kElements / 100;
  std::vector<int32_t> host_indices(k);
  for (int64_t i = 0; i < k; ++i) host_indices[i] = static_cast<int32_t>(i * 100);
  DeviceArray<int32_t> indices(k);
  indices.Upload(host_indices);
  DeviceArray<float> values(k);
  values.Upload(std::vector<float>(k, 0.5f));
  DeviceArray<float> dense(kElements);
  Check(cudaMemset(dense.get(), 0, dense.bytes()), "cudaMemset");
  TimeIterations(state, [&] {
    hptrain::kernels::ScatterAddCuda(indices.get(), values.get(), k, dense.get(), kElements,
                                     nullptr);
  });
}

BENCHMARK(BM_DeviceCopy)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_Quantize)->Arg(8)->Arg(4)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_DequantizeAccumulate)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_Fp16Cast)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_TopkThreshold)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_ScatterAdd)->Unit(benchmark::kMicrosecond)->UseManualTime();

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "hptrain-kernels-cuda-benchmark: no CUDA device: %s\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount returned 0");
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
