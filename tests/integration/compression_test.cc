// The compressing strategies on the real demo job (Fashion-MNIST, LeNet-5, 4 workers, global
// batch 128, same seed and schedule as ssgd), one epoch each: bytes per worker per step from the
// communicators' counters against ssgd's, and final test accuracy against ssgd's.
//
// Every run, ssgd's included, uses a cosine learning-rate schedule over the epoch: with the demo's
// constant rate (0.05, momentum 0.9) the accuracy of the last iterate after one epoch moves by
// about ±0.7 points under any perturbation of the trajectory, which would drown the 0.5-point
// criterion in noise; annealing to zero makes the comparison about the strategy.
//
// One seed's gap moves by about ±0.4 points with the seed, even fp16's (bench/accuracy over 8
// seeds, docs/benchmarks/accuracy-1epoch: fp16 -0.13 ± 0.13 on average, -0.85 at its worst
// seed). This test runs seed 42 with the targets as bounds; the report gives the means over
// seeds. topk and dgc at density 0.01 (no warm-up) are asserted on bytes and on learning within
// 2 points: over the 8 seeds they trail ssgd by 1.36 ± 0.23 and 0.98 ± 0.12 points (worst seeds
// 2.75 and 1.43). topk misses the 1-point target at this density (at 0.02 it trails by
// 0.68 ± 0.11, docs/benchmarks/accuracy-density) and dgc sits on it at 0.01, 0.02 and 0.05 alike
// (momentum masking; without it 0.86, 0.62 and 0.09, docs/benchmarks/accuracy-dgc-unmasked);
// that is tracked and reported rather than asserted. With `sparseEncoding: compact` (4 bytes per
// pair) density 0.02 fits the same byte budget, and there both are asserted on the 1-point
// target: over the 8 seeds topk trails by 0.56 ± 0.11 (docs/benchmarks/accuracy-compact) and dgc
// without momentum masking by 0.59 ± 0.13 (docs/benchmarks/accuracy-compact-dgc-unmasked).
#include <iostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

struct Outcome {
  double accuracy = 0;
  double bytes_per_step = 0;  // mean over ranks of bytes_sent / steps
};

Outcome RunDemo(const TempDir& dir, const std::string& tag, const std::vector<std::string>& sets) {
  const std::string json = dir.path() + "/" + tag + ".json";
  std::vector<std::string> argv = {HptrainBinary(), "run", "examples/fashion-mnist.yaml",
                                   "--quiet", "--output-json", json, "--set", "spec.epochs=1",
                                   "--set", "spec.optimizer.schedule.type=cosine"};
  for (const auto& s : sets) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  ProcessResult r = RunProcess(argv, 900);
  EXPECT_EQ(r.exit_code, 0) << tag << ": " << r.err;
  Outcome o;
  if (r.exit_code != 0) return o;
  nlohmann::json summary = nlohmann::json::parse(ReadFile(json));
  o.accuracy = summary["final"]["test_accuracy"].get<double>();
  const double steps = summary["steps"].get<double>();
  for (const auto& rank : summary["ranks"]) o.bytes_per_step += rank["bytes_sent"].get<double>();
  o.bytes_per_step /= summary["ranks"].size() * steps;
  std::cout << tag << ": test accuracy " << 100 * o.accuracy << " %, " << o.bytes_per_step
            << " bytes per worker per step\n";
  return o;
}

TEST(Compression, OneEpochBytesAndAccuracyAgainstSsgd) {
  TempDir dir;
  const Outcome ssgd = RunDemo(dir, "ssgd", {});
  struct Case {
    std::string tag;
    std::vector<std::string> sets;
    double max_byte_fraction;
    double max_accuracy_drop;  // percentage points
  };
  const std::vector<Case> cases = {
      {"quantized-8", {"spec.strategy.type=quantized", "spec.strategy.bits=8"}, 0.30, 0.5},
      {"fp16", {"spec.strategy.type=fp16"}, 0.51, 0.5},
      {"quantized-4", {"spec.strategy.type=quantized", "spec.strategy.bits=4"}, 0.17, 1.0},
      {"topk-0.01", {"spec.strategy.type=topk", "spec.strategy.density=0.01"}, 0.05, 2.0},
      {"dgc-0.01", {"spec.strategy.type=dgc", "spec.strategy.density=0.01"}, 0.05, 2.0},
      {"topk-0.02-compact",
       {"spec.strategy.type=topk", "spec.strategy.density=0.02",
        "spec.strategy.sparseEncoding=compact"},
       0.05,
       1.0},
      {"dgc-0.02-compact-unmasked",
       {"spec.strategy.type=dgc", "spec.strategy.density=0.02",
        "spec.strategy.sparseEncoding=compact", "spec.strategy.momentumMasking=false"},
       0.05,
       1.0},
  };
  for (const Case& c : cases) {
    const Outcome o = RunDemo(dir, c.tag, c.sets);
    EXPECT_LE(o.bytes_per_step, c.max_byte_fraction * ssgd.bytes_per_step) << c.tag;
    EXPECT_GT(o.bytes_per_step, 0) << c.tag;
    EXPECT_GE(100 * o.accuracy, 100 * ssgd.accuracy - c.max_accuracy_drop) << c.tag;
  }
}

}  // namespace
}  // namespace hptrain::testing
