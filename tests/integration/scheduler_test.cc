// The sub-tensor priority scheduler (spec.scheduler.type: priority; docs/algorithms.md §3d) through
// the real binary: LeNet-5 on Fashion-MNIST, the next step's forward running layer by layer
// while the previous exchange completes. With two workers no summation order can differ, so
// ssgd with the scheduler is ssgd bit for bit; with four, multistep at H ≡ 1 under the
// scheduler is ssgd under the scheduler bit for bit, and models without a layer-wise forward
// (ResNet-20) run under it too.
#include <filesystem>
#include <iostream>

#include "gtest/gtest.h"
#include "runtime/train/checkpoint.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

bool HaveData() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

const std::vector<std::string> kPriority = {"spec.scheduler.type=priority",
                                            "spec.scheduler.partitionElements=4096",
                                            "spec.scheduler.creditElements=8192"};

// The parameters after 30 steps of LeNet-5 on Fashion-MNIST (global batch 128) with `sets`.
std::vector<float> Train(const TempDir& dir, const std::string& tag, int workers,
                         std::vector<std::string> sets) {
  const std::string checkpoint = dir.path() + "/" + tag + ".ckpt";
  const std::string job = dir.Write(
      tag + ".yaml",
      LeNetJob("scheduler-" + tag, "    - {name: cpu, replicas: " + std::to_string(workers) + "}\n",
               "  globalBatchSize: 128\n  epochs: 1\n  maxSteps: 30\n  seed: 42\n"
               "  checkpoint: {path: " + checkpoint + "}\n"));
  std::vector<std::string> argv = {HptrainBinary(), "run", job, "--quiet"};
  for (const auto& set : sets) argv.insert(argv.end(), {"--set", set});
  ProcessResult r = RunProcess(argv, 600);
  EXPECT_EQ(r.exit_code, 0) << tag << ": " << r.err;
  auto loaded = train::LoadCheckpoint(checkpoint);
  EXPECT_TRUE(loaded.ok()) << tag << ": " << loaded.status();
  if (!loaded.ok()) return {};
  EXPECT_EQ(loaded->step, 30) << tag;
  return loaded->sections["params"];
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Scheduler, SsgdWithThePrioritySchedulerIsSsgdOnTwoWorkers) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets";
  TempDir dir;
  const std::vector<float> plain = Train(dir, "ssgd", 2, {});
  const std::vector<float> scheduled = Train(dir, "ssgd-priority", 2, kPriority);
  ASSERT_EQ(plain.size(), 61706u);
  EXPECT_TRUE(plain == scheduled) << "the scheduled run's parameters differ";
}

TEST(Scheduler, MultistepWithIntervalOneIsSsgdUnderTheSchedulerOnFourWorkers) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets";
  TempDir dir;
  const std::vector<float> ssgd = Train(dir, "ssgd-priority", 4, kPriority);
  const std::vector<float> multistep =
      Train(dir, "multistep-priority", 4,
            Concat({"spec.strategy.type=multistep", "spec.strategy.interval=1"}, kPriority));
  ASSERT_EQ(ssgd.size(), 61706u);
  EXPECT_TRUE(ssgd == multistep) << "multistep at H = 1 differs from ssgd";
}

TEST(Scheduler, AModelWithoutALayerWiseForwardTrainsUnderTheScheduler) {
  std::vector<std::string> argv = {HptrainBinary(), "run", "examples/synthetic-mlp.yaml",
                                   "--quiet", "--set", "spec.model.name=resnet20", "--set",
                                   "spec.model.hidden=[]", "--set",
                                   "spec.dataset.synthetic.shape=[3,32,32]", "--set",
                                   "spec.maxSteps=6", "--set", "spec.strategy.type=multistep",
                                   "--set", "spec.strategy.interval=2"};
  for (const auto& set : kPriority) argv.insert(argv.end(), {"--set", set});
  ProcessResult r = RunProcess(argv, 300);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace hptrain::testing
