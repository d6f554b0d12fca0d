// The device route of the gradient compressors (StrategyTraits::reduces_on_device: quantized with
// bits dynamic, topk, dgc) against their host route, step by step on the same gradients: at world
// size 1 (NCCL on one GPU against the loopback communicator) and, where two GPUs are visible, at 2
// (NCCL against the CPU ring), with the same results and the same compression ratio and bytes.
// The layout mixes large and small tensors (small: under 4096 elements) in two buckets, so the
// device split, the small tensors' 4-bit ring and the sparse all-gather all run. Skips without a
// CUDA device.
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/base/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/kv_store.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/comm/nccl/nccl_communicator.h"
#include "runtime/sync/registry.h"
#include "tests/cuda_test_util.h"
#include "tests/runtime/comm/spawn.h"
#include "tests/runtime/sync/strategy_harness.h"

namespace hptrain::sync {
namespace {

using cuda_test::DeviceBuffer;

constexpr int kSteps = 8;

// Bucket 0: 20000 (large), 100, 6000 (large), 300; bucket 1: 9000 (large), 10.
GradientLayout MixedLayout() {
  GradientLayout layout;
  size_t at = 0;
  for (size_t size : {20000, 100, 6000, 300, 9000, 10}) {
    layout.tensors.push_back({at, at + size});
    at += size;
  }
  layout.buckets = {{0, 26400}, {26400, at}};
  return layout;
}

std::vector<float> Gradients(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (float& x : g) x = normal(rng);
  return g;
}

struct StrategyRun {
  std::vector<std::vector<float>> reduced;  // [step], the whole flat buffer after the step
  double compression_ratio = 0;
  int64_t bytes_sent = 0;
  absl::Status status;
};

// One rank's run: `kSteps` steps over both buckets; the strategy gets `device` (null: the host
// route) and reduces host or device buffers accordingly; an epoch ends after every second step.
StrategyRun RunRank(const job::JobSpec& spec, int rank, comm::Communicator& host,
            comm::Communicator* device) {
  StrategyRun run;
  const GradientLayout layout = MixedLayout();
  const size_t total = layout.buckets.back().end;
  run.status = [&]() -> absl::Status {
    StrategyContext context = StrategyContextFor(spec, &host);
    context.device_comm = device;
    HPTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Strategy> strategy, CreateStrategy(context));
    if (strategy->traits().reduces_on_device != (device != nullptr)) {
      return absl::InternalError("the strategy did not take the route asked for");
    }
    HPTRAIN_RETURN_IF_ERROR(strategy->Init(layout));
    HPTRAIN_RETURN_IF_ERROR(strategy->Start({}, 0, {}));
    for (int step = 0; step < kSteps; ++step) {
      std::vector<float> g = Gradients(total, 1000 * step + 17 * rank + 1);
      StepInfo info;
      info.step = step;
      info.epoch = step / 2;
      info.epoch_clock = step / 2.0;
      info.local_batch = 16;
      info.global_batch = 16 * host.size();
      info.lr = 0.1;
      if (device != nullptr) {
        DeviceBuffer<float> d(g);
        for (int k = 0; k < 2; ++k) {
          const auto& b = layout.buckets[k];
          HPTRAIN_RETURN_IF_ERROR(
              strategy->reducer()
                  ->Reduce(info, k,
                           comm::BufferRef::Device(d.get() + b.begin, b.end - b.begin, nullptr))
                  ->Wait(),
              "step ", step, " bucket ", k);
        }
        g = d.Download();
      } else {
        for (int k = 0; k < 2; ++k) {
          const auto& b = layout.buckets[k];
          HPTRAIN_RETURN_IF_ERROR(
              strategy->reducer()
                  ->Reduce(info, k, comm::BufferRef::Host(g.data() + b.begin, b.end - b.begin))
                  ->Wait(),
              "step ", step, " bucket ", k);
        }
      }
      run.reduced.push_back(g);
      // Communication as long as compute: bits dynamic's probe (probeSteps 2) picks 8 bits from
      // step 2.
      StepTiming step_timing;
      step_timing.step = step;
      step_timing.compute_seconds = 1.0;
      step_timing.comm_seconds = step_timing.exposed_comm_seconds = 1.0;
      strategy->OnStepTiming(step_timing);
      if (step % 2 == 1) {
        // Epoch ends (the first within the probe): communication far below compute twice (bits
        // dynamic goes 8 -> 16 -> 32, the fp16 codec and the residuals' folding run), then far
        // above it (back to 16).
        EpochTiming timing;
        timing.epoch = step / 2;
        timing.compute_seconds = 1.0;
        timing.comm_seconds = step < 6 ? 0.1 : 0.8;
        timing.exposed_comm_seconds = step < 6 ? 0.0 : 0.8;
        HPTRAIN_RETURN_IF_ERROR(strategy->OnEpochEnd(timing));
      }
    }
    run.compression_ratio = strategy->stats().compression_ratio;
    // The control traffic (bits dynamic agreeing on the epoch's times) stays on the host
    // communicator on both routes.
    run.bytes_sent = host.bytes_sent() + (device != nullptr ? device->bytes_sent() : 0);
    return absl::OkStatus();
  }();
  return run;
}

// Largest |a - b| over the largest |b| of the step, over all steps; and whether all bits agree.
void ExpectSameResults(const StrategyRun& device, const StrategyRun& host, const std::string& what,
                       double tolerance) {
  ASSERT_EQ(device.reduced.size(), host.reduced.size()) << what;
  bool identical = true;
  for (size_t s = 0; s < host.reduced.size(); ++s) {
    double scale = 0, diff = 0;
    for (size_t i = 0; i < host.reduced[s].size(); ++i) {
      scale = std::max(scale, std::abs(static_cast<double>(host.reduced[s][i])));
      diff = std::max(diff, std::abs(static_cast<double>(device.reduced[s][i]) - host.reduced[s][i]));
    }
    identical = identical && device.reduced[s] == host.reduced[s];
    EXPECT_LE(diff, tolerance * std::max(scale, 1e-30)) << what << " step " << s;
  }
  std::printf("%-40s device route %s the host route over %d steps\n", what.c_str(),
              identical ? "bit-identical to" : "within tolerance of", kSteps);
  EXPECT_DOUBLE_EQ(device.compression_ratio, host.compression_ratio) << what;
}

struct Case {
  std::string name;
  std::function<void(job::JobSpec*)> configure;
};

std::vector<Case> Cases() {
  return {
      {"quantized bits dynamic", [](job::JobSpec* s) {
         s->strategy.type = "quantized";
         s->strategy.Set("bits", "dynamic");
         s->strategy.Set("probeSteps", 2);
       }},
      {"topk density 0.05", [](job::JobSpec* s) {
         s->strategy.type = "topk";
         s->strategy.Set("density", 0.05);
       }},
      {"topk density 0.05 without error feedback", [](job::JobSpec* s) {
         s->strategy.type = "topk";
         s->strategy.Set("density", 0.05);
         s->strategy.Set("errorFeedback", false);
       }},
      {"topk density 1.0", [](job::JobSpec* s) {
         s->strategy.type = "topk";
         s->strategy.Set("density", 1.0);
       }},
      {"dgc density 0.02", [](job::JobSpec* s) {
         s->strategy.type = "dgc";
         s->strategy.Set("density", 0.02);
       }},
      {"dgc density 0.02 warm-up, no masking", [](job::JobSpec* s) {
         s->strategy.type = "dgc";
         s->strategy.Set("density", 0.02);
         s->strategy.Set("warmupEpochs", 2);
         s->strategy.Set("momentumMasking", false);
       }},
  };
}

TEST(DeviceStrategies, WorldOneDeviceRouteMatchesTheHostRoute) {
  SKIP_WITHOUT_CUDA_DEVICE();
  comm::InMemoryStore store;
  auto nccl = comm::NcclCommunicator::Create(store, 0, 1, 0, std::chrono::seconds(30), "world1");
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  for (const Case& c : Cases()) {
    job::JobSpec spec = testing::HarnessJob("ssgd");
    c.configure(&spec);
    comm::TransportCommunicator host_a(
        std::make_unique<comm::LoopbackTransport>(std::make_shared<comm::LoopbackHub>(1), 0));
    comm::TransportCommunicator host_b(
        std::make_unique<comm::LoopbackTransport>(std::make_shared<comm::LoopbackHub>(1), 0));
    const StrategyRun host = RunRank(spec, 0, host_a, nullptr);
    ASSERT_TRUE(host.status.ok()) << c.name << ": " << host.status;
    const StrategyRun device = RunRank(spec, 0, host_b, nccl->get());
    ASSERT_TRUE(device.status.ok()) << c.name << ": " << device.status;
    // DGC's clipping is off, every other kernel is the CPU's twin: the same bits are expected;
    // the tolerance is fp32 rounding, in case a summation order differs.
    ExpectSameResults(device, host, c.name, 1e-6);
  }
}

// Two ranks, each on its own GPU (NCCL refuses two ranks on one): the NCCL device route against
// the CPU ring, results and bytes sent.
TEST(DeviceStrategies, TwoRankDeviceRouteMatchesTheCpuRing) {
  SKIP_WITHOUT_CUDA_DEVICE();
  constexpr int kRanks = 2;
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  if (devices < kRanks) GTEST_SKIP() << "needs " << kRanks << " GPUs, found " << devices;
  for (const Case& c : Cases()) {
    job::JobSpec spec = testing::HarnessJob("ssgd");
    c.configure(&spec);
    std::vector<StrategyRun> host(kRanks), device(kRanks);
    auto hub = std::make_shared<comm::LoopbackHub>(kRanks);
    comm::testing::Spawn(kRanks, [&](int r) {
      comm::TransportCommunicator comm(std::make_unique<comm::LoopbackTransport>(hub, r));
      host[r] = RunRank(spec, r, comm, nullptr);
    });
    auto control = std::make_shared<comm::LoopbackHub>(kRanks);
    comm::InMemoryStore store;
    comm::testing::Spawn(kRanks, [&](int r) {
      if (cudaSetDevice(r % devices) != cudaSuccess) {
        device[r].status = absl::InternalError("cudaSetDevice");
        return;
      }
      comm::TransportCommunicator comm(std::make_unique<comm::LoopbackTransport>(control, r));
      auto nccl = comm::NcclCommunicator::Create(store, r, kRanks, r % devices,
                                                 std::chrono::seconds(60), "two/" + c.name);
      if (!nccl.ok()) {
        device[r].status = nccl.status();
        return;
      }
      device[r] = RunRank(spec, r, comm, nccl->get());
    });
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(host[r].status.ok()) << c.name << " rank " << r << ": " << host[r].status;
      ASSERT_TRUE(device[r].status.ok()) << c.name << " rank " << r << ": " << device[r].status;
      ExpectSameResults(device[r], host[r], c.name + " rank " + std::to_string(r), 1e-6);
      EXPECT_EQ(device[r].bytes_sent, host[r].bytes_sent) << c.name << " rank " << r;
    }
  }
}

}  // namespace
}  // namespace hptrain::sync
