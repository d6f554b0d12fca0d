// The strategy components of the exchange library (strategy.h): each built-in strategy is a
// reducer, a reducer + averager pair, or an updater, with the traits its descriptor declares; a
// reducer's Work leaves the gradient to step on in the bucket (gradient_reducer.h): the mean over
// the global batch for ssgd, with any allocation, and this worker's own mean for localsgd.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/sync/registry.h"
#include "tests/runtime/sync/strategy_harness.h"

namespace hptrain::sync::testing {
namespace {

GradientLayout OneBucket(size_t n) {
  GradientLayout layout;
  layout.tensors.push_back({0, n});
  layout.buckets.push_back({0, n});
  return layout;
}

// Each rank's bucket after its strategy's reducer, for `batches` (b_i of each rank, Σ = B).
std::vector<std::vector<float>> Reduced(const std::string& strategy,
                                        const std::vector<int>& batches,
                                        const std::vector<std::vector<float>>& sums) {
  const int world = static_cast<int>(batches.size());
  auto hub = std::make_shared<comm::LoopbackHub>(world);
  std::vector<std::vector<float>> out = sums;
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      comm::TransportCommunicator comm(std::make_unique<comm::LoopbackTransport>(hub, r));
      job::JobSpec spec = HarnessJob(strategy);
      spec.global_batch_size = 0;
      for (int b : batches) spec.global_batch_size += b;
      auto created = CreateStrategy(StrategyContextFor(spec, &comm));
      if (!created.ok()) {
        errors[r] = std::string(created.status().message());
        return;
      }
      Strategy& s = **created;
      absl::Status status = s.Init(OneBucket(out[r].size()));
      StepInfo step;
      step.local_batch = batches[r];
      step.global_batch = spec.global_batch_size;
      if (status.ok()) {
        status = s.reducer()
                     ->Reduce(step, 0, comm::BufferRef::Host(out[r].data(), out[r].size()))
                     ->Wait();
      }
      errors[r] = std::string(status.message());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return out;
}

TEST(GradientReducer, SsgdLeavesTheMeanOverTheGlobalBatchForAnyAllocation) {
  const std::vector<int> batches = {3, 5, 8};  // B = 16
  const std::vector<std::vector<float>> sums = {
      {0.3f, -1.5f, 7.0f, 0.0f}, {1.2f, 2.5f, -3.0f, 0.125f}, {-0.5f, 0.0f, 4.0f, 2.0f}};
  const std::vector<std::vector<float>> reduced = Reduced("ssgd", batches, sums);
  for (size_t i = 0; i < sums[0].size(); ++i) {
    const double mean = (static_cast<double>(sums[0][i]) + sums[1][i] + sums[2][i]) / 16.0;
    for (int r = 0; r < 3; ++r) EXPECT_NEAR(reduced[r][i], mean, 1e-6) << "rank " << r;
  }
}

TEST(GradientReducer, LocalSgdLeavesEachWorkersOwnMean) {
  const std::vector<int> batches = {4, 12};
  const std::vector<std::vector<float>> sums = {{4.0f, -8.0f, 2.0f}, {12.0f, 6.0f, -3.0f}};
  const std::vector<std::vector<float>> reduced = Reduced("localsgd", batches, sums);
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < sums[r].size(); ++i) {
      EXPECT_NEAR(reduced[r][i], sums[r][i] / batches[r], 1e-6) << "rank " << r << " element " << i;
    }
  }
}

struct Expected {
  std::string strategy;
  bool reducer = false;
  bool averager = false;
  bool updater = false;
};

TEST(Strategy, EachBuiltInStrategyHasTheComponentsAndTraitsItDeclares) {
  const std::vector<Expected> expected = {
      {"ssgd", true, false, false},      {"fp16", true, false, false},
      {"quantized", true, false, false}, {"topk", true, false, false},
      {"dgc", true, false, false},       {"localsgd", true, true, false},
      {"gossip", true, true, false},     {"multistep", false, false, true},
  };
  auto hub = std::make_shared<comm::LoopbackHub>(1);
  comm::TransportCommunicator comm(std::make_unique<comm::LoopbackTransport>(hub, 0));
  for (const Expected& e : expected) {
    job::JobSpec spec = HarnessJob(e.strategy);
    auto created = CreateStrategy(StrategyContextFor(spec, &comm));
    ASSERT_TRUE(created.ok()) << e.strategy << ": " << created.status();
    Strategy& s = **created;
    EXPECT_EQ(s.reducer() != nullptr, e.reducer) << e.strategy;
    EXPECT_EQ(s.averager() != nullptr, e.averager) << e.strategy;
    EXPECT_EQ(s.updater() != nullptr, e.updater) << e.strategy;
    // The descriptor's traits are the instance's; the rest follow from options and devices.
    const StrategyTraits declared = DeclaredTraits(e.strategy);
    EXPECT_EQ(s.traits().applies_momentum, declared.applies_momentum) << e.strategy;
    EXPECT_EQ(s.traits().models_diverge, declared.models_diverge) << e.strategy;
    EXPECT_EQ(s.traits().exchanges_buffers, declared.exchanges_buffers) << e.strategy;
    EXPECT_FALSE(s.traits().reduces_on_device) << e.strategy << ": no device communicator";
  }
  EXPECT_TRUE(DeclaredTraits("dgc").applies_momentum);
  EXPECT_TRUE(DeclaredTraits("gossip").models_diverge);
  EXPECT_TRUE(DeclaredTraits("mp2").uses_parameter_server);
}

}  // namespace
}  // namespace hptrain::sync::testing
