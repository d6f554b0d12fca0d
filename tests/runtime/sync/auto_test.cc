// The compression gate (compression_gate.h) behind strategy auto, quantized's bits dynamic and its
// denseFallback, on the simulation harness with injected step times (no clocks): below the
// threshold the run is ssgd's bit for bit, above it the compressor's; every rank decides the same
// from the times agreed over all ranks.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/sync/compression_gate.h"
#include "tests/runtime/sync/strategy_harness.h"

namespace hptrain::sync::testing {
namespace {

// Every rank computes 1 s per step and waits `exposed` s for communication.
std::function<StepTiming(int, int)> Exposed(double exposed) {
  return [exposed](int, int) {
    StepTiming t;
    t.compute_seconds = 1.0;
    t.comm_seconds = exposed;
    t.exposed_comm_seconds = exposed;
    return t;
  };
}

job::JobSpec Auto(int probe_steps) {
  job::JobSpec spec = HarnessJob("auto");
  spec.strategy.Set("probeSteps", probe_steps);
  return spec;
}

void ExpectBitwise(const SimResult& a, const SimResult& b) {
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t rank = 0; rank < a.params.size(); ++rank) {
    ASSERT_EQ(a.params[rank].size(), b.params[rank].size());
    EXPECT_EQ(std::memcmp(a.params[rank].data(), b.params[rank].data(), 4 * a.params[rank].size()),
              0)
        << "rank " << rank;
  }
}

void ExpectOneDecision(const SimResult& r, const std::string& starts_with) {
  for (size_t rank = 0; rank < r.decisions.size(); ++rank) {
    EXPECT_EQ(r.decisions[rank], r.decisions[0]) << "rank " << rank;
    EXPECT_EQ(r.decisions[rank].rfind(starts_with, 0), 0u) << r.decisions[rank];
  }
}

TEST(Auto, BelowTheThresholdRunsAsSsgdBitForBit) {
  SimOptions o;
  o.steps = 12;
  o.step_timing = Exposed(0.4);  // 40 % of compute, under the default 50 %
  const SimResult ssgd = Simulate(HarnessJob("ssgd"), o);
  const SimResult r = Simulate(Auto(4), o);
  ASSERT_TRUE(ssgd.ok && r.ok) << ssgd.error << r.error;
  ExpectBitwise(ssgd, r);
  ExpectOneDecision(r, "picked fp32 (ssgd's all-reduce): exposed communication 40 % of compute");
  for (int rank = 0; rank < o.world; ++rank) EXPECT_EQ(r.final_bits[rank], 32);
  // The decision's one collective aside (3 floats per rank and measured step, through the ring:
  // under twice that), ssgd's bytes.
  EXPECT_LE(r.bytes_sent[0] - ssgd.bytes_sent[0], 2 * 4 * (o.world * 3 * 3));
  EXPECT_GE(r.bytes_sent[0], ssgd.bytes_sent[0]);
}

TEST(Auto, AboveTheThresholdCompressesAfterTheProbe) {
  SimOptions o;
  o.steps = 12;
  o.step_timing = Exposed(0.6);
  const SimResult ssgd = Simulate(HarnessJob("ssgd"), o);
  const SimResult r = Simulate(Auto(4), o);
  ASSERT_TRUE(ssgd.ok && r.ok) << ssgd.error << r.error;
  ExpectOneDecision(r, "picked quantized 8 bits: exposed communication 60 % of compute");
  EXPECT_NE(r.decisions[0].find("> 50 %"), std::string::npos) << r.decisions[0];
  for (int rank = 0; rank < o.world; ++rank) {
    EXPECT_EQ(r.final_bits[rank], 8);
    EXPECT_EQ(r.params[rank], r.params[0]) << "rank " << rank;
  }
  // 4 fp32 steps, then 8 quantized ones at about a quarter of the bytes.
  const double per_step = ssgd.bytes_sent[0] / static_cast<double>(o.steps);
  EXPECT_LT(r.bytes_sent[0], (4 + 8 * 0.3) * per_step);
  EXPECT_GT(r.bytes_sent[0], 4 * per_step);
}

TEST(Auto, EveryRankDecidesFromTheRankThatWaitedLeastInEachStep) {
  // One rank waits 1.5 s in every step (for the others' backward, say), the rest `wire` s:
  // the wire costs the least of them, whatever each rank saw itself.
  struct Case {
    double wire;
    const char* pick;
  };
  for (const Case& c : {Case{0.4, "picked fp32"}, Case{0.6, "picked quantized"}}) {
    SimOptions o;
    o.steps = 8;
    o.step_timing = [&c](int rank, int step) {
      StepTiming t;
      t.compute_seconds = 1.0;
      // Which rank waits longest changes from step to step.
      t.exposed_comm_seconds = rank == step % 4 ? 1.5 : c.wire;
      return t;
    };
    const SimResult r = Simulate(Auto(4), o);
    ASSERT_TRUE(r.ok) << r.error;
    ExpectOneDecision(r, c.pick);
    EXPECT_NE(r.decisions[0].find(c.wire < 0.5 ? "40 % of compute" : "60 % of compute"),
              std::string::npos)
        << r.decisions[0];
    for (int rank = 1; rank < o.world; ++rank) EXPECT_EQ(r.params[rank], r.params[0]);
  }
  // One rank waited little in every step: the wire is cheap, though the others waited long.
  SimOptions o;
  o.steps = 8;
  o.step_timing = [](int rank, int) {
    StepTiming t;
    t.compute_seconds = 1.0;
    t.exposed_comm_seconds = rank == 2 ? 0.05 : 2.0;
    return t;
  };
  const SimResult r = Simulate(Auto(4), o);
  ASSERT_TRUE(r.ok) << r.error;
  ExpectOneDecision(r, "picked fp32");
}

TEST(Auto, TheThresholdIsAnOption) {
  SimOptions o;
  o.steps = 8;
  o.step_timing = Exposed(0.3);
  job::JobSpec spec = Auto(3);
  spec.strategy.Set("compressAbove", 0.2);
  const SimResult r = Simulate(spec, o);
  ASSERT_TRUE(r.ok) << r.error;
  ExpectOneDecision(r, "picked quantized");
  EXPECT_NE(r.decisions[0].find("> 20 %"), std::string::npos) << r.decisions[0];
}

TEST(Auto, TheFirstStepOfTheProbeIsLeftOut) {
  // Step 0 looks slow (a one-time cost); the steps measured after it are fast.
  SimOptions o;
  o.steps = 8;
  o.step_timing = [](int, int step) {
    StepTiming t;
    t.compute_seconds = 1.0;
    t.exposed_comm_seconds = step == 0 ? 50.0 : 0.1;
    return t;
  };
  const SimResult r = Simulate(Auto(4), o);
  ASSERT_TRUE(r.ok) << r.error;
  ExpectOneDecision(r, "picked fp32");
}

TEST(Auto, NamedCompressorFp16) {
  SimOptions o;
  o.steps = 8;
  o.step_timing = Exposed(1.0);
  job::JobSpec spec = Auto(3);
  spec.strategy.Set("compressor", "fp16");
  const SimResult r = Simulate(spec, o);
  ASSERT_TRUE(r.ok) << r.error;
  ExpectOneDecision(r, "picked fp16");
  EXPECT_EQ(r.final_bits[0], 16);
}

TEST(Auto, ARunShorterThanTheProbeIsSsgd) {
  SimOptions o;
  o.steps = 6;
  o.step_timing = Exposed(5.0);
  const SimResult ssgd = Simulate(HarnessJob("ssgd"), o);
  const SimResult r = Simulate(Auto(20), o);
  ASSERT_TRUE(ssgd.ok && r.ok) << ssgd.error << r.error;
  ExpectBitwise(ssgd, r);
  EXPECT_EQ(r.decisions[0], "probing in fp32 until step 20");
  EXPECT_EQ(ssgd.bytes_sent, r.bytes_sent);
}

TEST(Auto, TheDecisionIsCheckpointed) {
  SimOptions o;
  o.steps = 6;
  o.save_state = true;
  o.step_timing = Exposed(1.0);
  const SimResult r = Simulate(Auto(3), o);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.sections[0].count("auto.gate"), 1u);
  EXPECT_EQ(r.sections[0].at("auto.gate"), std::vector<float>{1.0f});
}

// A resumed run keeps the checkpoint's decision and does not probe again.
TEST(CompressionGate, RestoredDecisionStandsWithoutAProbe) {
  comm::TransportCommunicator comm(
      std::make_unique<comm::LoopbackTransport>(std::make_shared<comm::LoopbackHub>(1), 0));
  GateOptions options;
  options.probe_steps = 5;
  CompressionGate gate(options, &comm);
  gate.Restore({1.0f});
  gate.Start(100);
  EXPECT_EQ(gate.choice(), CompressionGate::Choice::kCompressed);
  auto choice = gate.Decide(100);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(*choice, CompressionGate::Choice::kCompressed);
  EXPECT_EQ(gate.describe(), "decided before the checkpoint this run resumed from");
  EXPECT_EQ(gate.Save(), std::vector<float>{1.0f});
  // Without a saved decision it probes from the resumed step.
  CompressionGate fresh(options, &comm);
  fresh.Restore({});
  fresh.Start(100);
  EXPECT_EQ(fresh.describe(), "probing in fp32 until step 105");
  EXPECT_TRUE(fresh.Save().empty());
}

// quantized with a fixed width and denseFallback: the same gate.
TEST(DenseFallback, QuantizedStaysSsgdOnAFastLinkAndCompressesOnASlowOne) {
  SimOptions o;
  o.steps = 10;
  job::JobSpec spec = HarnessJob("quantized");
  spec.strategy.Set("bits", 4);
  spec.strategy.Set("denseFallback", true);
  spec.strategy.Set("probeSteps", 3);
  const SimResult ssgd = Simulate(HarnessJob("ssgd"), o);
  o.step_timing = Exposed(0.1);
  const SimResult fast = Simulate(spec, o);
  o.step_timing = Exposed(0.6);
  const SimResult slow = Simulate(spec, o);
  ASSERT_TRUE(ssgd.ok && fast.ok && slow.ok) << ssgd.error << fast.error << slow.error;
  ExpectBitwise(ssgd, fast);
  ExpectOneDecision(fast, "picked fp32");
  ExpectOneDecision(slow, "picked 4 bits");
  EXPECT_EQ(slow.final_bits[0], 4);
  EXPECT_LT(slow.bytes_sent[0], ssgd.bytes_sent[0] / 2);
}

// bits dynamic probes at 32 bits first: on a fast link it is ssgd's run.
TEST(DynamicBits, ProbesInFp32AndStaysThereOnAFastLink) {
  SimOptions o;
  o.steps = 10;
  o.step_timing = Exposed(0.05);
  job::JobSpec spec = HarnessJob("quantized");
  spec.strategy.Set("bits", "dynamic");
  spec.strategy.Set("probeSteps", 3);
  const SimResult ssgd = Simulate(HarnessJob("ssgd"), o);
  const SimResult r = Simulate(spec, o);
  ASSERT_TRUE(ssgd.ok && r.ok) << ssgd.error << r.error;
  ExpectBitwise(ssgd, r);
  ExpectOneDecision(r, "picked fp32 (ssgd's all-reduce) to start with");
  EXPECT_EQ(r.final_bits[0], 32);
}

}  // namespace
}  // namespace hptrain::sync::testing
