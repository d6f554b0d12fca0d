// Strategy mp2 on the harness (N ranks as threads, the shards as in-process ParamStores): the
// checks of docs/algorithms.md §1d — ρ = 1 with exact pulls (mode B, or mode A at pullBits 32)
// is a PS averaging parameters every step, bit for bit (and
// SSGD within rounding for plain SGD); mode B's workers hold the PS's model bit for bit after every
// round; mode A's delta pulls keep the worker's copy bit-identical to the PS's mirror of it and
// within the rounding of the PS's model (bit for bit at pullBits 32); modes A (at 32 bits) and B
// train the same model; the byte counters follow §1c exactly; a push cut by another schedule or of
// the wrong size is refused and changes nothing; with local progress an element's push carries
// every local step since its last one (an fp64 replay), and Synchronize gives every rank the
// workers' average model.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>

#include "gtest/gtest.h"
#include "kernels/update/update.h"
#include "runtime/job/optimizer_options.h"
#include "runtime/optim/optimizer.h"
#include "runtime/ps/mp2/job_options.h"
#include "runtime/ps/mp2/predictor.h"
#include "runtime/ps/param_store.h"
#include "runtime/ps/ps_codec.h"
#include "runtime/ps/ps_connection.h"
#include "runtime/ps/mp2/schedule.h"
#include "tests/runtime/sync/strategy_harness.h"

namespace hptrain::sync::testing {
namespace {

// A predictor file with small random weights, removed at the end of the test.
class PredictorFile {
 public:
  PredictorFile() {
    path_ = ::testing::TempDir() + "/mp2_strategy_test_" + std::to_string(getpid()) + ".mp2p";
    ps::mp2::Predictor p = ps::mp2::EmptyPredictor(ps::mp2::kDefaultHistory, 8, 4);
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 0.3f);
    for (auto& t : p.tensors) {
      for (float& v : t.values) v = normal(rng);
    }
    EXPECT_TRUE(ps::mp2::SavePredictor(path_, p).ok());
  }
  ~PredictorFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

job::JobSpec Mp2Job(double push_ratio, const std::string& mode, const std::string& predictor) {
  job::JobSpec spec = HarnessJob("mp2");
  spec.strategy.Set("pushRatio", push_ratio);
  spec.strategy.Set("mode", mode);
  spec.strategy.Set("predictor", predictor);
  return spec;
}

// The harness's gradient (strategy_harness.cc's default).
float HarnessGradient(int rank, int step, size_t i) {
  return std::sin(0.001f * static_cast<float>(i) + 0.3f * rank + 0.7f * step) * 0.5f +
         0.01f * rank;
}

// A PS that averages parameters every step, computed directly: each rank steps its own optimizer
// on its mean gradient (the trainer's arithmetic: × B/b_i, then × 1/B), then every rank takes
// Σ_i b_i·x_i × 1/B (rank order).
std::vector<float> ParameterAveragingReference(const job::JobSpec& spec, const SimOptions& o) {
  const size_t P = Parameters(o);
  std::vector<float> x(P);
  for (size_t i = 0; i < P; ++i) x[i] = 0.01f * std::cos(0.01f * i);
  std::vector<std::vector<float>> local(o.world, x);
  std::vector<std::unique_ptr<optim::Optimizer>> optimizers;
  for (int r = 0; r < o.world; ++r) {
    optimizers.push_back(
        std::make_unique<optim::Optimizer>(job::OptimizerOptionsFor(spec.optimizer), P));
  }
  std::vector<float> g(P);
  for (int step = 0; step < o.steps; ++step) {
    for (int r = 0; r < o.world; ++r) {
      const int b = o.local_batches.empty() ? o.global_batch / o.world : o.local_batches[r];
      for (size_t i = 0; i < P; ++i) g[i] = HarnessGradient(r, step, i);
      kernels::Scale(g.data(), P, static_cast<float>(o.global_batch) / static_cast<float>(b));
      kernels::Scale(g.data(), P, 1.0f / o.global_batch);
      local[r] = x;
      optimizers[r]->Step(local[r].data(), g.data(), spec.optimizer.lr);
    }
    std::fill(x.begin(), x.end(), 0.0f);
    for (int r = 0; r < o.world; ++r) {
      const float b = static_cast<float>(o.local_batches.empty() ? o.global_batch / o.world
                                                                 : o.local_batches[r]);
      for (size_t i = 0; i < P; ++i) x[i] += b * local[r][i];
    }
    kernels::Scale(x.data(), P, 1.0f / static_cast<float>(o.global_batch));
  }
  return x;
}

SimOptions Uneven() {
  SimOptions options;
  options.steps = 12;
  options.local_batches = {8, 24, 12, 20};
  return options;
}

TEST(Mp2Strategy, PushRatioOneIsParameterAveragingBitForBit) {
  PredictorFile file;
  const SimOptions options = Uneven();
  for (const std::string& mode : {"A", "B"}) {
    for (const std::string& predictor : {std::string("zero"), file.path()}) {
      for (int shards : {1, 2}) {
        job::JobSpec spec = Mp2Job(1.0, mode, predictor);
        spec.strategy.Set("pullBits", int64_t{32});  // mode A's pull exact, as mode B's is
        SimResult result = RunPs(spec, options, shards);
        ASSERT_TRUE(result.ok) << result.error;
        const std::vector<float> reference = ParameterAveragingReference(spec, options);
        for (int r = 0; r < options.world; ++r) {
          ASSERT_EQ(result.params[r], reference)
              << "mode " << mode << " predictor " << predictor << " shards " << shards
              << " rank " << r;
        }
      }
    }
  }
}

TEST(Mp2Strategy, PushRatioOneWithPlainSgdMatchesSsgd) {
  SimOptions options = Uneven();
  job::JobSpec spec = Mp2Job(1.0, "A", "zero");
  spec.strategy.Set("pullBits", int64_t{32});
  spec.optimizer.momentum = 0;
  spec.optimizer.weight_decay = 0;
  SimResult mp2 = RunPs(spec, options, 1);
  ASSERT_TRUE(mp2.ok) << mp2.error;
  job::JobSpec ssgd_spec = HarnessJob("ssgd");
  ssgd_spec.optimizer = spec.optimizer;
  SimResult ssgd = Simulate(ssgd_spec, options);
  ASSERT_TRUE(ssgd.ok) << ssgd.error;
  double worst = 0;
  for (size_t i = 0; i < ssgd.params[0].size(); ++i) {
    const double a = mp2.params[0][i], b = ssgd.params[0][i];
    worst = std::max(worst, std::abs(a - b) / std::max(std::abs(b), 1e-2));
  }
  EXPECT_LT(worst, 1e-5);
}

// Mode B: every worker runs the PS's prediction itself; after every round its model is the
// shard's, bit for bit (the PS's state of the version just published). Without local progress:
// with it the model is the shard's plus the worker's own carry (LocalProgress... below).
TEST(Mp2Strategy, ModeBWorkersHoldThePsModelAfterEveryRound) {
  PredictorFile file;
  for (int shards : {1, 2}) {
    job::JobSpec spec = Mp2Job(0.1, "B", file.path());
    spec.strategy.Set("localProgress", false);
    auto made = std::make_unique<LocalPs>(spec, 4, shards);
    LocalPs* ps = made.get();
    SimOptions options = Uneven();
    options.ps = ps->for_ranks();
    int mismatches = 0;
    int checked = 0;
    std::mutex mu;
    options.after_step = [&](int rank, int step, const std::vector<float>& params) {
      std::vector<float> model;
      for (auto& store : ps->stores) {
        auto state = store->GetState(step + 1, std::chrono::seconds(30));
        ASSERT_TRUE(state.ok()) << state.status();
        const auto& values = state->sections.at("params");
        model.insert(model.end(), values.begin(), values.end());
      }
      std::lock_guard<std::mutex> lock(mu);
      ++checked;
      if (model != params) ++mismatches;
      (void)rank;
    };
    SimResult result = Simulate(spec, options);
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(checked, 4 * options.steps);
    EXPECT_EQ(mismatches, 0) << shards << " shards";
  }
}

// Mode A pulls deltas against the PS's mirror of the worker's copy, rounded to nearest at
// pullBits: after every round the copy is the mirror bit for bit, and within half a rounding step
// of the PS's model (a step is at most 2·max|Δ|/255 at 8 bits, Δ the change since the copy
// before); at 32 bits it is the PS's model bit for bit.
TEST(Mp2Strategy, ModeAPullsDeltasWithinTheRounding) {
  PredictorFile file;
  for (int bits : {8, 32}) {
    job::JobSpec spec = Mp2Job(0.1, "A", file.path());
    spec.strategy.Set("pullBits", static_cast<int64_t>(bits));
    spec.strategy.Set("localProgress", false);  // the copy is then the model computed on
    auto made = std::make_unique<LocalPs>(spec, 4, 2);
    LocalPs* ps = made.get();
    SimOptions options = Uneven();
    options.ps = ps->for_ranks();
    std::mutex mu;
    std::vector<std::vector<float>> previous(4);
    int checked = 0, not_mirrored = 0, outside = 0, inexact = 0;
    double worst = 0;
    options.after_step = [&](int rank, int step, const std::vector<float>& params) {
      std::vector<float> model, mirror;
      for (auto& store : ps->stores) {
        auto state = store->GetState(step + 1, std::chrono::seconds(30));
        ASSERT_TRUE(state.ok()) << state.status();
        const auto& values = state->sections.at("params");
        model.insert(model.end(), values.begin(), values.end());
        const std::vector<float> m = store->Mirror(rank);
        mirror.insert(mirror.end(), m.begin(), m.end());
      }
      std::lock_guard<std::mutex> lock(mu);
      ++checked;
      if (mirror != params) ++not_mirrored;
      if (bits == 32) {
        if (model != params) ++inexact;
      } else if (!previous[rank].empty()) {
        double change = 0, error = 0;
        for (size_t i = 0; i < model.size(); ++i) {
          change = std::max(change, std::abs(double{model[i]} - previous[rank][i]));
          error = std::max(error, std::abs(double{model[i]} - params[i]));
        }
        if (error > change / 255.0 * (1 + 1e-3) + 1e-7) ++outside;
        worst = std::max(worst, error);
      }
      previous[rank] = params;
    };
    SimResult result = Simulate(spec, options);
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(checked, 4 * options.steps);
    EXPECT_EQ(not_mirrored, 0) << bits << " bits";
    EXPECT_EQ(outside, 0) << bits << " bits";
    EXPECT_EQ(inexact, 0) << bits << " bits";
    if (bits == 8) EXPECT_GT(worst, 0.0);  // the rounding shows
  }
}

TEST(Mp2Strategy, ModesAAndBTrainTheSameModel) {
  PredictorFile file;
  const SimOptions options = Uneven();
  job::JobSpec mode_a = Mp2Job(0.1, "A", file.path());
  mode_a.strategy.Set("pullBits", int64_t{32});  // the model whole, as mode B reaches it
  SimResult a = RunPs(mode_a, options, 2);
  SimResult b = RunPs(Mp2Job(0.1, "B", file.path()), options, 2);
  ASSERT_TRUE(a.ok) << a.error;
  ASSERT_TRUE(b.ok) << b.error;
  for (int r = 0; r < options.world; ++r) EXPECT_EQ(a.params[r], b.params[r]) << r;
  // Every round gives the workers one model: the trainer averages BatchNorm buffers after each.
  EXPECT_EQ(a.synchronized_steps.size(), static_cast<size_t>(options.steps));
  // The prediction did something: the zero change trains another model.
  job::JobSpec zero_spec = Mp2Job(0.1, "A", "zero");
  zero_spec.strategy.Set("pullBits", int64_t{32});
  SimResult zero = RunPs(zero_spec, options, 2);
  ASSERT_TRUE(zero.ok) << zero.error;
  EXPECT_NE(zero.params[0], a.params[0]);
}

// Local progress (docs/algorithms.md §1g), with the zero change and plain SGD, against a replay in
// fp64: every worker computes on the shard's model x plus its carry c_i, the sum of its own steps
// on each unpushed element since that element's last push; the round's subset S_t is pushed as
// x + c_i + the step (so an element's push carries every local step since its last one, each
// taken from that worker's own model), the shard averages it and c_i is cleared there; the other
// elements of a predicted tensor keep x and grow c_i by the step. Synchronize (every 7 steps)
// averages the carries (weighted by batch): every rank holds x + c̄, the workers' average model,
// the same bits on every rank, and continues from it (c_i := c̄).
TEST(Mp2Strategy, LocalProgressCarriesTheUnpushedStepsToTheNextPush) {
  SimOptions options = Uneven();
  options.steps = 25;  // every element pushed twice or more (C = 10)
  options.steps_per_epoch = 7;
  options.synchronize_at_epoch_end = true;
  const int world = options.world;
  const size_t P = Parameters(options);
  for (const std::string& mode : {"A", "B"}) {
    job::JobSpec spec = Mp2Job(0.1, mode, "zero");
    spec.strategy.Set("pullBits", int64_t{32});
    spec.strategy.Set("localProgress", true);
    spec.optimizer.momentum = 0;
    spec.optimizer.weight_decay = 0;
    // The replay: one shard, so the pieces are the tensors.
    std::vector<ps::mp2::SubsetSchedule> schedules;
    std::vector<size_t> offsets = {0};
    for (size_t t = 0; t < options.tensor_sizes.size(); ++t) {
      schedules.emplace_back(spec.seed, 0, static_cast<int>(t),
                             static_cast<int64_t>(options.tensor_sizes[t]), 0.1);
      offsets.push_back(offsets.back() + options.tensor_sizes[t]);
    }
    ASSERT_TRUE(schedules[4].predicted() && schedules[6].predicted());
    std::vector<double> x(P);
    for (size_t i = 0; i < P; ++i) x[i] = 0.01f * std::cos(0.01f * i);
    std::vector<std::vector<double>> carry(world, std::vector<double>(P, 0.0));
    // expected[step][rank]: the rank's model after the step; averaged[step]: every rank's model
    // after a Synchronize there.
    std::vector<std::vector<std::vector<double>>> expected;
    std::vector<std::vector<double>> averaged;
    double largest_carry = 0;
    for (int step = 0; step < options.steps; ++step) {
      std::vector<std::vector<double>> local(world, std::vector<double>(P));
      for (int r = 0; r < world; ++r) {
        const double b = options.local_batches[r];
        for (size_t i = 0; i < P; ++i) {
          local[r][i] = x[i] + carry[r][i] - spec.optimizer.lr * HarnessGradient(r, step, i) / b;
        }
      }
      for (size_t t = 0; t < schedules.size(); ++t) {
        std::vector<char> pushed(options.tensor_sizes[t], !schedules[t].predicted());
        for (int32_t e : schedules[t].Subset(step)) pushed[e] = 1;
        for (size_t e = 0; e < options.tensor_sizes[t]; ++e) {
          const size_t i = offsets[t] + e;
          if (pushed[e]) {
            double sum = 0;
            for (int r = 0; r < world; ++r) sum += options.local_batches[r] * local[r][i];
            x[i] = sum / options.global_batch;
            for (int r = 0; r < world; ++r) carry[r][i] = 0;
          } else {
            for (int r = 0; r < world; ++r) {
              carry[r][i] = local[r][i] - x[i];
              largest_carry = std::max(largest_carry, std::abs(carry[r][i]));
            }
          }
        }
      }
      std::vector<std::vector<double>> after(world, x);
      for (int r = 0; r < world; ++r) {
        for (size_t i = 0; i < P; ++i) after[r][i] += carry[r][i];
      }
      expected.push_back(std::move(after));
      std::vector<double> mean(P, 0.0);
      for (int r = 0; r < world; ++r) {
        for (size_t i = 0; i < P; ++i) {
          mean[i] += options.local_batches[r] * carry[r][i] / options.global_batch;
        }
      }
      if ((step + 1) % options.steps_per_epoch == 0 || step + 1 == options.steps) {
        for (int r = 0; r < world; ++r) carry[r] = mean;
      }
      for (size_t i = 0; i < P; ++i) mean[i] += x[i];
      averaged.push_back(std::move(mean));
    }
    // The carry is far above the tolerance: dropping it (or not clearing it) would show.
    const double tolerance = 5e-6;
    ASSERT_GT(largest_carry, 200 * tolerance);
    std::mutex mu;
    int checked = 0, synchronized = 0;
    double worst = 0, worst_synchronized = 0;
    auto distance = [](const std::vector<float>& a, const std::vector<double>& b) {
      double d = 0;
      for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
      return d;
    };
    options.after_step = [&](int rank, int step, const std::vector<float>& params) {
      const double d = distance(params, expected[step][rank]);
      std::lock_guard<std::mutex> lock(mu);
      ++checked;
      worst = std::max(worst, d);
    };
    options.after_synchronize = [&](int rank, int step, const std::vector<float>& params) {
      const double d = distance(params, averaged[step]);
      std::lock_guard<std::mutex> lock(mu);
      ++synchronized;
      worst_synchronized = std::max(worst_synchronized, d);
      (void)rank;
    };
    SimResult result = RunPs(spec, options, 1);
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(checked, world * options.steps);
    EXPECT_EQ(synchronized, world * (options.steps / options.steps_per_epoch));
    EXPECT_LT(worst, tolerance) << "mode " << mode;
    EXPECT_LT(worst_synchronized, tolerance) << "mode " << mode;
    for (int r = 0; r < world; ++r) {
      EXPECT_LT(distance(result.params[r], averaged.back()), tolerance) << "mode " << mode;
      EXPECT_EQ(result.params[r], result.params[0]) << "mode " << mode << " rank " << r;
    }
  }
}

// docs/algorithms.md §1c with LeNet-5's tensors: of 48000 and 10080 elements a tenth travels
// (4800 and 1008), the eight others (≤ 4096) whole: 9434 values per round. Mode A pulls at
// pullBits: 8 + n bytes for the tensors of at least 1024 elements at 8 bits (48000, 10080, 2400),
// the others fp32; 4P at 32.
TEST(Mp2Strategy, BytesFollowTheFormulas) {
  const int64_t P = static_cast<int64_t>(Parameters(SimOptions()));
  ASSERT_EQ(P, 61706);
  const int64_t round = 4 * (4800 + 1008 + 150 + 6 + 2400 + 16 + 120 + 84 + 840 + 10);
  SimOptions options;
  options.steps = 10;
  const int64_t delta_pull = (8 + 48000) + (8 + 10080) + (8 + 2400) +
                             4 * (150 + 6 + 16 + 120 + 84 + 840 + 10);
  for (const std::string& mode : {"A", "A32", "B"}) {
    std::unique_ptr<LocalPs> local;
    job::JobSpec spec = Mp2Job(0.1, mode.substr(0, 1), "zero");
    if (mode == "A32") spec.strategy.Set("pullBits", int64_t{32});
    options.synchronize_at_end = false;  // the final exact pull is not a round's
    SimResult result = RunPs(spec, options, 1, &local);
    ASSERT_TRUE(result.ok) << result.error;
    const int64_t pulled = mode == "A" ? delta_pull : mode == "A32" ? 4 * P : round;
    for (int r = 0; r < options.world; ++r) {
      const ps::PsConnection& c = *local->connections[r];
      // Rank 0 also sent the initial parameters; every rank pulled them once.
      const int64_t init = r == 0 ? 4 * P : 0;
      EXPECT_EQ(c.bytes_sent(), init + options.steps * round) << mode << " rank " << r;
      EXPECT_EQ(c.bytes_received(), 4 * P + options.steps * pulled) << mode << " rank " << r;
    }
    std::cout << "mp2 mode " << mode << ": push " << round << " B, pull " << pulled
              << " B per round of " << 4 * P << " (push "
              << 100.0 * (1.0 - static_cast<double>(round) / (4 * P)) << " % less, pull "
              << 100.0 * (1.0 - static_cast<double>(pulled) / (4 * P)) << " % less)\n";
  }
  EXPECT_LT(delta_pull, 4 * P / 3);
}

// A push cut by another schedule, or with a subset of the wrong size, is refused with one line,
// and the round completes as if it had not happened.
TEST(Mp2Store, RefusesAPushOfTheWrongSubset) {
  job::JobSpec spec = Mp2Job(0.1, "A", "zero");
  ps::ParamStoreConfig config;
  config.world_size = 1;
  config.global_batch = 4;
  ps::Mp2StoreConfig mp2;
  mp2.prediction = ps::mp2::PredictionOptionsFor(spec);
  config.mp2 = mp2;
  ps::ParamStore store(config);
  std::vector<std::string> reasons;
  store.set_on_rejected([&](const std::string& reason) { reasons.push_back(reason); });
  ps::ShardLayoutInfo layout;
  layout.begin = 0;
  layout.end = 10100;
  layout.tensor_sizes = {100, 10000};
  layout.world_size = 1;
  ps::ShardState state;
  state.sections["params"] = std::vector<float>(10100, 1.0f);
  ASSERT_TRUE(store.Init(0, layout, state).ok());
  auto push_of = [&](int64_t large) {
    std::vector<std::vector<uint8_t>> tensors;
    std::vector<float> small(100, 2.0f), big(static_cast<size_t>(large), 3.0f);
    tensors.push_back(*ps::EncodeValues(small.data(), 100));
    tensors.push_back(*ps::EncodeValues(big.data(), large));
    return tensors;
  };
  ps::PushInfo push;
  push.step = 0;
  push.batch_size = 4;
  push.begin = 0;
  push.end = 10100;
  push.schedule = ps::mp2::ScheduleFingerprint(spec.seed + 1, 0.1);
  auto foreign = store.Push(push, push_of(1000));
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(std::string(foreign.status().message()).find("wrong subset"), std::string::npos);
  push.schedule = ps::mp2::ScheduleFingerprint(spec.seed, 0.1);
  auto short_push = store.Push(push, push_of(999));
  ASSERT_FALSE(short_push.ok());
  EXPECT_NE(std::string(short_push.status().message()).find("wrong subset"), std::string::npos);
  EXPECT_EQ(std::string(short_push.status().message()).find('\n'), std::string::npos);
  EXPECT_EQ(reasons, (std::vector<std::string>{"subset", "subset"}));
  EXPECT_EQ(store.version(), 0);
  auto good = store.Push(push, push_of(1000));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(*good, 1);
  auto model = store.GetState(1, std::chrono::seconds(5));
  ASSERT_TRUE(model.ok());
  const auto& params = model->sections.at("params");
  EXPECT_EQ(params[0], 2.0f);  // the small tensor, whole
  int fresh = 0, stale = 0;
  for (int i = 100; i < 10100; ++i) {
    fresh += params[i] == 3.0f;
    stale += params[i] == 1.0f;
  }
  EXPECT_EQ(fresh, 1000);
  EXPECT_EQ(stale, 9000);
}

}  // namespace
}  // namespace hptrain::sync::testing
