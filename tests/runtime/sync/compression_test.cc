// The compressing strategies on the simulation harness (LeNet-5's tensor sizes, 4 workers):
// degenerate settings reproduce ssgd bit for bit, every worker ends identical, and the bytes on
// the wire shrink as the byte formulas in the strategies say.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/job/job_spec.h"
#include "runtime/sync/registry.h"
#include "runtime/sync/tensor_split.h"
#include "tests/runtime/sync/strategy_harness.h"

namespace hptrain::sync::testing {
namespace {

size_t TotalElements(const SimOptions& o) {
  size_t p = 0;
  for (size_t s : o.tensor_sizes) p += s;
  return p;
}

void ExpectIdenticalRanks(const SimResult& r) {
  for (size_t rank = 1; rank < r.params.size(); ++rank) {
    ASSERT_EQ(r.params[0], r.params[rank]) << "rank " << rank << " differs from rank 0";
  }
}

void ExpectBitwiseEqual(const SimResult& a, const SimResult& b) {
  ASSERT_EQ(a.params[0].size(), b.params[0].size());
  EXPECT_EQ(std::memcmp(a.params[0].data(), b.params[0].data(), 4 * a.params[0].size()), 0);
}

job::JobSpec With(const std::string& type, const std::string& bits = "", double density = 0) {
  job::JobSpec spec = HarnessJob(type);
  if (!bits.empty()) spec.strategy.Set("bits", bits);
  if (density != 0) spec.strategy.Set("density", density);
  return spec;
}

TEST(Degenerate, QuantizedAt32BitsIsSsgd) {
  SimOptions o;
  SimResult ssgd = Simulate(HarnessJob("ssgd"), o);
  SimResult q32 = Simulate(With("quantized", "32"), o);
  ASSERT_TRUE(ssgd.ok && q32.ok) << ssgd.error << q32.error;
  ExpectBitwiseEqual(ssgd, q32);
  EXPECT_EQ(ssgd.bytes_sent, q32.bytes_sent);
}

TEST(Degenerate, TopkAtDensityOneIsSsgd) {
  SimOptions o;
  SimResult ssgd = Simulate(HarnessJob("ssgd"), o);
  SimResult topk = Simulate(With("topk", "", 1.0), o);
  ASSERT_TRUE(ssgd.ok && topk.ok) << ssgd.error << topk.error;
  ExpectBitwiseEqual(ssgd, topk);
}

// DGC at density 1 sends its whole v every step. Momentum factor masking then clears u every step
// and the large tensors train by plain SGD; the small ones, whose momentum is all-reduced and never
// masked, by momentum SGD. Without masking u is momentum SGD's buffer for every tensor, summed
// over workers instead of the workers' gradients: the same up to rounding. Weight decay is off,
// since dgc's optimizer applies it outside the momentum.
TEST(Degenerate, DgcAtDensityOneIsMomentumSgdWithoutMaskingAndPlainSgdWithIt) {
  SimOptions o;
  job::JobSpec momentum_sgd = HarnessJob("ssgd");
  momentum_sgd.optimizer.weight_decay = 0;
  job::JobSpec plain_sgd = momentum_sgd;
  plain_sgd.optimizer.momentum = 0;
  job::JobSpec masked = With("dgc", "", 1.0);
  masked.optimizer.weight_decay = 0;
  job::JobSpec unmasked = masked;
  unmasked.strategy.Set("momentumMasking", false);
  const SimResult m = Simulate(momentum_sgd, o), p = Simulate(plain_sgd, o);
  const SimResult with = Simulate(masked, o), without = Simulate(unmasked, o);
  ASSERT_TRUE(m.ok && p.ok && with.ok && without.ok)
      << m.error << p.error << with.error << without.error;
  ExpectIdenticalRanks(with);
  ExpectIdenticalRanks(without);
  double step_norm = 0, without_error = 0, small_error = 0, momentum_effect = 0;
  size_t offset = 0, large_differing = 0;
  for (size_t size : o.tensor_sizes) {
    const bool small = size < kSmallTensorElements;
    for (size_t i = offset; i < offset + size; ++i) {
      const double init = 0.01f * std::cos(0.01f * i);  // the harness's initial value
      step_norm += (m.params[0][i] - init) * (m.params[0][i] - init);
      without_error += std::pow(without.params[0][i] - m.params[0][i], 2);
      momentum_effect += std::pow(p.params[0][i] - m.params[0][i], 2);
      if (small) {
        small_error += std::pow(with.params[0][i] - m.params[0][i], 2);
      } else {
        large_differing += with.params[0][i] != p.params[0][i];
      }
    }
    offset += size;
  }
  EXPECT_LT(std::sqrt(without_error / step_norm), 1e-5);
  EXPECT_LT(std::sqrt(small_error / step_norm), 1e-5);
  EXPECT_EQ(large_differing, 0u);
  EXPECT_GT(std::sqrt(momentum_effect / step_norm), 0.1);  // momentum makes a difference here
}

TEST(Degenerate, Fp16OnExactlyRepresentableGradientsIsSsgd) {
  SimOptions o;
  // Multiples of 2^-6 below 1 in magnitude, and their sums over 4 workers, are exact in fp16.
  o.gradient = [](int rank, int step, size_t i) {
    return static_cast<float>(static_cast<int>((i * 7 + step * 3) % 17) - 8 + rank) / 64.0f;
  };
  SimResult ssgd = Simulate(HarnessJob("ssgd"), o);
  SimResult fp16 = Simulate(HarnessJob("fp16"), o);
  ASSERT_TRUE(ssgd.ok && fp16.ok) << ssgd.error << fp16.error;
  ExpectBitwiseEqual(ssgd, fp16);
  EXPECT_NEAR(fp16.bytes_sent[0], ssgd.bytes_sent[0] / 2.0, 0.01 * ssgd.bytes_sent[0]);
}

struct ByteCase {
  std::string type;
  std::string bits;
  double density;
  double max_fraction;               // of ssgd's bytes
  std::string sparse_encoding = "";  // topk / dgc: "" (pairs) or "compact"
};

class Bytes : public ::testing::TestWithParam<ByteCase> {};

TEST_P(Bytes, WithinTheFractionOfSsgd) {
  const ByteCase& c = GetParam();
  SimOptions o;
  SimResult ssgd = Simulate(HarnessJob("ssgd"), o);
  job::JobSpec spec = With(c.type, c.bits, c.density);
  if (!c.sparse_encoding.empty()) spec.strategy.Set("sparseEncoding", c.sparse_encoding);
  SimResult r = Simulate(spec, o);
  ASSERT_TRUE(ssgd.ok && r.ok) << ssgd.error << r.error;
  ExpectIdenticalRanks(r);
  for (size_t rank = 0; rank < r.bytes_sent.size(); ++rank) {
    const double fraction = static_cast<double>(r.bytes_sent[rank]) / ssgd.bytes_sent[rank];
    EXPECT_LE(fraction, c.max_fraction) << c.type << " " << c.bits << " rank " << rank;
    EXPECT_GT(fraction, 0.0);
  }
  // Training still moves the parameters toward ssgd's: compare the update direction.
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < r.params[0].size(); ++i) {
    const double init = 0.01 * std::cos(0.01 * i);
    const double a = r.params[0][i] - init, b = ssgd.params[0][i] - init;
    dot += a * b;
    na += a * a;
    nb += b * b;
  }
  EXPECT_GT(dot / std::sqrt(na * nb), 0.5) << "update direction diverged from ssgd's";
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, Bytes,
    ::testing::Values(ByteCase{"quantized", "8", 0, 0.30}, ByteCase{"quantized", "4", 0, 0.17},
                      ByteCase{"fp16", "", 0, 0.51}, ByteCase{"topk", "", 0.01, 0.05},
                      ByteCase{"dgc", "", 0.01, 0.05}, ByteCase{"topk", "", 0.02, 0.05, "compact"},
                      ByteCase{"dgc", "", 0.02, 0.05, "compact"}),
    [](const auto& info) {
      return info.param.type + info.param.bits + info.param.sparse_encoding;
    });

// sparseEncoding: compact sends topk's pairs in 4 bytes instead of 8 and keeps what fp16 rounding
// takes off a value in the residual. On gradients that are multiples of 2^-10 (|g| ≤ 20/1024),
// every value topk sends over 20 steps (a gradient plus the residual, below 2 in magnitude) is
// exact in fp16, so compact trains exactly as pairs. The large tensor spans four 65536-element
// blocks, the last one short; every block a worker sends or forwards shrinks by 4k − 4·4 bytes.
TEST(CompactSparse, TopkOnFp16ExactValuesTrainsAsPairsWithHalfTheBytesPerPair) {
  SimOptions o;
  o.tensor_sizes = {150, 200000, 84};
  o.gradient = [](int rank, int step, size_t i) {
    return static_cast<float>(static_cast<int>((i * 7 + rank * 13 + step * 5) % 41) - 20) / 1024.0f;
  };
  job::JobSpec pairs = With("topk", "", 0.01);
  job::JobSpec compact = pairs;
  compact.strategy.Set("sparseEncoding", "compact");
  const SimResult a = Simulate(pairs, o);
  const SimResult b = Simulate(compact, o);
  ASSERT_TRUE(a.ok && b.ok) << a.error << b.error;
  ExpectIdenticalRanks(b);
  ExpectBitwiseEqual(a, b);
  const int64_t k = 2000, blocks = 4;  // ceil(0.01 · 200000); ceil(200000 / 65536)
  for (int rank = 0; rank < o.world; ++rank) {
    EXPECT_EQ(a.bytes_sent[rank] - b.bytes_sent[rank],
              int64_t{o.steps} * (o.world - 1) * (4 * k - 4 * blocks))
        << "rank " << rank;
  }
}

// What fp16 rounding takes off a sent value is not lost: topk keeps it in its residual and dgc in
// v, and sends it later. One worker, one tensor of 8192 elements with a gradient at step 0 only,
// plain SGD without weight decay (so dgc's momentum is 0 too): by step 16 everything, rests
// included, has been sent, and the parameters moved by lr · Σg / batch to within fp32 rounding
// (relative to the largest move), far closer than the 2^-12 that dropping the rests would leave.
TEST(CompactSparse, KeepsTheRoundingForLaterSteps) {
  SimOptions o;
  o.world = 1;
  o.steps = 16;
  o.tensor_sizes = {8192};
  auto g = [](size_t i) { return std::sin(0.37f * i) * static_cast<float>(1 + i % 13); };
  o.gradient = [&](int, int step, size_t i) { return step == 0 ? g(i) : 0.0f; };
  for (const std::string type : {"topk", "dgc"}) {
    SCOPED_TRACE(type);
    job::JobSpec spec = With(type, "", 0.25);
    spec.strategy.Set("sparseEncoding", "compact");
    spec.optimizer.momentum = 0;
    spec.optimizer.weight_decay = 0;
    const SimResult r = Simulate(spec, o);
    ASSERT_TRUE(r.ok) << r.error;
    double worst = 0, largest = 0;  // of |moved − wanted| and of |wanted|
    for (size_t i = 0; i < 8192; ++i) {
      const double init = 0.01f * std::cos(0.01f * i);  // the harness's initial value
      const double want = -spec.optimizer.lr * g(i) / o.global_batch;
      worst = std::max(worst, std::abs((r.params[0][i] - init) - want));
      largest = std::max(largest, std::abs(want));
    }
    EXPECT_LT(worst / largest, 1e-5);
  }
}

// topk and dgc sparsify only tensors of at least kSmallTensorElements elements; the small ones
// (biases, LeNet-5's conv2 and fc3) are all-reduced every step at 4 bits. After one step the
// small tensors moved as ssgd's did (up to 4-bit quantization), the large ones only where sent.
TEST(Sparsifiers, SendSmallTensorsEveryStepAndLargeOnesSparsely) {
  SimOptions o;
  o.steps = 1;
  for (const std::string type : {"topk", "dgc"}) {
    SCOPED_TRACE(type);
    job::JobSpec base = HarnessJob("ssgd");
    base.optimizer.weight_decay = 0;  // so that only what was sent moves a parameter
    job::JobSpec spec = With(type, "", 0.01);
    spec.optimizer.weight_decay = 0;
    const SimResult ssgd = Simulate(base, o);
    const SimResult r = Simulate(spec, o);
    ASSERT_TRUE(ssgd.ok && r.ok) << ssgd.error << r.error;
    ExpectIdenticalRanks(r);
    size_t offset = 0, large_elements = 0, large_moved = 0, small_moved = 0, small_elements = 0;
    double small_error = 0, small_norm = 0;
    for (size_t size : o.tensor_sizes) {
      const bool small = size < kSmallTensorElements;
      (small ? small_elements : large_elements) += size;
      for (size_t i = offset; i < offset + size; ++i) {
        const float init = 0.01f * std::cos(0.01f * i);  // the harness's initial value
        const bool moved = r.params[0][i] != init;
        if (!small) {
          large_moved += moved;
          continue;
        }
        small_moved += moved;
        const double step = r.params[0][i] - init, want = ssgd.params[0][i] - init;
        small_error += (step - want) * (step - want);
        small_norm += want * want;
      }
      offset += size;
    }
    EXPECT_EQ(small_moved, small_elements);
    EXPECT_LT(std::sqrt(small_error / small_norm), 0.1);
    EXPECT_GT(large_moved, 0u);
    EXPECT_LE(large_moved, static_cast<size_t>(o.world * 1.3 * 0.01 * large_elements) + o.world);
  }
}

TEST(DynamicBits, HalvesWhenCommunicationIsExposedAndDoublesWhenItIsCheap) {
  SimOptions o;
  o.steps = 9;
  o.steps_per_epoch = 1;
  // The probe (steps 0-1, 32 bits) sees communication exposed 60 % of compute: 8 bits from step 2.
  o.step_timing = [](int, int) {
    StepTiming t;
    t.compute_seconds = 1.0;
    t.exposed_comm_seconds = 0.6;
    return t;
  };
  // Epochs 2-4: communication exposed (30 % of compute); epochs 5-8: cheap.
  o.epoch_timing = [](int epoch) {
    EpochTiming t;
    t.compute_seconds = 1.0;
    t.comm_seconds = epoch < 5 ? 0.6 : 0.1;
    t.exposed_comm_seconds = epoch < 5 ? 0.3 : 0.0;
    return t;
  };
  job::JobSpec spec = With("quantized", "dynamic");
  spec.strategy.Set("probeSteps", 2);
  SimResult r = Simulate(spec, o);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.bits, (std::vector<int>{32, 32, 4, 2, 2, 4, 8, 16, 32}));
  ExpectIdenticalRanks(r);
}

TEST(Warmup, TopkDensityFollowsTheExponentialSchedule) {
  // In epoch 0 of a 2-epoch warm-up the density is 25 %: more bytes than at the final 1 %.
  SimOptions o;
  o.steps = 2;
  job::JobSpec spec = With("topk", "", 0.01);
  spec.strategy.Set("warmupEpochs", 2);
  SimResult warm = Simulate(spec, o);
  spec.strategy.Set("warmupEpochs", 0);
  SimResult cold = Simulate(spec, o);
  ASSERT_TRUE(warm.ok && cold.ok);
  EXPECT_GT(warm.bytes_sent[0], 10 * cold.bytes_sent[0]);
}

// DGC's local clipping: each worker's summed gradient g of b samples is scaled by
// max_norm / (‖g‖ + 1e-6) where ‖g‖ > max_norm = b · T / √N (one tensor, so one bucket holding
// the whole model). The same run without clipping, fed gradients clipped that way beforehand,
// ends with the same parameters; the bound is low enough that every worker is clipped.
TEST(Dgc, LocalClippingScalesEachWorkersMeanGradientToTheBound) {
  SimOptions o;
  o.tensor_sizes = {48000};
  auto raw = [](int rank, int step, size_t i) {
    return (1.0f + rank) * std::sin(0.001f * static_cast<float>(i) * (rank + 1) + step);
  };
  const double clip = 10, local_batch = o.global_batch / o.world;
  const double max_norm = local_batch * clip / std::sqrt(static_cast<double>(o.world));
  auto scale = [&](int rank, int step) {
    double sum = 0;
    for (size_t i = 0; i < o.tensor_sizes[0]; ++i) {
      const double g = raw(rank, step, i);
      sum += g * g;
    }
    const double norm = std::sqrt(sum);
    EXPECT_GT(norm, max_norm) << "rank " << rank << " step " << step << " would not be clipped";
    return static_cast<float>(max_norm / (norm + 1e-6));
  };
  std::vector<std::vector<float>> scales(o.world, std::vector<float>(o.steps));
  for (int rank = 0; rank < o.world; ++rank) {
    for (int step = 0; step < o.steps; ++step) scales[rank][step] = scale(rank, step);
  }
  job::JobSpec spec = With("dgc", "", 1.0);  // dense exchange: no selection to tip over
  spec.strategy.Set("clipNorm", clip);
  o.gradient = raw;
  const SimResult clipped = Simulate(spec, o);
  const SimResult unclipped = Simulate(With("dgc", "", 1.0), o);
  o.gradient = [&](int rank, int step, size_t i) {
    return raw(rank, step, i) * scales[rank][step];
  };
  const SimResult reference = Simulate(With("dgc", "", 1.0), o);
  ASSERT_TRUE(clipped.ok && unclipped.ok && reference.ok)
      << clipped.error << unclipped.error << reference.error;
  ExpectIdenticalRanks(clipped);
  double diff = 0, norm = 0, change = 0;
  for (size_t i = 0; i < clipped.params[0].size(); ++i) {
    diff = std::max(diff, std::abs(double{clipped.params[0][i]} - reference.params[0][i]));
    norm = std::max(norm, std::abs(double{reference.params[0][i]}));
    change = std::max(change, std::abs(double{clipped.params[0][i]} - unclipped.params[0][i]));
  }
  EXPECT_LE(diff, 1e-5 * norm);
  EXPECT_GT(change, 1e-3 * norm);
}

// The split's copying form (the device route's) makes the same buffers as the memcpy form, one
// copy per tensor, and a failing copy stops it with that error.
TEST(TensorSplitTest, CopyingFormMatchesTheMemcpyForm) {
  GradientLayout layout;
  layout.tensors = {{0, 5000}, {5000, 5100}, {5100, 11100}, {11100, 11110}};
  layout.buckets = {{0, 11110}};
  const TensorSplit split(layout);
  ASSERT_EQ(split.large_count(0), 11000u);
  ASSERT_EQ(split.small_count(0), 110u);
  std::vector<float> bucket(11110);
  for (size_t i = 0; i < bucket.size(); ++i) bucket[i] = static_cast<float>(i);
  std::vector<float> large(11000), small(110), large2(11000), small2(110);
  split.Gather(0, bucket, large.data(), small.data());
  int copies = 0;
  auto copy = [&copies](float* dst, const float* src, size_t count) {
    ++copies;
    std::copy(src, src + count, dst);
    return absl::OkStatus();
  };
  ASSERT_TRUE(split.Gather(0, bucket.data(), large2.data(), small2.data(), copy).ok());
  EXPECT_EQ(copies, 4);
  EXPECT_EQ(large2, large);
  EXPECT_EQ(small2, small);
  std::vector<float> joined(bucket.size(), -1.0f);
  ASSERT_TRUE(split.Scatter(0, large2.data(), small2.data(), joined.data(), copy).ok());
  EXPECT_EQ(joined, bucket);
  auto failing = [](float*, const float*, size_t) { return absl::InternalError("copy failed"); };
  EXPECT_EQ(split.Scatter(0, large2.data(), small2.data(), joined.data(), failing).message(),
            "copy failed");
}

// The job's rule for which strategies NCCL carries (job::ExchangesOnDevice, which picks the back
// end) and each strategy's own answer, given a device communicator, are the same list.
TEST(DeviceRoute, ReducesOnDeviceAgreesWithTheJobRule) {
  comm::TransportCommunicator host(
      std::make_unique<comm::LoopbackTransport>(std::make_shared<comm::LoopbackHub>(1), 0));
  comm::TransportCommunicator device(
      std::make_unique<comm::LoopbackTransport>(std::make_shared<comm::LoopbackHub>(1), 0));
  struct Case {
    std::string type, bits;
  };
  for (const Case& c : std::vector<Case>{{"ssgd", ""}, {"fp16", ""}, {"quantized", ""},
                                         {"quantized", "4"}, {"quantized", "32"},
                                         {"quantized", "dynamic"}, {"topk", ""}, {"dgc", ""}, {"auto", ""},
                                         {"topk", "compact"}, {"dgc", "compact"},
                                         {"localsgd", ""}, {"multistep", ""}}) {
    job::JobSpec spec = HarnessJob(c.type);
    if (c.bits == "compact") {
      spec.strategy.Set("sparseEncoding", "compact");
    } else {
      if (!c.bits.empty()) spec.strategy.Set("bits", c.bits);
    }
    spec.strategy.Set("density", 0.1);  // topk and dgc need one
    StrategyContext context = StrategyContextFor(spec, &host);
    context.device_comm = &device;
    auto strategy = CreateStrategy(context);
    ASSERT_TRUE(strategy.ok()) << c.type << ": " << strategy.status();
    EXPECT_EQ((*strategy)->traits().reduces_on_device, job::ExchangesOnDevice(spec.strategy))
        << c.type << " bits " << c.bits;
  }
}

}  // namespace
}  // namespace hptrain::sync::testing
