// docs/algorithms.md §3d checks for multistep (the sub-tensor scheduler's checks do not apply: it is
// not implemented), and those of its options: the compressed round all-reduce and delay 1.
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/collectives.h"
#include "runtime/comm/communicator.h"
#include "runtime/base/status.h"
#include "runtime/sync/strategy_options_check.h"
#include "runtime/comm/bucketed_reducer.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/sync/codecs/quantize_codec.h"
#include "runtime/sync/registry.h"
#include "tests/runtime/sync/strategy_harness.h"

namespace hptrain::sync::testing {
namespace {

bool Identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

job::JobSpec Multistep(int interval) {
  job::JobSpec spec = HarnessJob("multistep");
  if (interval != 0) spec.strategy.Set("interval", interval);  // 0: adaptive
  return spec;
}

job::JobSpec Delayed(int interval) {
  job::JobSpec spec = Multistep(interval);
  spec.strategy.Set("delay", 1);
  return spec;
}

// Momentum 0.9 and weight decay 1e-4 (the harness job): the same all-reduce of the same buckets,
// the same division by B, the same update kernel, so bit for bit.
TEST(Multistep, IntervalOneIsSsgdWithMomentumBitForBit) {
  SimOptions options;
  SimResult ssgd = Simulate(HarnessJob("ssgd"), options);
  ASSERT_TRUE(ssgd.ok) << ssgd.error;
  job::JobSpec adaptive_capped = HarnessJob("multistep");
  adaptive_capped.strategy.Set("hMax", 1);
  job::JobSpec warmup = Multistep(8);
  warmup.strategy.Set("warmupEpochs", 100);
  for (const job::JobSpec& spec : {Multistep(1), adaptive_capped, warmup}) {
    SimResult r = Simulate(spec, options);
    ASSERT_TRUE(r.ok) << r.error;
    for (int rank = 0; rank < options.world; ++rank) {
      EXPECT_TRUE(Identical(r.params[rank], ssgd.params[0]))
          << "interval " << spec.strategy.String("interval") << " hMax "
          << spec.strategy.Int("hMax")
          << " warm-up " << spec.strategy.Number("warmupEpochs") << ", rank " << rank;
    }
  }
}

// Several buckets (backward hands the last layers' first), as a model larger than one bucket has.
TEST(Multistep, SeveralBucketsAreSsgdBitForBit) {
  SimOptions options;
  options.bucket_bytes = 16u << 10;  // LeNet-5's tensors in several buckets
  SimResult ssgd = Simulate(HarnessJob("ssgd"), options);
  ASSERT_TRUE(ssgd.ok) << ssgd.error;
  SimResult r = Simulate(Multistep(1), options);
  ASSERT_TRUE(r.ok) << r.error;
  for (int rank = 0; rank < options.world; ++rank) {
    EXPECT_TRUE(Identical(r.params[rank], ssgd.params[0])) << "rank " << rank;
  }
  SimResult rounds = Simulate(Multistep(4), options);
  ASSERT_TRUE(rounds.ok) << rounds.error;
}

void ExpectIdenticalRanks(const SimResult& r, const std::string& what) {
  for (size_t rank = 1; rank < r.params.size(); ++rank) {
    EXPECT_TRUE(Identical(r.params[0], r.params[rank])) << what << ", rank " << rank;
  }
}

// Runs `spec` for 18 steps (the last round of `interval` cut short by the final Synchronize)
// with the global momentum saved, and checks that every rank holds the same model at the end of
// every round and the same global momentum at the end; *rounds gets each rank's models at the
// round ends.
SimResult ExpectRanksAgreeAtRoundEnds(const job::JobSpec& spec, SimOptions options, int interval,
                                      const std::string& what,
                                      std::vector<std::vector<std::vector<float>>>* rounds) {
  options.steps = 18;
  options.save_state = true;
  rounds->assign(options.world, {});
  options.after_step = [&](int rank, int step, const std::vector<float>& params) {
    if ((step + 1) % interval == 0) (*rounds)[rank].push_back(params);
  };
  SimResult r = Simulate(spec, options);
  EXPECT_TRUE(r.ok) << what << ": " << r.error;
  if (!r.ok) return r;
  EXPECT_EQ((*rounds)[0].size(), 4u) << what;
  if ((*rounds)[0].size() != 4u) return r;
  for (int rank = 1; rank < options.world; ++rank) {
    for (size_t k = 0; k < (*rounds)[0].size(); ++k) {
      EXPECT_TRUE(Identical((*rounds)[0][k], (*rounds)[rank][k]))
          << what << ", round " << k << ", rank " << rank;
    }
    EXPECT_TRUE(Identical(r.sections[0].at("multistep.momentum"),
                          r.sections[rank].at("multistep.momentum")))
        << what << ", global momentum, rank " << rank;
  }
  return r;
}

TEST(Multistep, RanksAgreeOnTheGlobalModelAfterEveryRound) {
  constexpr int kInterval = 4;
  job::JobSpec spec = Multistep(kInterval);
  spec.strategy.Set("mu", 0.01);
  std::vector<std::vector<std::vector<float>>> rounds;
  SimResult r = ExpectRanksAgreeAtRoundEnds(spec, SimOptions(), kInterval, "uncompressed", &rounds);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(rounds[0].size(), 4u);
  ExpectIdenticalRanks(r, "after the short round");
  EXPECT_FALSE(Identical(rounds[0][0], rounds[0][1]));
}

TEST(Multistep, PlainSgdRoundMovesAsFarAsIntervalSsgdSteps) {
  // The harness's gradients do not depend on the model: with plain SGD one global step with the
  // round's summed gradients, and the average of the models after the round's local steps, both
  // equal the round's ssgd steps (up to summation order).
  for (const std::string update : {"delayed", "average"}) {
    SCOPED_TRACE("update " + update);
    SimOptions options;
    options.steps = 16;
    job::JobSpec spec = Multistep(4);
    spec.strategy.Set("update", update);
    spec.optimizer.momentum = 0;
    spec.optimizer.weight_decay = 0;
    job::JobSpec ssgd_spec = HarnessJob("ssgd");
    ssgd_spec.optimizer.momentum = 0;
    ssgd_spec.optimizer.weight_decay = 0;
    SimResult r = Simulate(spec, options);
    SimResult ssgd = Simulate(ssgd_spec, options);
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_TRUE(ssgd.ok) << ssgd.error;
    float worst = 0;
    for (size_t i = 0; i < r.params[0].size(); ++i) {
      worst = std::max(worst, std::fabs(r.params[0][i] - ssgd.params[0][i]));
    }
    EXPECT_LE(worst, 1e-5f);
  }
}

// update: average (the default). Two rounds of H = 4 with rank-specific gradients and unequal
// batches, against a double-precision replay of the rule: every rank takes H local momentum-SGD
// steps from (x̄, m̄), x̄ ← Σ_i (b_i/B)·x_i, m̄ ← (x̄_old − x̄)/(η·H). A plain mean, the delayed
// global step or a momentum left behind at the first average would each miss by far more.
TEST(Multistep, AverageIsTheWeightedMeanOfTheWorkersModels) {
  constexpr int kInterval = 4;
  SimOptions options;
  options.steps = 2 * kInterval;
  options.local_batches = {8, 16, 16, 24};
  options.synchronize_at_end = false;
  std::vector<std::vector<float>> rank0(options.steps);
  std::vector<std::vector<std::vector<float>>> ends(options.world);
  options.after_step = [&](int rank, int step, const std::vector<float>& params) {
    if (rank == 0) rank0[step] = params;
    if ((step + 1) % kInterval == 0) ends[rank].push_back(params);
  };
  const job::JobSpec spec = Multistep(kInterval);
  SimResult r = Simulate(spec, options);
  ASSERT_TRUE(r.ok) << r.error;

  size_t n = 0;
  for (size_t t : options.tensor_sizes) n += t;
  const double lr = spec.optimizer.lr, beta = spec.optimizer.momentum;
  const double wd = spec.optimizer.weight_decay;
  std::vector<double> global(n), momentum(n, 0.0);
  for (size_t i = 0; i < n; ++i) global[i] = 0.01f * std::cos(0.01f * i);  // the harness's x_0
  auto gradient = [](int rank, int step, size_t i) {  // the harness's default
    return std::sin(0.001f * static_cast<float>(i) + 0.3f * rank + 0.7f * step) * 0.5f +
           0.01f * rank;
  };
  for (int round = 0; round < 2; ++round) {
    std::vector<double> mean(n, 0.0);
    for (int rank = 0; rank < options.world; ++rank) {
      std::vector<double> x = global, m = momentum;
      const double b = options.local_batches[rank];
      for (int h = 0; h < kInterval; ++h) {
        for (size_t i = 0; i < n; ++i) {
          m[i] = beta * m[i] + gradient(rank, round * kInterval + h, i) / b + wd * x[i];
          x[i] -= lr * m[i];
        }
      }
      for (size_t i = 0; i < n; ++i) mean[i] += b / options.global_batch * x[i];
    }
    for (size_t i = 0; i < n; ++i) {
      momentum[i] = (global[i] - mean[i]) / (lr * kInterval);
      global[i] = mean[i];
    }
    const std::vector<float>& got = rank0[(round + 1) * kInterval - 1];
    double worst = 0;
    for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(got[i] - global[i]));
    EXPECT_LE(worst, 1e-6) << "round " << round;
    for (int rank = 1; rank < options.world; ++rank) {
      EXPECT_TRUE(Identical(ends[rank][round], ends[0][round])) << "round " << round;
    }
  }
  // Inside a round the models are the ranks' own (their gradients differ).
  EXPECT_FALSE(Identical(rank0[kInterval], rank0[kInterval + 1]));
  // Every round-end all-reduce is one ring pass over the model: no more bytes than delayed.
  job::JobSpec delayed = spec;
  delayed.strategy.Set("update", "delayed");
  SimResult d = Simulate(delayed, options);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(r.bytes_sent, d.bytes_sent);
}

// An explicit update: average with delay 1 is refused (delay 1 takes the delayed global step).
TEST(Multistep, AverageWithDelayOneIsRefused) {
  job::JobSpec spec = Delayed(4);
  EXPECT_TRUE(CheckStrategyOptions(spec.strategy, "spec.strategy").ok());
  spec.strategy.Set("update", "average");
  EXPECT_THAT(std::string(CheckStrategyOptions(spec.strategy, "spec.strategy").message()),
              ::testing::HasSubstr("spec.strategy.update: average applies only with delay 0"));
  spec.strategy.Set("update", "delayed");
  EXPECT_TRUE(CheckStrategyOptions(spec.strategy, "spec.strategy").ok());
  spec = Multistep(4);
  spec.strategy.Set("update", "sideways");
  EXPECT_THAT(std::string(CheckStrategyOptions(spec.strategy, "spec.strategy").message()),
              ::testing::HasSubstr("spec.strategy.update"));
}

TEST(Multistep, SendsOneAllReducePerRound) {
  SimOptions options;
  options.steps = 24;
  const double p = static_cast<double>(Parameters(options));
  const double ring = 2.0 * 3 / 4 * 4 * p;  // one all-reduce of the parameters, N = 4
  for (int interval : {1, 4, 8}) {
    SimResult r = Simulate(Multistep(interval), options);
    ASSERT_TRUE(r.ok) << r.error;
    const double rounds = static_cast<double>(options.steps) / interval;
    EXPECT_NEAR(r.bytes_sent[0], rounds * ring, 0.01 * rounds * ring) << "interval " << interval;
    // BatchNorm buffers are averaged at the end of every round of local steps (none at H = 1,
    // which is ssgd).
    std::vector<int> ends;
    for (int s = interval - 1; interval > 1 && s < options.steps; s += interval) ends.push_back(s);
    EXPECT_EQ(r.synchronized_steps, ends) << "interval " << interval;
  }
  // Adaptive, 3 epochs of 8 steps at H_0 = 8: 3 rounds, and nothing more for the interval (it
  // reads the epoch loss the trainer already agreed on).
  options.steps_per_epoch = 8;
  options.epoch_timing = [](int) {
    EpochTiming t;
    t.train_loss = 2.0;
    return t;
  };
  SimResult r = Simulate(HarnessJob("multistep"), options);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_GE(r.bytes_sent[0], 3 * ring * 0.99);
  EXPECT_LE(r.bytes_sent[0], 3 * ring * 1.01);
}

SimResult AdaptiveRun(job::JobSpec spec, std::function<double(int epoch)> loss, int epochs) {
  SimOptions options;
  options.tensor_sizes = {100, 10};
  options.steps_per_epoch = 4;
  options.steps = 4 * epochs;
  options.epoch_timing = [loss](int epoch) {
    EpochTiming t;
    t.epoch = epoch;
    t.train_loss = loss(epoch);
    return t;
  };
  return Simulate(spec, options);
}

TEST(Multistep, ConstantLossKeepsTheInitialInterval) {
  job::JobSpec spec = HarnessJob("multistep");
  spec.strategy.Set("interval", "adaptive");
  spec.strategy.Set("warmupEpochs", 1);
  SimResult r = AdaptiveRun(spec, [](int) { return 2.3; }, 6);
  ASSERT_TRUE(r.ok) << r.error;
  // Epoch 0 is warm-up (SSGD, interval 1) and gives F_0; then H_0 = 8 throughout.
  EXPECT_EQ(r.intervals, (std::vector<int>{1, 8, 8, 8, 8, 8}));
}

TEST(Multistep, IntervalFollowsTheLossWithinItsBounds) {
  job::JobSpec spec = HarnessJob("multistep");
  spec.strategy.Set("hMin", 2);
  spec.strategy.Set("hMax", 12);
  // Falling loss: sqrt(F/F_0) shrinks, so does H, never below hMin.
  SimResult falling = AdaptiveRun(spec, [](int e) { return 2.0 * std::pow(0.3, e); }, 30);
  ASSERT_TRUE(falling.ok) << falling.error;
  for (int h : falling.intervals) {
    EXPECT_GE(h, 2);
    EXPECT_LE(h, 12);
  }
  EXPECT_EQ(falling.intervals.front(), 8);
  EXPECT_EQ(falling.intervals.back(), 2);
  for (size_t k = 1; k < falling.intervals.size(); ++k) {
    EXPECT_LE(falling.intervals[k], falling.intervals[k - 1]);
  }
  // Rising loss: H grows, never above hMax.
  SimResult rising = AdaptiveRun(spec, [](int e) { return 1.0 + e; }, 30);
  ASSERT_TRUE(rising.ok) << rising.error;
  for (int h : rising.intervals) EXPECT_LE(h, 12);
  EXPECT_EQ(rising.intervals.back(), 12);
  // H_0 outside the bounds is clamped.
  spec.strategy.Set("hMax", 4);
  SimResult capped = AdaptiveRun(spec, [](int) { return 1.0; }, 3);
  ASSERT_TRUE(capped.ok) << capped.error;
  EXPECT_EQ(capped.intervals, (std::vector<int>{4, 4, 4}));
}

TEST(Multistep, RejectsAdam) {
  job::JobSpec spec = Multistep(4);
  spec.optimizer.type = "adam";
  SimResult r = Simulate(spec, SimOptions());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("spec.optimizer.type"), std::string::npos) << r.error;
}

// --- compression (spec.strategy.compression) ----------------------------------------------------

job::JobSpec Compressed(int interval, const std::string& type, int bits = 0) {
  job::JobSpec spec = Multistep(interval);
  if (!type.empty()) spec.strategy.Set("compression.type", type);
  if (bits != 0) spec.strategy.Set("compression.bits", bits);
  return spec;
}

// A quadratic with its minimum elsewhere on every rank: rank r's summed gradient over its b
// samples is b·(x − c_r), so together the workers minimise ½‖x − c̄‖², c̄ the mean of the c_r.
// The gradient reads the rank's model after its previous step (SimOptions::after_step).
class Quadratic {
 public:
  explicit Quadratic(SimOptions* options)
      : world_(options->world), batch_(options->global_batch / options->world) {
    for (size_t i = 0; i < Parameters(*options); ++i) {
      initial_.push_back(0.01f * std::cos(0.01f * i));  // the harness's initial model
    }
    current_.assign(world_, initial_);
    options->gradient = [this](int rank, int, size_t i) {
      return static_cast<float>(batch_) * (current_[rank][i] - Target(rank, i));
    };
    options->after_step = [this](int rank, int, const std::vector<float>& x) {
      current_[rank] = x;
    };
  }

  double Loss(const std::vector<float>& x) const {
    double loss = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      double mean = 0;
      for (int r = 0; r < world_; ++r) mean += Target(r, i) / world_;
      loss += 0.5 * (x[i] - mean) * (x[i] - mean);
    }
    return loss;
  }
  double InitialLoss() const { return Loss(initial_); }

 private:
  static float Target(int rank, size_t i) { return std::sin(0.37f * i + rank); }

  int world_;
  int batch_;
  std::vector<float> initial_;
  std::vector<std::vector<float>> current_;  // per rank; each touched by its own thread only
};

// A compressed round of H = 1 all-reduces what the quantized (fp16) strategy all-reduces, with the
// same codec, then takes ssgd's update: so it is that strategy's step, bits and bytes alike.
TEST(MultistepCompression, IntervalOneIsTheQuantizedStrategyBitForBit) {
  SimOptions options;
  options.bucket_bytes = 64u << 10;  // several buckets, each with its own codec
  for (const auto& [type, bits] : std::vector<std::pair<std::string, int>>{
           {"quantized", 8}, {"quantized", 4}, {"quantized", 0}, {"fp16", 0}}) {
    job::JobSpec reference = HarnessJob(type);
    if (type == "quantized") reference.strategy.Set("bits", std::to_string(bits != 0 ? bits : 8));
    SimResult expected = Simulate(reference, options);
    ASSERT_TRUE(expected.ok) << expected.error;
    SimResult r = Simulate(Compressed(1, type, bits), options);
    ASSERT_TRUE(r.ok) << r.error;
    for (int rank = 0; rank < options.world; ++rank) {
      EXPECT_TRUE(Identical(r.params[rank], expected.params[rank]))
          << type << " " << bits << ", rank " << rank;
      EXPECT_EQ(r.bytes_sent[rank], expected.bytes_sent[rank]) << type << " " << bits;
    }
  }
}

TEST(MultistepCompression, RanksAgreeAfterEveryRound) {
  constexpr int kInterval = 4;
  SimOptions options;
  options.steps = 18;
  options.bucket_bytes = 64u << 10;
  for (const std::string& type : {"quantized", "fp16"}) {
    job::JobSpec spec = Compressed(kInterval, type, type == "quantized" ? 2 : 0);
    spec.strategy.Set("mu", 0.01);
    std::vector<std::vector<std::vector<float>>> rounds;
    SimResult r = ExpectRanksAgreeAtRoundEnds(spec, options, kInterval, type, &rounds);
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(rounds[0].size(), 4u);
    ExpectIdenticalRanks(r, type + " after the short round");
    // Lossy: not the uncompressed run.
    SimResult plain = Simulate(Multistep(kInterval), options);
    ASSERT_TRUE(plain.ok) << plain.error;
    EXPECT_FALSE(Identical(r.params[0], plain.params[0])) << type;
  }
}

// The compressed ring's bytes, rank by rank: each of its two passes sends the encodings of all N
// chunks of the buffer but one (reduce-scatter: all but chunk r+1, which rank r ends up owning;
// all-gather: all but chunk r+2, the last one forwarded to it).
int64_t CompressedRingBytes(const comm::ChunkCodec& codec, size_t count, int world, int rank) {
  int64_t bytes = 0;
  for (int chunk = 0; chunk < world; ++chunk) {
    size_t begin = 0, end = 0;
    comm::ChunkRange(count, world, chunk, &begin, &end);
    const int64_t encoded = static_cast<int64_t>(codec.EncodedBytes(end - begin));
    bytes += (chunk != (rank + 1) % world) * encoded + (chunk != (rank + 2) % world) * encoded;
  }
  return bytes;
}

TEST(MultistepCompression, BytesPerRoundAreTheEncodingsOfTheBuckets) {
  constexpr int kInterval = 4;
  SimOptions options;
  options.steps = 24;  // 6 rounds
  options.bucket_bytes = 64u << 10;
  // The buckets of the harness's reducer.
  std::vector<size_t> buckets;
  {
    comm::BucketedReducer reducer(options.tensor_sizes, options.bucket_bytes,
                                  [](int, float*, size_t) { return absl::OkStatus(); });
    for (int k = 0; k < reducer.num_buckets(); ++k) {
      buckets.push_back(reducer.bucket_range(k).second - reducer.bucket_range(k).first);
    }
  }
  size_t total = 0;
  for (size_t b : buckets) total += b;
  ASSERT_EQ(total, Parameters(options));
  ASSERT_GT(buckets.size(), 1u);

  for (int bits : {1, 2, 4, 8}) {
    SimResult r = Simulate(Compressed(kInterval, "quantized", bits), options);
    ASSERT_TRUE(r.ok) << r.error;
    QuantizeCodec codec(bits, 512, 0, 0, 0);
    for (int rank = 0; rank < options.world; ++rank) {
      int64_t per_round = 0;
      for (size_t b : buckets) per_round += CompressedRingBytes(codec, b, options.world, rank);
      EXPECT_EQ(r.bytes_sent[rank], 6 * per_round) << bits << " bits, rank " << rank;
    }
    // And the quantized strategy sends the same per step as multistep per round (its test
    // bounds that by 30 % of ssgd's at 8 bits).
    job::JobSpec quantized = HarnessJob("quantized");
    quantized.strategy.Set("bits", std::to_string(bits));
    SimOptions one_round_per_step = options;
    one_round_per_step.steps = 6;
    SimResult q = Simulate(quantized, one_round_per_step);
    ASSERT_TRUE(q.ok) << q.error;
    EXPECT_EQ(r.bytes_sent, q.bytes_sent) << bits << " bits";
  }
}

TEST(MultistepCompression, TrainingStillDecreasesTheLoss) {
  for (const job::JobSpec& spec :
       {Compressed(4, "quantized", 8), Compressed(4, "quantized", 4), Compressed(4, "fp16")}) {
    SimOptions options;
    options.steps = 40;
    Quadratic quadratic(&options);
    SimResult r = Simulate(spec, options);
    ASSERT_TRUE(r.ok) << r.error;
    ExpectIdenticalRanks(r, spec.strategy.String("compression.type"));
    EXPECT_LT(quadratic.Loss(r.params[0]), 0.05 * quadratic.InitialLoss())
        << spec.strategy.String("compression.type") << " " << spec.strategy.Int("compression.bits");
  }
}

// --- delay 1 ---------------------------------------------------------------------------------

// The gradients differ between ranks only at the last step of each round: the local steps, hence
// the drift each rank keeps at a rebase, are then the same on every rank, and the models agree
// after every step exactly when every rank applies the same Ā_r at the same step.
TEST(MultistepDelay, RanksAgreeOnTheGlobalModelAtEveryRebase) {
  constexpr int kInterval = 4;
  SimOptions options;
  options.steps = 26;
  options.gradient = [](int rank, int step, size_t i) {
    const float g = std::sin(0.001f * static_cast<float>(i) + 0.7f * step) * 0.5f;
    return step % kInterval == kInterval - 1 ? g + 0.2f * rank + 0.01f * std::cos(0.3f * i * rank)
                                             : g;
  };
  std::vector<std::vector<std::vector<float>>> steps(options.world);
  options.after_step = [&](int rank, int, const std::vector<float>& params) {
    steps[rank].push_back(params);
  };
  job::JobSpec spec = Delayed(kInterval);
  spec.strategy.Set("mu", 0.01);
  SimResult r = Simulate(spec, options);
  ASSERT_TRUE(r.ok) << r.error;
  for (int rank = 1; rank < options.world; ++rank) {
    ASSERT_EQ(steps[rank].size(), steps[0].size());
    for (size_t s = 0; s < steps[0].size(); ++s) {
      EXPECT_TRUE(Identical(steps[0][s], steps[rank][s])) << "step " << s << ", rank " << rank;
    }
  }
  ExpectIdenticalRanks(r, "after Synchronize");
  // Gradients that do not depend on the model give every round the accumulator it has with
  // delay 0, so once drained, delay 1 has taken delay 0's global steps: the same x̄, bit for bit.
  std::vector<std::vector<float>> delay0_steps;
  options.after_step = [&](int rank, int, const std::vector<float>& params) {
    if (rank == 0) delay0_steps.push_back(params);
  };
  job::JobSpec delay0 = Multistep(kInterval);
  delay0.strategy.Set("update", "delayed");  // the global step delay 1 takes
  SimResult sync = Simulate(delay0, options);
  ASSERT_TRUE(sync.ok) << sync.error;
  EXPECT_TRUE(Identical(r.params[0], sync.params[0]));
  // Round 0 ends without a correction (delay 0 moves to x̄ there); step H of a round takes no
  // local step, so round 1's end moves the model only by the rebase.
  EXPECT_FALSE(Identical(steps[0][kInterval - 1], delay0_steps[kInterval - 1]));
  EXPECT_FALSE(Identical(steps[0][2 * kInterval - 1], steps[0][2 * kInterval - 2]));
}

// Rank-specific gradients throughout: the models differ by their drift during the rounds, and
// Synchronize (pending round applied, open round all-reduced) leaves every rank at one x̄.
TEST(MultistepDelay, RanksAgreeAfterSynchronize) {
  for (int steps : {16, 17, 18, 19}) {  // ending at a round's end, and 1, 2, 3 steps into one
    SimOptions options;
    options.steps = steps;
    options.save_state = true;
    job::JobSpec spec = Delayed(4);
    spec.strategy.Set("mu", 0.01);
    SimResult r = Simulate(spec, options);
    ASSERT_TRUE(r.ok) << r.error;
    ExpectIdenticalRanks(r, "steps " + std::to_string(steps));
    for (int rank = 1; rank < options.world; ++rank) {
      EXPECT_TRUE(Identical(r.sections[0].at("multistep.momentum"),
                            r.sections[rank].at("multistep.momentum")))
          << "steps " << steps << ", rank " << rank;
    }
    // A rebased round ends with models that differ by their drift: never reported as agreeing.
    EXPECT_TRUE(r.synchronized_steps.empty());
  }
}

// H = 1: no local step, so a rebase is x_i ← x̄ + 0 and every step shows x̄ itself, on every rank.
TEST(MultistepDelay, IntervalOneShowsTheGlobalModelEveryStep) {
  SimOptions options;
  std::vector<std::vector<std::vector<float>>> steps(options.world);
  options.after_step = [&](int rank, int, const std::vector<float>& params) {
    steps[rank].push_back(params);
  };
  SimResult r = Simulate(Delayed(1), options);
  ASSERT_TRUE(r.ok) << r.error;
  for (int rank = 1; rank < options.world; ++rank) {
    for (size_t s = 0; s < steps[0].size(); ++s) {
      EXPECT_TRUE(Identical(steps[0][s], steps[rank][s])) << "step " << s << ", rank " << rank;
    }
  }
  // The harness's gradients do not depend on the model, so the global steps are ssgd's, one step
  // late: step 0 only starts its exchange, step s applies step s − 1's gradient, and Synchronize
  // applies the last one. Bit for bit: the same division and update kernel as ssgd.
  std::vector<std::vector<float>> ssgd_steps;
  SimOptions ssgd_options;
  ssgd_options.after_step = [&](int rank, int, const std::vector<float>& params) {
    if (rank == 0) ssgd_steps.push_back(params);
  };
  SimResult ssgd = Simulate(HarnessJob("ssgd"), ssgd_options);
  ASSERT_TRUE(ssgd.ok) << ssgd.error;
  std::vector<float> initial;
  for (size_t i = 0; i < Parameters(options); ++i) initial.push_back(0.01f * std::cos(0.01f * i));
  EXPECT_TRUE(Identical(steps[0][0], initial));
  for (size_t s = 1; s < steps[0].size(); ++s) {
    EXPECT_TRUE(Identical(steps[0][s], ssgd_steps[s - 1])) << "step " << s;
  }
  EXPECT_TRUE(Identical(r.params[0], ssgd.params[0]));
}

TEST(MultistepDelay, SendsWhatDelayZeroSends) {
  SimOptions options;
  options.steps = 24;
  for (int interval : {1, 4, 8}) {
    SimResult delayed = Simulate(Delayed(interval), options);
    SimResult sync = Simulate(Multistep(interval), options);
    ASSERT_TRUE(delayed.ok && sync.ok) << delayed.error << sync.error;
    EXPECT_EQ(delayed.bytes_sent, sync.bytes_sent) << "interval " << interval;
  }
  job::JobSpec compressed = Delayed(4);
  compressed.strategy.Set("compression.type", "quantized");
  compressed.strategy.Set("compression.bits", 4);
  SimResult delayed = Simulate(compressed, options);
  SimResult sync = Simulate(Compressed(4, "quantized", 4), options);
  ASSERT_TRUE(delayed.ok && sync.ok) << delayed.error << sync.error;
  EXPECT_EQ(delayed.bytes_sent, sync.bytes_sent) << "compressed";
  ExpectIdenticalRanks(delayed, "compressed, delay 1");
}

// Warm-up rounds are SSGD steps, delay or not; the overlap starts with the first round after.
TEST(MultistepDelay, WarmupIsSsgdBitForBit) {
  SimOptions options;
  options.steps = 8;
  options.steps_per_epoch = 8;
  job::JobSpec spec = Delayed(4);
  spec.strategy.Set("warmupEpochs", 1);
  SimResult ssgd = Simulate(HarnessJob("ssgd"), options);
  SimResult r = Simulate(spec, options);
  ASSERT_TRUE(ssgd.ok && r.ok) << ssgd.error << r.error;
  for (int rank = 0; rank < options.world; ++rank) {
    EXPECT_TRUE(Identical(r.params[rank], ssgd.params[0])) << "rank " << rank;
  }
}

TEST(MultistepDelay, TrainingStillDecreasesTheLoss) {
  job::JobSpec compressed = Delayed(4);
  compressed.strategy.Set("compression.type", "quantized");
  compressed.strategy.Set("compression.bits", 8);
  // lr 0.05, not the harness's 0.1: a gradient one round late with momentum β is stable only
  // for η·curvature < 1 − β at H = 1 (the delayed heavy ball, z² − (1 + β)·z + β + η = 0), and
  // this quadratic's curvature is 1.
  for (job::JobSpec spec : {Delayed(1), Delayed(4), compressed}) {
    spec.optimizer.lr = 0.05;
    SimOptions options;
    options.steps = 60;
    Quadratic quadratic(&options);
    SimResult r = Simulate(spec, options);
    ASSERT_TRUE(r.ok) << r.error;
    ExpectIdenticalRanks(r, "interval " + spec.strategy.String("interval"));
    EXPECT_LT(quadratic.Loss(r.params[0]), 0.05 * quadratic.InitialLoss())
        << "interval " << spec.strategy.String("interval") << " "
        << spec.strategy.String("compression.type");
  }
}

// --- driving the hooks directly ----------------------------------------------------------------

// One rank of a strategy over one gradient bucket of `n` elements, its hooks called as the trainer
// calls them, for what the harness does not expose: stats, a Synchronize in the middle of a run,
// a restart from saved sections, a peer that stops. The gradient is the quadratic's: b·(x − c_r).
class DirectRank {
 public:
  DirectRank(const job::JobSpec& spec, std::shared_ptr<comm::LoopbackHub> hub, int rank, size_t n,
             std::vector<float> params, const CheckpointSections& restored = {})
      : spec_(spec),
        comm_(std::make_unique<comm::LoopbackTransport>(std::move(hub), rank)),
        params_(std::move(params)),
        gradient_(n) {
    auto created = CreateStrategy(StrategyContextFor(spec_, &comm_));
    if (!created.ok()) {
      status_ = created.status();
      return;
    }
    strategy_ = *std::move(created);
    GradientLayout layout;
    layout.tensors = {{0, n}};
    layout.buckets = {{0, n}};
    status_ = strategy_->Init(layout);
    if (status_.ok()) status_ = strategy_->Start(absl::MakeSpan(params_), 0, restored);
  }

  static float Target(int rank, size_t i) { return 0.5f + 0.25f * rank - 0.125f * i; }

  absl::Status Step(int64_t step) {
    if (!status_.ok()) return status_;
    StepInfo info;
    info.step = step;
    info.global_batch = spec_.global_batch_size;
    info.local_batch = spec_.global_batch_size / comm_.size();
    info.lr = spec_.optimizer.lr;
    for (size_t i = 0; i < gradient_.size(); ++i) {
      gradient_[i] = info.local_batch * (params_[i] - Target(comm_.rank(), i));
    }
    HPTRAIN_RETURN_IF_ERROR(
        strategy_->updater()
            ->Accumulate(info, 0, comm::BufferRef::Host(gradient_.data(), gradient_.size()))
            ->Wait());
    return strategy_->updater()->Update(info, absl::MakeSpan(params_)).status();
  }

  absl::Status Synchronize(int64_t steps_done) {
    if (!status_.ok()) return status_;
    return strategy_->Synchronize(steps_done, absl::MakeSpan(params_));
  }

  Strategy& strategy() { return *strategy_; }
  const std::vector<float>& params() const { return params_; }

 private:
  const job::JobSpec spec_;
  comm::TransportCommunicator comm_;
  std::vector<float> params_;
  std::vector<float> gradient_;
  std::unique_ptr<Strategy> strategy_;
  absl::Status status_;
};

std::vector<float> Ramp(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = 0.1f * static_cast<float>(i) - 0.2f;
  return x;
}

// Delay 1 on one rank (the all-reduce is the identity) against the algorithm written out in
// double: local steps with the proximal term toward the stale x̄, the global step with round r's
// accumulator at the end of round r+1, the rebase, and the drain of Synchronize.
TEST(MultistepDelay, OneRankFollowsTheHandComputedReference) {
  constexpr size_t kN = 3;
  constexpr int kH = 3;
  constexpr int kSteps = 11;  // 3 rounds and 2 steps of a fourth
  job::JobSpec spec = Delayed(kH);
  spec.global_batch_size = 4;
  spec.optimizer.lr = 0.05;
  spec.optimizer.momentum = 0.9;
  spec.optimizer.weight_decay = 0.01;
  spec.strategy.Set("mu", 0.1);
  const double eta = spec.optimizer.lr, beta = spec.optimizer.momentum;
  const double lambda = spec.optimizer.weight_decay, mu = spec.strategy.Number("mu");
  const double b = spec.global_batch_size;

  auto hub = std::make_shared<comm::LoopbackHub>(1);
  DirectRank rank(spec, hub, 0, kN, Ramp(kN));
  for (int s = 0; s < kSteps; ++s) ASSERT_TRUE(rank.Step(s).ok()) << "step " << s;
  ASSERT_TRUE(rank.Synchronize(kSteps).ok());

  std::vector<double> x(kN), xbar(kN), m(kN, 0.0), mbar(kN, 0.0), a(kN, 0.0), start(kN);
  std::vector<double> pending(kN, 0.0);
  for (size_t i = 0; i < kN; ++i) x[i] = xbar[i] = Ramp(kN)[i];
  bool has_pending = false, momentum_started = false;
  int pending_steps = 0;
  auto global_step = [&](const std::vector<double>& sum, int steps) {
    for (size_t i = 0; i < kN; ++i) {
      const double d = sum[i] / b + steps * lambda * xbar[i];
      mbar[i] = momentum_started ? beta * mbar[i] + d : d;
      xbar[i] -= eta * mbar[i];
    }
    momentum_started = true;
  };
  int done = 0;
  for (int s = 0; s < kSteps; ++s) {
    for (size_t i = 0; i < kN; ++i) {
      const double g = b * (x[i] - DirectRank::Target(0, i));
      a[i] = done == 0 ? g : a[i] + g;
      if (done + 1 < kH) {  // local step
        const double d = g / b + lambda * x[i] + mu * (x[i] - xbar[i]);
        m[i] = beta * m[i] + d;
        x[i] -= eta * m[i];
      }
    }
    if (++done < kH) continue;
    if (has_pending) {  // round r+1 ends: apply round r, rebase
      global_step(pending, pending_steps);
      for (size_t i = 0; i < kN; ++i) x[i] = xbar[i] + (x[i] - start[i]);
      m = mbar;
    }
    pending = a;
    pending_steps = kH;
    has_pending = true;
    start = x;
    done = 0;
  }
  global_step(pending, pending_steps);  // Synchronize: the pending round, then the open one
  global_step(a, done);
  for (size_t i = 0; i < kN; ++i) {
    EXPECT_NEAR(rank.params()[i], xbar[i], 1e-5 * (1.0 + std::fabs(xbar[i]))) << "element " << i;
  }
  // The problem moved the model: the reference is not trivially the start.
  EXPECT_GT(std::fabs(xbar[0] - Ramp(kN)[0]), 0.05);
}

// Run in one go with a Synchronize at step 8 (as before a checkpoint), or restarted at step 8
// from that point's parameters and SaveState sections: the same model, bit for bit, because a
// checkpoint follows a Synchronize and nothing is in flight then. With compression, the codecs'
// error-feedback residuals are per rank and not in the checkpoint (as with the quantized
// strategy): a restart resets them, so the runs differ, but every rank still agrees.
TEST(MultistepDelay, RestartFromACheckpointContinuesTheRun) {
  constexpr size_t kN = 64;
  constexpr int kWorld = 2;
  for (const std::string& compression : {"", "quantized"}) {
    job::JobSpec spec = Delayed(3);
    spec.global_batch_size = 8;
    if (!compression.empty()) {
      spec.strategy.Set("compression.type", compression);
      spec.strategy.Set("compression.bits", 4);
    }
    auto run = [&](bool restart) {
      auto hub = std::make_shared<comm::LoopbackHub>(kWorld);
      std::vector<std::vector<float>> out(kWorld);
      std::vector<std::thread> threads;
      for (int r = 0; r < kWorld; ++r) {
        threads.emplace_back([&, r] {
          auto rank = std::make_unique<DirectRank>(spec, hub, r, kN, Ramp(kN));
          // Rounds end at steps 2 and 5; step 8 drains round 1 and the 2 steps of round 2.
          for (int s = 0; s < 8; ++s) ASSERT_TRUE(rank->Step(s).ok());
          ASSERT_TRUE(rank->Synchronize(8).ok());
          if (restart) {
            CheckpointSections sections;
            ASSERT_TRUE(rank->strategy().SaveState(8, &sections).ok());
            std::vector<float> params = rank->params();
            rank.reset();
            rank = std::make_unique<DirectRank>(spec, hub, r, kN, params, sections);
          }
          for (int s = 8; s < 20; ++s) ASSERT_TRUE(rank->Step(s).ok());
          ASSERT_TRUE(rank->Synchronize(20).ok());
          out[r] = rank->params();
        });
      }
      for (auto& t : threads) t.join();
      return out;
    };
    const auto once = run(false);
    const auto restarted = run(true);
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_EQ(once[r].size(), kN);
      ASSERT_EQ(restarted[r].size(), kN);
      EXPECT_TRUE(Identical(once[0], once[r])) << compression << ", rank " << r;
      EXPECT_TRUE(Identical(restarted[0], restarted[r])) << compression << ", rank " << r;
    }
    EXPECT_EQ(Identical(once[0], restarted[0]), compression.empty()) << compression;
  }
}

// A worker that stops: the pending all-reduce fails in the background, and the rank learns it at
// its next wait, with the round, instead of hanging.
TEST(MultistepDelay, APeerThatStopsIsAnErrorAtTheNextWait) {
  constexpr size_t kN = 16;
  job::JobSpec spec = Delayed(2);
  spec.global_batch_size = 4;
  auto hub = std::make_shared<comm::LoopbackHub>(2, std::chrono::milliseconds(1000));
  absl::Status failure;
  int64_t failed_at = -1;
  const auto begin = std::chrono::steady_clock::now();
  std::thread peer([&] {
    DirectRank rank(spec, hub, 1, kN, Ramp(kN));
    // Round 0 ends at step 1 and starts its exchange; the peer then leaves, exchange and all.
    for (int s = 0; s < 2; ++s) ASSERT_TRUE(rank.Step(s).ok());
  });
  {
    DirectRank rank(spec, hub, 0, kN, Ramp(kN));
    for (int s = 0; s < 12 && failure.ok(); ++s) {
      failure = rank.Step(s);
      failed_at = s;
    }
  }
  peer.join();
  ASSERT_FALSE(failure.ok());
  // Round 0's exchange completed (both ranks took part); round 1's, started at step 3, has no
  // peer: its wait at the end of round 2 (step 5) reports it.
  EXPECT_EQ(failed_at, 5);
  EXPECT_EQ(failure.code(), absl::StatusCode::kDeadlineExceeded) << failure;
  EXPECT_THAT(std::string(failure.message()),
              ::testing::HasSubstr("all-reduce of round 1 (steps 2 to 3) in the background"));
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(10));
}

TEST(MultistepCompression, StatsReportTheBitsAndTheRatio) {
  constexpr size_t kN = 4096;
  auto hub = std::make_shared<comm::LoopbackHub>(1);
  for (const auto& [type, bits, ratio] : std::vector<std::tuple<std::string, int, double>>{
           {"", 32, 1.0},
           {"fp16", 16, 2.0},
           // 8 bits and two floats per 512 elements: 4·512 / (512 + 8) bytes.
           {"quantized", 8, 2048.0 / 520.0},
           {"quantized", 2, 2048.0 / 136.0}}) {
    job::JobSpec spec = Delayed(2);
    spec.global_batch_size = 4;
    if (!type.empty()) spec.strategy.Set("compression.type", type);
    if (type == "quantized") spec.strategy.Set("compression.bits", bits);
    DirectRank rank(spec, hub, 0, kN, Ramp(kN));
    for (int s = 0; s < 6; ++s) ASSERT_TRUE(rank.Step(s).ok());
    ASSERT_TRUE(rank.Synchronize(6).ok());
    const StrategyStats stats = rank.strategy().stats();
    EXPECT_EQ(stats.bits, bits) << type;
    EXPECT_DOUBLE_EQ(stats.compression_ratio, ratio) << type << " " << bits;
    EXPECT_EQ(stats.interval, 2);
  }
}

// The factory takes validated options: unknown settings are the descriptor's to refuse
// (sync::CheckStrategyOptions, which ValidateJob runs), before any strategy is created.
TEST(MultistepCompression, UnknownSettingsAreRefusedByValidation) {
  job::JobSpec spec = Compressed(4, "zstd");
  EXPECT_THAT(std::string(CheckStrategyOptions(spec.strategy, "spec.strategy").message()),
              ::testing::HasSubstr("spec.strategy.compression.type"));
  spec = Compressed(4, "quantized", 3);
  EXPECT_THAT(std::string(CheckStrategyOptions(spec.strategy, "spec.strategy").message()),
              ::testing::HasSubstr("spec.strategy.compression.bits: must be 1, 2, 4 or 8"));
  spec = Multistep(4);
  spec.strategy.Set("delay", 2);
  EXPECT_THAT(std::string(CheckStrategyOptions(spec.strategy, "spec.strategy").message()),
              ::testing::HasSubstr("spec.strategy.delay: must be 0 or 1, got 2"));
}

}  // namespace
}  // namespace hptrain::sync::testing
