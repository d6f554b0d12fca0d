// Throughput of the compression kernels on 64 MiB fp32 buffers (16 Mi elements), next to a
// memcpy of the same buffer in the same run. Bytes per second count the fp32 input once
// (the figure the ≥ 60 %-of-memcpy target compares).
//
// On a shared machine the memory bandwidth a guest gets drifts by a factor of two within
// minutes, so a memcpy timed at another moment than a kernel says little about the kernel.
// Every kernel iteration is therefore paired with a memcpy of the same 64 MiB right after it,
// and the counter `of_memcpy` is the median over the iterations of memcpy time / kernel time:
// the kernel's bandwidth as a share of the memcpy's at the same moment. Only the kernel is timed
// (manual time); BM_Memcpy alone gives the absolute figure.
//
//   build/bin/hptrain-kernels-benchmark [--benchmark_repetitions=5 ...]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cast/cast.h"
#include "kernels/quantize/quantize.h"
#include "kernels/topk/topk.h"

namespace {

constexpr int64_t kElements = 16 << 20;  // 64 MiB of float

const std::vector<float>& Input() {
  static const std::vector<float>* data = [] {
    auto* v = new std::vector<float>(kElements);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& x : *v) x = normal(rng);
    return v;
  }();
  return *data;
}

void SetBytes(benchmark::State& state) {
  state.SetBytesProcessed(state.iterations() * kElements * static_cast<int64_t>(sizeof(float)));
}

// Runs `kernel` once per iteration, timed, then an untimed memcpy of the input (see the file
// comment); sets the bytes and the `of_memcpy` counter.
template <typename Kernel>
void TimePairedWithMemcpy(benchmark::State& state, Kernel kernel) {
  using Clock = std::chrono::steady_clock;
  const auto& x = Input();
  static std::vector<float>* copy = new std::vector<float>(kElements);
  std::vector<double> ratios;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    kernel();
    const auto t1 = Clock::now();
    std::memcpy(copy->data(), x.data(), kElements * sizeof(float));
    benchmark::DoNotOptimize(copy->data());
    const auto t2 = Clock::now();
    const double kernel_seconds = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(kernel_seconds);
    ratios.push_back(std::chrono::duration<double>(t2 - t1).count() / kernel_seconds);
  }
  SetBytes(state);
  if (!ratios.empty()) {
    std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
    state.counters["of_memcpy"] = ratios[ratios.size() / 2];
  }
}

void BM_Memcpy(benchmark::State& state) {
  const auto& x = Input();
  std::vector<float> out(kElements);
  for (auto _ : state) {
    std::memcpy(out.data(), x.data(), kElements * sizeof(float));
    benchmark::DoNotOptimize(out.data());
  }
  SetBytes(state);
}

// Arguments: bits, then the instruction-set build (2 AVX-512, 1 AVX2, 0 portable SSE2); a build
// the CPU cannot run is skipped.
void BM_Quantize(benchmark::State& state) {
  using hptrain::kernels::QuantizeIsa;
  const auto isa = static_cast<QuantizeIsa>(state.range(1));
  if (isa > hptrain::kernels::QuantizeIsaSupported()) {
    state.SkipWithError("this CPU cannot run this build");
    return;
  }
  state.SetLabel(hptrain::kernels::QuantizeIsaName(isa));
  hptrain::kernels::SetQuantizeIsaLimitForTesting(isa);
  const auto& x = Input();
  hptrain::kernels::QuantizeParams p;
  p.bits = static_cast<int>(state.range(0));
  std::vector<float> meta(2 * hptrain::kernels::NumBuckets(kElements, p.bucket_size));
  std::vector<uint8_t> codes(hptrain::kernels::QuantizedCodeBytes(kElements, p.bits));
  TimePairedWithMemcpy(state, [&] {
    p.step++;
    benchmark::DoNotOptimize(hptrain::kernels::Quantize(x.data(), kElements, p, meta.data(),
                                                        codes.data()));
  });
  hptrain::kernels::SetQuantizeIsaLimitForTesting(QuantizeIsa::kAvx512);
}

void BM_DequantizeAccumulate(benchmark::State& state) {
  const auto& x = Input();
  hptrain::kernels::QuantizeParams p;
  p.bits = 8;
  std::vector<float> meta(2 * hptrain::kernels::NumBuckets(kElements, p.bucket_size));
  std::vector<uint8_t> codes(hptrain::kernels::QuantizedCodeBytes(kElements, p.bits));
  (void)hptrain::kernels::Quantize(x.data(), kElements, p, meta.data(), codes.data());
  std::vector<float> acc(kElements, 0.0f);
  TimePairedWithMemcpy(state, [&] {
    hptrain::kernels::DequantizeAccumulate(meta.data(), codes.data(), kElements, p, acc.data());
    benchmark::DoNotOptimize(acc.data());
  });
}

void BM_Fp16Cast(benchmark::State& state) {
  const auto& x = Input();
  std::vector<uint16_t> out(kElements);
  TimePairedWithMemcpy(state, [&] {
    hptrain::kernels::FloatToHalf(x.data(), kElements, out.data());
    benchmark::DoNotOptimize(out.data());
  });
}

void BM_TopkThreshold(benchmark::State& state) {
  const auto& x = Input();
  uint64_t step = 0;
  TimePairedWithMemcpy(state, [&] {
    benchmark::DoNotOptimize(
        hptrain::kernels::DgcThreshold(x.data(), kElements, 0.001, 0.01, 7, step++));
  });
}

void BM_ScatterAdd(benchmark::State& state) {
  // 1 % of the elements, ascending indices, into a 64 MiB dense buffer.
  const int64_t k = kElements / 100;
  std::vector<int32_t> indices(k);
  std::vector<float> values(k, 0.5f);
  for (int64_t i = 0; i < k; ++i) indices[i] = static_cast<int32_t>(i * 100);
  std::vector<float> dense(kElements, 0.0f);
  TimePairedWithMemcpy(state, [&] {
    hptrain::kernels::ScatterAdd(indices.data(), values.data(), k, dense.data(), kElements);
    benchmark::DoNotOptimize(dense.data());
  });
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Quantize)
    ->ArgNames({"bits", "isa"})
    ->ArgsProduct({{8, 4}, {2, 1, 0}})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK(BM_DequantizeAccumulate)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_Fp16Cast)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_TopkThreshold)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_ScatterAdd)->Unit(benchmark::kMillisecond)->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
