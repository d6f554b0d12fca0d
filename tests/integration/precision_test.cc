// spec.precision through the real binary: fp16's loss scaling skips, on every worker, a step
// whose gradient has an inf on one worker, leaving the model and the optimizer exactly as they
// were (tested on the CPU with spec.testing.lossScaling, the fp16 path without autocast); and
// fp16 on a machine without a GPU is bad input.
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/train/checkpoint.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

constexpr int kSkippedStep = 3;  // 0-based: the fourth step

// Two workers of the synthetic MLP with momentum, `steps` steps, the final checkpoint at `ckpt`.
std::string Job(const std::string& name, int steps, const std::string& ckpt,
                const std::string& testing) {
  return SyntheticJob(name, 2,
                      "  epochs: 1\n"
                      "  maxSteps: " + std::to_string(steps) + "\n"
                      "  seed: 5\n"
                      "  checkpoint: {path: " + ckpt + "}\n" + testing);
}

struct Trained {
  ProcessResult process;
  train::Checkpoint checkpoint;
};

Trained TrainTo(const TempDir& dir, const std::string& name, int steps, const std::string& testing) {
  const std::string ckpt = dir.path() + "/" + name + ".ckpt";
  const std::string job = dir.Write(name + ".yaml", Job(name, steps, ckpt, testing));
  Trained run;
  run.process = RunProcess({HptrainBinary(), "run", job, "--quiet", "--set",
                            "spec.optimizer.momentum=0.9"},
                           300);
  EXPECT_EQ(run.process.exit_code, 0) << name << ": " << run.process.err;
  absl::StatusOr<train::Checkpoint> loaded = train::LoadCheckpoint(ckpt);
  EXPECT_TRUE(loaded.ok()) << name << ": " << loaded.status();
  if (loaded.ok()) run.checkpoint = *std::move(loaded);
  return run;
}

// Values that differ bit for bit between two sections.
size_t Differing(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return a.size() + b.size();
  size_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return differing;
}

size_t SkipLines(const std::string& err) {
  size_t n = 0;
  for (const std::string& line : Lines(err)) n += line.find("skipped: a gradient") != std::string::npos;
  return n;
}

TEST(LossScaling, SkipsAStepWithAnInfGradientWithoutChangingTheParameters) {
  TempDir dir;
  const std::string scaling = "  testing: {lossScaling: true}\n";
  // The parameters after kSkippedStep steps, without and with loss scaling.
  Trained plain = TrainTo(dir, "plain", kSkippedStep, "");
  Trained scaled = TrainTo(dir, "scaled", kSkippedStep, scaling);
  // One step more with an inf in worker 1's gradient at that step; and without it.
  Trained skipped = TrainTo(dir, "skipped", kSkippedStep + 1,
                        "  testing: {lossScaling: true, infGradientStep: " +
                            std::to_string(kSkippedStep) + ", infGradientRank: 1}\n");
  Trained applied = TrainTo(dir, "applied", kSkippedStep + 1, scaling);
  if (HasFailure()) return;

  const std::vector<float>& params = plain.checkpoint.sections["params"];
  ASSERT_FALSE(params.empty());
  // Scaling by 2^16 and unscaling as the gradients are stored is exact.
  EXPECT_EQ(Differing(scaled.checkpoint.sections["params"], params), 0u);
  // The skipped step left the parameters and the momentum as they were, bit for bit, on the
  // worker that saw the inf and on the one that did not alike (rank 0 writes the checkpoint).
  EXPECT_EQ(Differing(skipped.checkpoint.sections["params"], params), 0u);
  EXPECT_EQ(Differing(skipped.checkpoint.sections["momentum"],
                      plain.checkpoint.sections["momentum"]),
            0u);
  EXPECT_EQ(skipped.checkpoint.optimizer_steps, plain.checkpoint.optimizer_steps);
  // ... yet the step counts: its data was consumed.
  EXPECT_EQ(skipped.checkpoint.step, kSkippedStep + 1);
  EXPECT_EQ(plain.checkpoint.step, kSkippedStep);
  // The same step without the inf moves the model (so the comparison above could fail).
  EXPECT_GT(Differing(applied.checkpoint.sections["params"], params), params.size() / 2);
  EXPECT_EQ(applied.checkpoint.optimizer_steps, plain.checkpoint.optimizer_steps + 1);
  // One skip, reported once with the backed-off scale; none without the inf.
  EXPECT_EQ(SkipLines(skipped.process.err), 1u) << skipped.process.err;
  EXPECT_NE(skipped.process.err.find("step 3 skipped"), std::string::npos) << skipped.process.err;
  EXPECT_NE(skipped.process.err.find("loss scale now 32768"), std::string::npos)
      << skipped.process.err;
  EXPECT_EQ(SkipLines(applied.process.err), 0u) << applied.process.err;
}

TEST(Precision, Fp16WithoutAGpuIsBadInput) {
  TempDir dir;
  const std::string job = dir.Write("fp16.yaml", SyntheticJob("fp16-cpu", 1, "  epochs: 1\n"));
  // spec.device auto, with every GPU hidden: it resolves to the CPU.
  ProcessResult r = RunProcess({"/usr/bin/env", "CUDA_VISIBLE_DEVICES=", HptrainBinary(), "run",
                                job, "--quiet", "--set", "spec.precision=fp16"},
                               120);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("spec.precision"), std::string::npos) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
}

}  // namespace
}  // namespace hptrain::testing
