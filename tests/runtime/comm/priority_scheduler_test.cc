// The sub-tensor priority scheduler's checks (docs/algorithms.md §3d): every element exchanged once
// per sync, launches in monotone priority order within the credit, the same launches on every
// rank, results independent of how chunks were grouped, and the timeline check (with 10 ms per
// chunk, the next forward's layer 0 starts before the last chunk completes).
#include "runtime/comm/priority_scheduler.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/loopback_transport.h"

namespace hptrain::comm {
namespace {

using Clock = std::chrono::steady_clock;

// LeNet-5's tensors (weight, bias per layer), five layers.
const std::vector<size_t> kSizes = {150, 6, 2400, 16, 48000, 120, 10080, 84, 840, 10};
const std::vector<int> kLayers = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4};

std::vector<std::pair<size_t, size_t>> Ranges(const std::vector<size_t>& sizes) {
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t offset = 0;
  for (size_t s : sizes) {
    ranges.push_back({offset, offset + s});
    offset += s;
  }
  return ranges;
}

size_t Total(const std::vector<size_t>& sizes) {
  size_t n = 0;
  for (size_t s : sizes) n += s;
  return n;
}

struct RankRun {
  std::vector<float> buffer;
  std::vector<PriorityScheduler::Launch> launches;
  std::vector<PriorityScheduler::Chunk> chunks;
  std::vector<int> finish_order;
  absl::Status status;
};

struct RunOptions {
  int world = 3;
  int steps = 2;
  PriorityScheduler::Options scheduler;
  // Value of element i on `rank` at `step`.
  std::function<float(int rank, int step, size_t i)> value = [](int rank, int, size_t i) {
    return static_cast<float>(rank + 1) + static_cast<float>(i % 7);
  };
  bool random_delays = true;  // sleep a little between tensors, differently on every rank
};

// Every rank runs `steps` steps: backward marks the tensors ready from the last one, with
// random pauses; the scheduler all-reduces the buffer in place.
std::vector<RankRun> RunRanks(const RunOptions& options) {
  auto hub = std::make_shared<LoopbackHub>(options.world);
  std::vector<RankRun> runs(options.world);
  std::vector<std::thread> threads;
  for (int r = 0; r < options.world; ++r) {
    threads.emplace_back([&, r] {
      RankRun& run = runs[r];
      TransportCommunicator comm(std::make_unique<LoopbackTransport>(hub, r));
      run.buffer.assign(Total(kSizes), 0.0f);
      PriorityScheduler::Options scheduler = options.scheduler;
      scheduler.record = true;
      std::mutex finish_mu;
      PriorityScheduler::Hooks hooks;
      hooks.finish = [&](int layer, size_t, size_t) {
        std::lock_guard<std::mutex> lock(finish_mu);
        run.finish_order.push_back(layer);
        return absl::OkStatus();
      };
      PriorityScheduler s(&comm, Ranges(kSizes), kLayers, run.buffer.data(), scheduler, hooks);
      std::mt19937 rng(1234 + r);
      std::uniform_int_distribution<int> pause(0, 3);
      for (int step = 0; step < options.steps; ++step) {
        run.status = s.WaitIdle();
        if (!run.status.ok()) return;
        for (size_t i = 0; i < run.buffer.size(); ++i) run.buffer[i] = options.value(r, step, i);
        run.status = s.BeginStep(run.buffer.data());
        if (!run.status.ok()) return;
        for (int t = static_cast<int>(kSizes.size()) - 1; t >= 0; --t) {
          if (options.random_delays) std::this_thread::sleep_for(std::chrono::milliseconds(pause(rng)));
          s.MarkReady(t);
        }
        s.EndBackward();
      }
      run.status = s.WaitIdle();
      run.launches = s.launches();
      run.chunks = s.chunks();
    });
  }
  for (auto& t : threads) t.join();
  return runs;
}

TEST(PriorityScheduler, ChunksSplitEveryLayerIntoPiecesOfAtMostThePartition) {
  auto hub = std::make_shared<LoopbackHub>(1);
  TransportCommunicator comm(std::make_unique<LoopbackTransport>(hub, 0));
  std::vector<float> buffer(Total(kSizes));
  PriorityScheduler::Options options;
  options.partition_elements = 4096;
  options.credit_elements = 8192;
  PriorityScheduler s(&comm, Ranges(kSizes), kLayers, buffer.data(), options, {});
  ASSERT_EQ(s.num_layers(), 5);
  size_t next = 0;
  int layer = 0;
  for (const auto& chunk : s.chunks()) {
    EXPECT_LE(chunk.end - chunk.begin, 4096u);
    EXPECT_GT(chunk.end, chunk.begin);
    EXPECT_EQ(chunk.begin, next) << "chunks tile the buffer in priority order";
    EXPECT_GE(chunk.layer, layer);
    layer = chunk.layer;
    next = chunk.end;
  }
  EXPECT_EQ(next, buffer.size());
  // Layer 2 (48,120 elements) takes ceil(48120 / 4096) = 12 chunks.
  int layer2 = 0;
  for (const auto& chunk : s.chunks()) layer2 += chunk.layer == 2;
  EXPECT_EQ(layer2, 12);
}

TEST(PriorityScheduler, EveryElementOnceInPriorityOrderWithinTheCreditOnEveryRank) {
  RunOptions options;
  options.steps = 3;
  options.scheduler.partition_elements = 4096;
  options.scheduler.credit_elements = 3 * 4096;
  std::vector<RankRun> runs = RunRanks(options);
  for (int r = 0; r < options.world; ++r) {
    const RankRun& run = runs[r];
    ASSERT_TRUE(run.status.ok()) << run.status;
    // The last step's sums: Σ_r (r + 1 + i % 7) = 6 + 3·(i % 7), exact in floats.
    for (size_t i = 0; i < run.buffer.size(); ++i) {
      ASSERT_EQ(run.buffer[i], 6.0f + 3.0f * static_cast<float>(i % 7)) << "element " << i;
    }
    for (int step = 1; step <= options.steps; ++step) {
      std::vector<int> sent(run.chunks.size(), 0);
      for (const auto& launch : run.launches) {
        if (launch.step != step) continue;
        EXPECT_LE(launch.elements, options.scheduler.credit_elements);
        // The launch takes the most urgent candidates, in order.
        ASSERT_LE(launch.chunks.size(), launch.candidates.size());
        for (size_t k = 0; k < launch.chunks.size(); ++k) {
          EXPECT_EQ(launch.chunks[k], launch.candidates[k]) << "step " << step;
        }
        for (int c : launch.chunks) ++sent[c];
      }
      for (size_t c = 0; c < sent.size(); ++c) {
        EXPECT_EQ(sent[c], 1) << "rank " << r << " step " << step << " chunk " << c;
      }
    }
    // Every layer finished once per step.
    EXPECT_EQ(run.finish_order.size(), 5u * options.steps);
  }
  // Every rank issued the same launches.
  for (int r = 1; r < options.world; ++r) {
    ASSERT_EQ(runs[r].launches.size(), runs[0].launches.size());
    for (size_t k = 0; k < runs[0].launches.size(); ++k) {
      EXPECT_EQ(runs[r].launches[k].chunks, runs[0].launches[k].chunks) << "launch " << k;
    }
  }
}

TEST(PriorityScheduler, ResultsDoNotDependOnHowChunksAreGrouped) {
  // Values whose sums round: the ring's summation order shows in the bits.
  auto value = [](int rank, int, size_t i) {
    return std::sin(0.37f * static_cast<float>(i) + static_cast<float>(rank)) * 1e3f +
           1e-3f * static_cast<float>(rank);
  };
  std::vector<float> reference;
  for (int64_t credit : {int64_t{4096}, int64_t{3 * 4096}, int64_t{1} << 20}) {
    for (bool delays : {false, true}) {
      RunOptions options;
      options.world = 3;
      options.steps = 1;
      options.value = value;
      options.random_delays = delays;
      options.scheduler.partition_elements = 4096;
      options.scheduler.credit_elements = credit;
      std::vector<RankRun> runs = RunRanks(options);
      for (const auto& run : runs) ASSERT_TRUE(run.status.ok()) << run.status;
      for (int r = 1; r < options.world; ++r) {
        ASSERT_EQ(0, std::memcmp(runs[r].buffer.data(), runs[0].buffer.data(),
                                 runs[0].buffer.size() * sizeof(float)));
      }
      if (reference.empty()) {
        reference = runs[0].buffer;
      } else {
        EXPECT_EQ(0, std::memcmp(reference.data(), runs[0].buffer.data(),
                                 reference.size() * sizeof(float)))
            << "credit " << credit << (delays ? " with" : " without") << " random delays";
      }
    }
  }
}

// With 10 ms per chunk, layer 0's chunks go first once backward is done, so the next forward's
// first layer waits only for them, not for the whole exchange.
TEST(PriorityScheduler, TheNextForwardStartsBeforeTheLastChunkCompletes) {
  constexpr int kWorld = 2;
  auto hub = std::make_shared<LoopbackHub>(kWorld);
  std::vector<size_t> done_at_forward(kWorld), total_launches(kWorld);
  std::vector<int> layer0_launches(kWorld);
  std::vector<absl::Status> status(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      TransportCommunicator comm(std::make_unique<LoopbackTransport>(hub, r));
      std::vector<float> buffer(Total(kSizes), 1.0f);
      std::vector<float> gradients(Total(kSizes));  // EndBackward zero-fills these
      PriorityScheduler::Options options;
      options.partition_elements = 8192;
      options.credit_elements = 8192;
      options.chunk_delay_seconds = 0.010;
      options.record = true;
      PriorityScheduler s(&comm, Ranges(kSizes), kLayers, gradients.data(), options, {});
      status[r] = s.BeginStep(buffer.data());
      if (!status[r].ok()) return;
      // Backward ends with every gradient in at once (EndBackward marks them all ready).
      s.EndBackward();
      // The next forward, layer by layer. The scheduler's clock started at its construction.
      s.WaitLayer(0);
      done_at_forward[r] = s.launches().size();  // launches completed when it started
      for (int l = 1; l < s.num_layers(); ++l) s.WaitLayer(l);
      status[r] = s.WaitIdle();
      const auto launches = s.launches();
      ASSERT_FALSE(launches.empty());
      total_launches[r] = launches.size();
      // Launches: {layer 0, layer 1}, the six chunks of layer 2 one by one, then layer 3's two
      // chunks, the second with layer 4's.
      EXPECT_EQ(s.chunks()[launches.back().chunks.back()].layer, s.num_layers() - 1)
          << "the output layer's chunk goes last";
      layer0_launches[r] = 0;
      for (const auto& launch : launches) {
        ++layer0_launches[r];
        if (!launch.chunks.empty() && s.chunks()[launch.chunks.front()].layer == 0) break;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    // Layer 0's chunk goes in the first launch after the negotiation, and the forward's first
    // layer starts while the later launches (≥ 90 ms of them) are still running.
    EXPECT_LE(layer0_launches[r], 2) << "rank " << r;
    EXPECT_LT(done_at_forward[r], total_launches[r])
        << "rank " << r << ": layer 0's forward started after " << done_at_forward[r] << " of "
        << total_launches[r] << " launches";
  }
}

TEST(PriorityScheduler, AStepWithoutExchangeFinishesEveryLayerWithoutCollectives) {
  auto hub = std::make_shared<LoopbackHub>(1);
  TransportCommunicator comm(std::make_unique<LoopbackTransport>(hub, 0));
  std::vector<float> buffer(Total(kSizes), 3.0f);
  std::vector<int> prepared, finished;
  PriorityScheduler::Hooks hooks;
  hooks.prepare = [&](int layer, size_t, size_t) {
    prepared.push_back(layer);
    return absl::OkStatus();
  };
  hooks.finish = [&](int layer, size_t, size_t) {
    finished.push_back(layer);
    return absl::OkStatus();
  };
  PriorityScheduler::Options options;
  options.record = true;
  PriorityScheduler s(&comm, Ranges(kSizes), kLayers, buffer.data(), options, hooks);
  ASSERT_TRUE(s.BeginStep(nullptr).ok());
  // Tensor 9 (the output bias) gets no gradient: EndBackward zero-fills it.
  for (int t = 8; t >= 0; --t) s.MarkReady(t);
  s.EndBackward();
  ASSERT_TRUE(s.WaitIdle().ok());
  EXPECT_EQ(prepared.size(), 5u);
  EXPECT_EQ(finished.size(), 5u);
  EXPECT_TRUE(s.launches().empty());
  EXPECT_EQ(comm.bytes_sent(), 0);
  EXPECT_EQ(buffer.back(), 0.0f);
  EXPECT_EQ(buffer.front(), 3.0f);
}

TEST(PriorityScheduler, AFailingHookFailsTheStepAndReleasesEveryLayer) {
  auto hub = std::make_shared<LoopbackHub>(1);
  TransportCommunicator comm(std::make_unique<LoopbackTransport>(hub, 0));
  std::vector<float> buffer(Total(kSizes), 1.0f);
  PriorityScheduler::Hooks hooks;
  hooks.prepare = [](int layer, size_t, size_t) {
    return layer == 3 ? absl::InternalError("accumulator gone") : absl::OkStatus();
  };
  PriorityScheduler s(&comm, Ranges(kSizes), kLayers, buffer.data(), {}, hooks);
  ASSERT_TRUE(s.BeginStep(buffer.data()).ok());
  for (int t = 9; t >= 0; --t) s.MarkReady(t);
  for (int l = 0; l < s.num_layers(); ++l) s.WaitLayer(l);  // returns, does not hang
  absl::Status status = s.WaitIdle();
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("layer 3: accumulator gone"), std::string::npos) << status;
  EXPECT_FALSE(s.BeginStep(buffer.data()).ok()) << "the failure sticks";
}

}  // namespace
}  // namespace hptrain::comm
