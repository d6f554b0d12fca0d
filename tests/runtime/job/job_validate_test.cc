#include "runtime/job/job_validate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace hptrain::job {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// A valid two-worker job; each case below breaks one thing.
JobSpec ValidSpec() {
  JobSpec spec;
  spec.name = "job";
  spec.model.name = "lenet5";
  spec.dataset.name = "fashion-mnist";
  spec.dataset.format = "idx";
  spec.global_batch_size = 64;
  WorkerGroupSpec group;
  group.name = "cpu";
  group.replicas = 2;
  spec.worker_groups = {group};
  return spec;
}

TEST(ValidateJobTest, ValidSpecPasses) { EXPECT_TRUE(ValidateJob(ValidSpec()).ok()); }

struct Case {
  std::string name;
  std::function<void(JobSpec&)> mutate;
  std::string message_prefix;  // the error must start with this ("<path>: <reason...>")
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ValidateJobErrorTest : public ::testing::TestWithParam<Case> {};

TEST_P(ValidateJobErrorTest, NamesTheField) {
  JobSpec spec = ValidSpec();
  GetParam().mutate(spec);
  absl::Status status = ValidateJob(spec);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), StartsWith(GetParam().message_prefix));
}

WorkerGroupSpec Group(const std::string& name, int replicas, int batch = 0) {
  WorkerGroupSpec group;
  group.name = name;
  group.replicas = replicas;
  group.batch_size = batch;
  return group;
}

INSTANTIATE_TEST_SUITE_P(
    Table, ValidateJobErrorTest,
    ::testing::Values(
        // metadata
        Case{"NoName", [](JobSpec& s) { s.name = ""; }, "metadata.name: required"},
        Case{"BadName", [](JobSpec& s) { s.name = "-x"; },
             "metadata.name: \"-x\" is not a DNS-1123 label"},
        Case{"BadNamespace", [](JobSpec& s) { s.ns = "A"; }, "metadata.namespace: \"A\" is not"},
        // model
        Case{"NoModel", [](JobSpec& s) { s.model.name = ""; }, "spec.model: set name"},
        Case{"BothModels", [](JobSpec& s) { s.model.torchscript = "m.pt"; },
             "spec.model.torchscript: cannot be combined with spec.model.name"},
        Case{"UnknownModel", [](JobSpec& s) { s.model.name = "gpt"; },
             "spec.model.name: unknown model \"gpt\" (expected one of lenet5, mlp,"},
        Case{"HiddenNotMlp", [](JobSpec& s) { s.model.hidden = {8}; },
             "spec.model.hidden: applies only to model mlp"},
        // trainer
        Case{"TrainerWithModel", [](JobSpec& s) { s.trainer.command = {"python3", "t.py"}; },
             "spec.model: cannot be combined with spec.trainer"},
        Case{"TrainerWithTorchScript",
             [](JobSpec& s) {
               s.trainer.command = {"python3", "t.py"};
               s.model.name = "";
               s.model.torchscript = "m.pt";
             },
             "spec.model: cannot be combined with spec.trainer"},
        Case{"TrainerEmptyProgram",
             [](JobSpec& s) {
               s.model.name = "";
               s.trainer.command = {"", "t.py"};
             },
             "spec.trainer.command[0]: must not be empty"},
        Case{"TrainerArgsWithoutCommand", [](JobSpec& s) { s.trainer.args = {"x"}; },
             "spec.trainer.command: required when spec.trainer.args is set"},
        Case{"TrainerWorkingDirWithoutCommand", [](JobSpec& s) { s.trainer.working_dir = "src"; },
             "spec.trainer.command: required when spec.trainer.workingDir is set"},
        Case{"TrainerBadDataSet",
             [](JobSpec& s) {
               s.model.name = "";
               s.trainer.command = {"./train"};
               s.dataset.name = "cifar10";
               s.dataset.format = "cifar-binary";
             },
             "spec.dataset.path: required for dataset cifar10"},
        Case{"TrainerStillNeedsWorkers",
             [](JobSpec& s) {
               s.model.name = "";
               s.trainer.command = {"./train"};
               s.worker_groups.clear();
             },
             "spec.workerGroups: at least one worker group is required"},
        Case{"HiddenZero",
             [](JobSpec& s) {
               s.model.name = "mlp";
               s.model.hidden = {8, 0};
             },
             "spec.model.hidden[1]: must be >= 1"},
        // dataset
        Case{"NoDataset", [](JobSpec& s) { s.dataset.name = ""; },
             "spec.dataset.name: required (one of"},
        Case{"UnknownDataset", [](JobSpec& s) { s.dataset.name = "imagenet"; },
             "spec.dataset.name: unknown dataset \"imagenet\""},
        Case{"UnknownFormat", [](JobSpec& s) { s.dataset.format = "png"; },
             "spec.dataset.format: unknown format \"png\""},
        Case{"WrongFormat", [](JobSpec& s) { s.dataset.format = "cifar-binary"; },
             "spec.dataset.format: dataset fashion-mnist comes in format idx"},
        Case{"CifarNeedsPath",
             [](JobSpec& s) {
               s.dataset.name = "cifar10";
               s.dataset.format = "cifar-binary";
             },
             "spec.dataset.path: required for dataset cifar10"},
        Case{"SyntheticShape",
             [](JobSpec& s) {
               s.dataset.name = "synthetic";
               s.dataset.format = "synthetic";
               s.dataset.synthetic.shape = {1, 0};
             },
             "spec.dataset.synthetic.shape[1]: must be >= 1"},
        Case{"SyntheticClasses",
             [](JobSpec& s) {
               s.dataset.name = "synthetic";
               s.dataset.format = "synthetic";
               s.dataset.synthetic.classes = 1;
             },
             "spec.dataset.synthetic.classes: must be >= 2"},
        // strategy
        Case{
            "UnknownStrategy", [](JobSpec& s) { s.strategy.type = "foo"; },
            "spec.strategy.type: unknown strategy \"foo\" (expected one of ssgd, fp16, quantized,"},
        Case{"DensityWithSsgd", [](JobSpec& s) { s.strategy.Set("density", 0.1); },
             "spec.strategy.density: does not apply to strategy ssgd (ssgd takes no parameters)"},
        Case{"BitsWithTopk",
             [](JobSpec& s) {
               s.strategy.type = "topk";
               s.strategy.Set("bits", "4");
             },
             "spec.strategy.bits: does not apply to strategy topk (topk takes density, "
             "errorFeedback, warmupEpochs, sparseEncoding)"},
        Case{"ErrorFeedbackWithDgc",
             [](JobSpec& s) {
               s.strategy.type = "dgc";
               s.strategy.Set("errorFeedback", false);
             },
             "spec.strategy.errorFeedback: does not apply to strategy dgc"},
        Case{"ClipNormWithTopk",
             [](JobSpec& s) {
               s.strategy.type = "topk";
               s.strategy.Set("clipNorm", 1);
             },
             "spec.strategy.clipNorm: does not apply to strategy topk"},
        Case{"SparseEncodingWithQuantized",
             [](JobSpec& s) {
               s.strategy.type = "quantized";
               s.strategy.Set("sparseEncoding", "compact");
             },
             "spec.strategy.sparseEncoding: does not apply to strategy quantized"},
        Case{"UnknownSparseEncoding",
             [](JobSpec& s) {
               s.strategy.type = "topk";
               s.strategy.Set("sparseEncoding", "varint");
             },
             "spec.strategy.sparseEncoding: unknown sparse encoding \"varint\" (expected one of "
             "pairs, compact)"},
        Case{"NegativeClipNorm",
             [](JobSpec& s) {
               s.strategy.type = "dgc";
               s.strategy.Set("clipNorm", -1);
             },
             "spec.strategy.clipNorm: must be >= 0, got -1"},
        Case{"IntervalWithFp16",
             [](JobSpec& s) {
               s.strategy.type = "fp16";
               s.strategy.Set("interval", 4);
             },
             "spec.strategy.interval: does not apply to strategy fp16"},
        Case{"PushRatioWithHps",
             [](JobSpec& s) {
               s.strategy.type = "hps";
               s.strategy.Set("pushRatio", 0.5);
             },
             "spec.strategy.pushRatio: does not apply to strategy hps"},
        Case{"BadBits",
             [](JobSpec& s) {
               s.strategy.type = "quantized";
               s.strategy.Set("bits", "3");
             },
             "spec.strategy.bits: must be one of 1, 2, 4, 8, 16, 32, dynamic, got \"3\""},
        Case{"HpsBitsOne",
             [](JobSpec& s) {
               s.strategy.type = "hps";
               s.strategy.Set("bits", "1");
             },
             "spec.strategy.bits: strategy hps takes 2, 4, 8, 16, 32 or dynamic, got \"1\""},
        Case{"StalenessWithSsgd", [](JobSpec& s) { s.strategy.Set("staleness", 0); },
             "spec.strategy.staleness: does not apply to strategy ssgd (ssgd takes no "
             "parameters)"},
        Case{"StalenessWithPs",
             [](JobSpec& s) {
               s.strategy.type = "ps";
               s.strategy.Set("staleness", 1);
             },
             "spec.strategy.staleness: does not apply to strategy ps (ps takes no parameters)"},
        Case{"StalenessTwo",
             [](JobSpec& s) {
               s.strategy.type = "hps";
               s.strategy.Set("staleness", 2);
             },
             "spec.strategy.staleness: must be 0 or 1, got 2"},
        Case{"WarmupStepsWithLocalsgd",
             [](JobSpec& s) {
               s.strategy.type = "localsgd";
               s.strategy.Set("warmupSteps", 100);
             },
             "spec.strategy.warmupSteps: does not apply to strategy localsgd (localsgd takes "
             "interval)"},
        Case{"NegativeWarmupSteps",
             [](JobSpec& s) {
               s.strategy.type = "hierarchical";
               s.strategy.Set("warmupSteps", -1);
             },
             "spec.strategy.warmupSteps: must be >= 0, got -1"},
        Case{"NegativeStaleness",
             [](JobSpec& s) {
               s.strategy.type = "hps";
               s.strategy.Set("staleness", -2);
             },
             "spec.strategy.staleness: must be 0 or 1, got -2"},
        Case{"DensityTooHigh",
             [](JobSpec& s) {
               s.strategy.type = "topk";
               s.strategy.Set("density", 1.5);
             },
             "spec.strategy.density: must be in (0, 1]"},
        Case{"NegativeBucket",
             [](JobSpec& s) {
               s.strategy.type = "fp16";
               s.strategy.Set("bucketSize", -1);
             },
             "spec.strategy.bucketSize: must be >= 1"},
        Case{"NegativeInterval",
             [](JobSpec& s) {
               s.strategy.type = "localsgd";
               s.strategy.Set("interval", -2);
             },
             "spec.strategy.interval: must be >= 1"},
        Case{"AdaptiveIntervalOnLocalSgd",
             [](JobSpec& s) {
               s.strategy.type = "localsgd";
               s.strategy.Set("interval", "adaptive");
             },
             "spec.strategy.interval: adaptive applies only to strategy multistep"},
        Case{"HMinAboveHMax",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("hMin", 8);
               s.strategy.Set("hMax", 4);
             },
             "spec.strategy.hMin: must be <= spec.strategy.hMax (4), got 8"},
        Case{"HMinAboveDefaultHMax",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("hMin", 40);
             },
             "spec.strategy.hMin: must be <= spec.strategy.hMax (32), got 40"},
        Case{"HMaxWithFixedInterval",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("interval", 4);
               s.strategy.Set("hMax", 8);
             },
             "spec.strategy.hMax: applies only to an adaptive interval"},
        Case{"HMinZeroOrBelow",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("hMin", -1);
             },
             "spec.strategy.hMin: must be >= 1, got -1"},
        Case{"NegativeMu",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("mu", -0.1);
             },
             "spec.strategy.mu: must be >= 0, got -0.1"},
        Case{"ExplicitIntervalZero",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("interval", 0);
             },
             "spec.strategy.interval: must be >= 1, got 0"},
        Case{"ExplicitIntervalZeroOnLocalSgd",
             [](JobSpec& s) {
               s.strategy.type = "localsgd";
               s.strategy.Set("interval", 0);
             },
             "spec.strategy.interval: must be >= 1, got 0"},
        Case{"ExplicitIntervalZeroOnSsgd", [](JobSpec& s) { s.strategy.Set("interval", 0); },
             "spec.strategy.interval: does not apply to strategy ssgd"},
        Case{"DelayNegative",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("delay", -1);
             },
             "spec.strategy.delay: must be 0 or 1, got -1"},
        Case{"CompressionOnQuantized",
             [](JobSpec& s) {
               s.strategy.type = "quantized";
               s.strategy.Set("compression.type", "quantized");
             },
             "spec.strategy.compression: does not apply to strategy quantized (quantized takes "
             "bits, bucketSize, errorFeedback, denseFallback, probeSteps, compressAbove)"},
        Case{"ProbeStepsOnFixedBitsWithoutFallback",
             [](JobSpec& s) {
               s.strategy.type = "quantized";
               s.strategy.Set("probeSteps", 10);
             },
             "spec.strategy.probeSteps: applies only to bits dynamic or with "
             "spec.strategy.denseFallback: true"},
        Case{"DenseFallbackWithDynamicBits",
             [](JobSpec& s) {
               s.strategy.type = "quantized";
               s.strategy.Set("bits", "dynamic");
               s.strategy.Set("denseFallback", true);
             },
             "spec.strategy.denseFallback: applies only to a fixed bit width (bits dynamic always "
             "probes first)"},
        Case{"AutoBucketSizeWithTopk",
             [](JobSpec& s) {
               s.strategy.type = "auto";
               s.strategy.Set("compressor", "topk");
               s.strategy.Set("bucketSize", 256);
             },
             "spec.strategy.bucketSize: applies only to compressor quantized or fp16, got "
             "compressor topk"},
        Case{"AutoProbeOfOneStep",
             [](JobSpec& s) {
               s.strategy.type = "auto";
               s.strategy.Set("probeSteps", 1);
             },
             "spec.strategy.probeSteps: must be >= 2, got 1"},
        Case{"AutoUnknownCompressor",
             [](JobSpec& s) {
               s.strategy.type = "auto";
               s.strategy.Set("compressor", "dgc");
             },
             "spec.strategy.compressor: "},
        Case{"CompressionOnDefaultSsgd", [](JobSpec& s) { s.strategy.Set("compression.bits", 8); },
             "spec.strategy.compression: does not apply to strategy ssgd"},
        Case{"CompressionUnknownType",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("compression.type", "zip");
             },
             "spec.strategy.compression.type: unknown compression \"zip\" (expected one of none, "
             "quantized, fp16)"},
        Case{"CompressionBitsWithoutType",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("compression.bits", 4);
             },
             "spec.strategy.compression.type: required (one of none, quantized, fp16)"},
        Case{"CompressionBitsThree",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("compression.type", "quantized");
               s.strategy.Set("compression.bits", 3);
             },
             "spec.strategy.compression.bits: must be 1, 2, 4 or 8, got 3"},
        Case{"CompressionBitsWithFp16",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("compression.type", "fp16");
               s.strategy.Set("compression.bits", 8);
             },
             "spec.strategy.compression.bits: applies only to compression type quantized, got "
             "type fp16"},
        // scheduler
        Case{"UnknownScheduler", [](JobSpec& s) { s.scheduler.type = "fifo"; },
             "spec.scheduler.type: unknown scheduler \"fifo\" (expected one of none, priority)"},
        Case{"SchedulerPartitionNegative",
             [](JobSpec& s) {
               s.scheduler.type = "priority";
               s.scheduler.partition_elements = -5;
             },
             "spec.scheduler.partitionElements: must be >= 1, got -5"},
        Case{"SchedulerCreditNegative",
             [](JobSpec& s) {
               s.scheduler.type = "priority";
               s.scheduler.credit_elements = -1;
             },
             "spec.scheduler.creditElements: must be >= 1, got -1"},
        Case{"SchedulerPartitionWithoutPriority",
             [](JobSpec& s) { s.scheduler.partition_elements = 1024; },
             "spec.scheduler.partitionElements: applies only to spec.scheduler.type priority, got "
             "none"},
        Case{"SchedulerCreditWithoutPriority", [](JobSpec& s) { s.scheduler.credit_elements = 1; },
             "spec.scheduler.creditElements: applies only to spec.scheduler.type priority"},
        Case{"SchedulerCreditBelowPartition",
             [](JobSpec& s) {
               s.scheduler.type = "priority";
               s.scheduler.partition_elements = 4096;
               s.scheduler.credit_elements = 1024;
             },
             "spec.scheduler.creditElements: must be >= spec.scheduler.partitionElements (4096), "
             "got 1024"},
        Case{"SchedulerCreditBelowDefaultPartition",
             [](JobSpec& s) {
               s.scheduler.type = "priority";
               s.scheduler.credit_elements = 1 << 20;
             },
             "spec.scheduler.creditElements: must be >= spec.scheduler.partitionElements "
             "(8388608), got 1048576"},
        Case{"SchedulerPartitionAboveDefaultCredit",
             [](JobSpec& s) {
               s.scheduler.type = "priority";
               s.scheduler.partition_elements = int64_t{32} << 20;
             },
             "spec.scheduler.partitionElements: must be <= spec.scheduler.creditElements "
             "(16777216), got 33554432"},
        Case{"PriorityWithLocalSgd",
             [](JobSpec& s) {
               s.strategy.type = "localsgd";
               s.scheduler.type = "priority";
             },
             "spec.scheduler.type: priority applies only to strategies ssgd and multistep, got "
             "strategy localsgd"},
        Case{"PriorityWithQuantized",
             [](JobSpec& s) {
               s.strategy.type = "quantized";
               s.scheduler.type = "priority";
             },
             "spec.scheduler.type: priority applies only to strategies ssgd and multistep, got "
             "strategy quantized"},
        Case{"PriorityWithDelayOne",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("delay", 1);
               s.scheduler.type = "priority";
             },
             "spec.scheduler.type: priority cannot be combined with spec.strategy.delay 1"},
        Case{"PriorityWithCompression",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("compression.type", "quantized");
               s.scheduler.type = "priority";
             },
             "spec.scheduler.type: priority cannot be combined with spec.strategy.compression "
             "(the scheduler's chunks travel uncompressed), got compression type quantized"},
        Case{"DelayTwo",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.strategy.Set("delay", 2);
             },
             "spec.strategy.delay: must be 0 or 1, got 2"},
        Case{"MuOnLocalSgd",
             [](JobSpec& s) {
               s.strategy.type = "localsgd";
               s.strategy.Set("mu", 0.01);
             },
             "spec.strategy.mu: does not apply to strategy localsgd (localsgd takes interval)"},
        Case{"MultistepWithAdam",
             [](JobSpec& s) {
               s.strategy.type = "multistep";
               s.optimizer.type = "adam";
             },
             "spec.optimizer.type: strategy multistep takes optimizer sgd, got adam"},
        Case{"NegativeThreshold",
             [](JobSpec& s) {
               s.strategy.type = "gossip";
               s.strategy.Set("threshold", -1);
             },
             "spec.strategy.threshold: must be >= 0"},
        Case{"CalibrateWithThreshold",
             [](JobSpec& s) {
               s.strategy.type = "gossip";
               s.strategy.Set("calibrate", true);
               s.strategy.Set("threshold", 0.02);
             },
             "spec.strategy.threshold: cannot be set with spec.strategy.calibrate: true "
             "(calibration sets the threshold)"},
        Case{"CalibrateWithPeriod",
             [](JobSpec& s) {
               s.strategy.type = "gossip";
               s.strategy.Set("calibrate", true);
               s.strategy.Set("period", 4);
             },
             "spec.strategy.calibrate: applies only to the adaptive trigger, but "
             "spec.strategy.period is 4 (fixed-period gossip)"},
        Case{"CalibrateOnSsgd", [](JobSpec& s) { s.strategy.Set("calibrate", false); },
             "spec.strategy.calibrate"},
        Case{"PushRatioRange",
             [](JobSpec& s) {
               s.strategy.type = "mp2";
               s.strategy.Set("pushRatio", 2);
             },
             "spec.strategy.pushRatio: must be in (0, 1]"},
        Case{"Mp2WithoutPredictor", [](JobSpec& s) { s.strategy.type = "mp2"; },
             "spec.strategy.predictor: required for strategy mp2"},
        Case{"Mp2HistoryRange",
             [](JobSpec& s) {
               s.strategy.type = "mp2";
               s.strategy.Set("predictor", "zero");
               s.strategy.Set("history", 1);
             },
             "spec.strategy.history: must be between 2 and 64, got 1"},
        Case{"Mp2Mode",
             [](JobSpec& s) {
               s.strategy.type = "mp2";
               s.strategy.Set("predictor", "zero");
               s.strategy.Set("mode", "C");
             },
             "spec.strategy.mode"},
        Case{"Mp2DampingRange",
             [](JobSpec& s) {
               s.strategy.type = "mp2";
               s.strategy.Set("predictor", "zero");
               s.strategy.Set("damping", 1.5);
             },
             "spec.strategy.damping: must be in (0, 1]"},
        Case{"CollectEvery", [](JobSpec& s) { s.collect.every = 0; },
             "spec.collect.every: must be >= 1"},
        // ps
        Case{"ZeroPsShards", [](JobSpec& s) { s.ps_shards = 0; },
             "spec.ps.shards: must be between 1 and 64, got 0"},
        Case{"TooManyPsShards",
             [](JobSpec& s) {
               s.strategy.type = "ps";
               s.ps_shards = 65;
             },
             "spec.ps.shards: must be between 1 and 64, got 65"},
        Case{"PsShardsWithSsgd", [](JobSpec& s) { s.ps_shards = 2; },
             "spec.ps.shards: 2 needs a parameter-server strategy (ps, hps, mp2), not ssgd"},
        Case{"PsShardsWithGossip",
             [](JobSpec& s) {
               s.strategy.type = "gossip";
               s.ps_shards = 4;
             },
             "spec.ps.shards: 4 needs a parameter-server strategy (ps, hps, mp2), not gossip"},
        // optimizer
        Case{"UnknownOptimizer", [](JobSpec& s) { s.optimizer.type = "lamb"; },
             "spec.optimizer.type: unknown optimizer \"lamb\""},
        Case{"ZeroLr", [](JobSpec& s) { s.optimizer.lr = 0; },
             "spec.optimizer.lr: must be > 0, got 0"},
        Case{"MomentumOne", [](JobSpec& s) { s.optimizer.momentum = 1; },
             "spec.optimizer.momentum: must be in [0, 1), got 1"},
        Case{"NegativeWeightDecay", [](JobSpec& s) { s.optimizer.weight_decay = -1e-4; },
             "spec.optimizer.weightDecay: must be >= 0"},
        Case{"NesterovWithoutMomentum", [](JobSpec& s) { s.optimizer.nesterov = true; },
             "spec.optimizer.nesterov: requires spec.optimizer.momentum > 0"},
        Case{"BetasWithSgd", [](JobSpec& s) { s.optimizer.beta1 = 0.5; },
             "spec.optimizer.betas: applies only to optimizer adam"},
        Case{"MomentumWithAdam",
             [](JobSpec& s) {
               s.optimizer.type = "adam";
               s.optimizer.momentum = 0.9;
             },
             "spec.optimizer.momentum: applies only to optimizer sgd"},
        Case{"AdamBeta",
             [](JobSpec& s) {
               s.optimizer.type = "adam";
               s.optimizer.beta2 = 1;
             },
             "spec.optimizer.betas[1]: must be in [0, 1)"},
        Case{"UnknownSchedule", [](JobSpec& s) { s.optimizer.schedule.type = "linear"; },
             "spec.optimizer.schedule.type: unknown schedule \"linear\""},
        Case{"StepNeedsStepSize", [](JobSpec& s) { s.optimizer.schedule.type = "step"; },
             "spec.optimizer.schedule.stepSize: required for schedule step"},
        Case{"StepSizeWithCosine",
             [](JobSpec& s) {
               s.optimizer.schedule.type = "cosine";
               s.optimizer.schedule.step_size = 3;
             },
             "spec.optimizer.schedule.stepSize: applies only to schedule step"},
        Case{"MinLrWithConstant", [](JobSpec& s) { s.optimizer.schedule.min_lr = 0.001; },
             "spec.optimizer.schedule.minLr: applies only to schedule cosine"},
        Case{"MinLrAboveLr",
             [](JobSpec& s) {
               s.optimizer.schedule.type = "cosine";
               s.optimizer.schedule.min_lr = 1;
             },
             "spec.optimizer.schedule.minLr: must be below spec.optimizer.lr"},
        // run knobs
        Case{"ZeroGlobalBatch", [](JobSpec& s) { s.global_batch_size = 0; },
             "spec.globalBatchSize: must be > 0, got 0"},
        Case{"ZeroEpochs", [](JobSpec& s) { s.epochs = 0; }, "spec.epochs: must be >= 1, got 0"},
        Case{"NegativeMaxSteps", [](JobSpec& s) { s.max_steps = -1; },
             "spec.maxSteps: must be >= 0"},
        Case{"NegativeEvalEverySteps", [](JobSpec& s) { s.eval_every_steps = -5; },
             "spec.evalEverySteps: must be >= 0"},
        Case{"UnknownDevice", [](JobSpec& s) { s.device = "tpu"; },
             "spec.device: unknown device \"tpu\" (expected one of cpu, cuda, auto)"},
        Case{"EmptyDevice", [](JobSpec& s) { s.device = ""; },
             "spec.device: required (one of cpu, cuda, auto)"},
        // device and communicator back end
        Case{"UnknownBackend", [](JobSpec& s) { s.communicator.backend = "mpi"; },
             "spec.communicator.backend: unknown backend \"mpi\" (expected one of auto, gloo, "
             "nccl)"},
        Case{"NcclOnCpu",
             [](JobSpec& s) {
               s.device = "cpu";
               s.communicator.backend = "nccl";
             },
             "spec.communicator.backend: nccl needs the workers on cuda, got spec.device: cpu"},
        Case{"NcclWithHostStrategy",
             [](JobSpec& s) {
               s.device = "cuda";
               s.strategy.type = "localsgd";
               s.communicator.backend = "nccl";
             },
             "spec.communicator.backend: nccl does not carry strategy localsgd, which exchanges "
             "through host memory"},
        Case{"NcclWithHierarchicalCommunicator",
             [](JobSpec& s) {
               s.communicator.backend = "nccl";
               s.communicator.hierarchical = true;
             },
             "spec.communicator.backend: nccl cannot run spec.communicator.hierarchical"},
        Case{"PrioritySchedulerOnCuda",
             [](JobSpec& s) {
               s.device = "cuda";
               s.scheduler.type = "priority";
             },
             "spec.scheduler.type: priority is not supported on cuda yet"},
        Case{"NcclWithPriorityScheduler",
             [](JobSpec& s) {
               s.communicator.backend = "nccl";
               s.scheduler.type = "priority";
             },
             "spec.communicator.backend: nccl needs the workers on cuda, where "
             "spec.scheduler.type priority is not supported yet"},
        Case{"NegativeThreads", [](JobSpec& s) { s.threads = -1; }, "spec.threads: must be >= 0"},
        Case{"ZeroBucketMiB", [](JobSpec& s) { s.bucket_mib = 0; }, "spec.bucketMiB: must be >= 1"},
        Case{"CheckpointIntervalNeedsPath", [](JobSpec& s) { s.checkpoint.interval_steps = 10; },
             "spec.checkpoint.path: required when spec.checkpoint.intervalSteps is set"},
        Case{"NegativeBackoff", [](JobSpec& s) { s.run_policy.backoff_limit = -1; },
             "spec.runPolicy.backoffLimit: must be >= 0"},
        Case{"NegativeDeadline", [](JobSpec& s) { s.run_policy.active_deadline_seconds = -5; },
             "spec.runPolicy.activeDeadlineSeconds: must be >= 0"},
        Case{"NegativeTtl", [](JobSpec& s) { s.run_policy.ttl_seconds_after_finished = -5; },
             "spec.runPolicy.ttlSecondsAfterFinished: must be >= 0"},
        // workers
        Case{"NoGroups", [](JobSpec& s) { s.worker_groups.clear(); },
             "spec.workerGroups: at least one worker group is required"},
        Case{"ZeroReplicas", [](JobSpec& s) { s.worker_groups[0].replicas = 0; },
             "spec.workerGroups[0].replicas: must be >= 1, got 0"},
        Case{"GroupWithoutName", [](JobSpec& s) { s.worker_groups.push_back(Group("", 1)); },
             "spec.workerGroups[1].name: required"},
        Case{"GroupNameNotDns", [](JobSpec& s) { s.worker_groups[0].name = "A100"; },
             "spec.workerGroups[0].name: \"A100\" is not a DNS-1123 label"},
        Case{"DuplicateGroup", [](JobSpec& s) { s.worker_groups.push_back(Group("cpu", 1)); },
             "spec.workerGroups[1].name: duplicate group name \"cpu\" (also spec.workerGroups[0])"},
        Case{"BatchBelowWorld", [](JobSpec& s) { s.global_batch_size = 1; },
             "spec.globalBatchSize: must be at least the number of workers (2), got 1"},
        Case{"SomeGroupsSetBatch",
             [](JobSpec& s) {
               s.worker_groups = {Group("a", 1, 32), Group("b", 1)};
             },
             "spec.workerGroups[1].batchSize: required because spec.workerGroups[0] sets it"},
        Case{"BatchSumMismatch",
             [](JobSpec& s) {
               s.worker_groups = {Group("a", 2, 8), Group("b", 2, 16)};
             },
             "spec.globalBatchSize: must equal the sum of replicas x batchSize over the worker "
             "groups (48), got 64"},
        Case{"NegativeGroupBatch", [](JobSpec& s) { s.worker_groups[0].batch_size = -1; },
             "spec.workerGroups[0].batchSize: must be >= 0"},
        // rebalance
        Case{"Hysteresis", [](JobSpec& s) { s.rebalance.hysteresis = 1; },
             "spec.rebalance.hysteresis: must be in [0, 1), got 1"},
        Case{"RebalanceInterval", [](JobSpec& s) { s.rebalance.interval_seconds = 0; },
             "spec.rebalance.intervalSeconds: must be > 0"},
        Case{"MinBatchZero", [](JobSpec& s) { s.rebalance.min_batch = 0; },
             "spec.rebalance.minBatch: must be >= 1"},
        Case{"MaxBelowMin",
             [](JobSpec& s) {
               s.rebalance.min_batch = 8;
               s.rebalance.max_batch = 4;
             },
             "spec.rebalance.maxBatch: must be >= spec.rebalance.minBatch (8) or 0, got 4"},
        Case{"MinBatchInfeasible",
             [](JobSpec& s) {
               s.rebalance.enabled = true;
               s.rebalance.min_batch = 40;
             },
             "spec.rebalance.minBatch: minBatch x workers (40 x 2) exceeds spec.globalBatchSize "
             "(64)"},
        Case{"MaxBatchInfeasible",
             [](JobSpec& s) {
               s.rebalance.enabled = true;
               s.rebalance.max_batch = 16;
             },
             "spec.rebalance.maxBatch: maxBatch x workers (16 x 2) is below spec.globalBatchSize "
             "(64)"},
        // elastic (ValidSpec has one group of 2 workers and a global batch of 64)
        Case{"ElasticTwoGroups",
             [](JobSpec& s) {
               s.elastic.enabled = true;
               s.worker_groups = {Group("a", 1), Group("b", 1)};
             },
             "spec.elastic: an elastic job has one worker group"},
        Case{"ElasticTrainer",
             [](JobSpec& s) {
               s.elastic.enabled = true;
               s.model.name = "";
               s.trainer.command = {"./train"};
             },
             "spec.elastic: not supported with spec.trainer (the user's own program) yet"},
        Case{"ElasticGang",
             [](JobSpec& s) {
               s.elastic.enabled = true;
               s.gang_scheduling.enabled = true;
             },
             "spec.elastic: not supported with spec.gangScheduling"},
        Case{"ElasticGroupBatch",
             [](JobSpec& s) {
               s.elastic.enabled = true;
               s.worker_groups = {Group("cpu", 2, 32)};
             },
             "spec.workerGroups[0].batchSize: cannot be set with spec.elastic"},
        Case{"ElasticMinZero",
             [](JobSpec& s) {
               s.elastic.enabled = true;
               s.elastic.min_replicas = 0;
             },
             "spec.elastic.minReplicas: must be between 1 and the workers' replicas (2), got 0"},
        Case{"ElasticMinAboveReplicas",
             [](JobSpec& s) {
               s.elastic.enabled = true;
               s.elastic.min_replicas = 3;
               s.elastic.max_replicas = 4;
             },
             "spec.elastic.minReplicas: must be between 1 and the workers' replicas (2), got 3"},
        Case{"ElasticMaxBelowReplicas",
             [](JobSpec& s) {
               s.elastic.enabled = true;
               s.elastic.max_replicas = 1;
             },
             "spec.elastic.maxReplicas: must be at least the workers' replicas (2), got 1"},
        Case{"ElasticJoinTimeoutZero",
             [](JobSpec& s) {
               s.elastic.enabled = true;
               s.elastic.join_timeout_seconds = 0;
             },
             "spec.elastic.joinTimeoutSeconds: must be >= 1, got 0"},
        Case{"ElasticMaxAboveBatch",
             [](JobSpec& s) {
               s.elastic.enabled = true;
               s.elastic.max_replicas = 65;
             },
             "spec.elastic.maxReplicas: 65 members cannot share spec.globalBatchSize (64)"},
        Case{"ElasticMinBatchInfeasible",
             [](JobSpec& s) {
               s.elastic.enabled = true;
               s.elastic.max_replicas = 4;
               s.rebalance.enabled = true;
               s.rebalance.min_batch = 20;
             },
             "spec.rebalance.minBatch: minBatch x spec.elastic.maxReplicas (20 x 4) exceeds "
             "spec.globalBatchSize (64)"},
        Case{"ElasticMaxBatchInfeasible",
             [](JobSpec& s) {
               s.elastic.enabled = true;
               s.elastic.min_replicas = 1;
               s.rebalance.enabled = true;
               s.rebalance.max_batch = 40;
             },
             "spec.rebalance.maxBatch: maxBatch x spec.elastic.minReplicas (40 x 1) is below "
             "spec.globalBatchSize (64)"},
        // testing
        Case{"SlowdownLength",
             [](JobSpec& s) {
               s.testing.slowdown = {1, 2, 3};
             },
             "spec.testing.slowdown: must have one factor per worker (2), got 3"},
        Case{"SlowdownBelowOne",
             [](JobSpec& s) {
               s.testing.slowdown = {1, 0.5};
             },
             "spec.testing.slowdown[1]: must be >= 1, got 0.5"},
        Case{"SlowdownWindowZero", [](JobSpec& s) { s.testing.slowdown_window = 0; },
             "spec.testing.slowdownWindow: must be between 1 and 1000 steps, got 0"}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// ValidSpec() with strategy `type` and a valid value for each of its parameters.
JobSpec WithOwnParameters(const std::string& type) {
  JobSpec spec = ValidSpec();
  spec.strategy.type = type;
  for (const std::string& key : StrategyParameters(type)) {
    if (key == "bits") spec.strategy.Set("bits", "dynamic");
    if (key == "bucketSize") spec.strategy.Set("bucketSize", 512);
    if (key == "density") spec.strategy.Set("density", 0.01);
    if (key == "probeSteps") spec.strategy.Set("probeSteps", 10);
    if (key == "compressAbove") spec.strategy.Set("compressAbove", 0.5);
    if (key == "compressor") spec.strategy.Set("compressor", "quantized");
    if (key == "errorFeedback") spec.strategy.Set("errorFeedback", true);
    if (key == "interval") spec.strategy.Set("interval", 4);
    if (key == "warmupEpochs") spec.strategy.Set("warmupEpochs", 1);
    if (key == "threshold") spec.strategy.Set("threshold", 0.5);
    if (key == "pushRatio") spec.strategy.Set("pushRatio", 0.25);
    if (key == "clipNorm") spec.strategy.Set("clipNorm", 5);
    if (key == "momentumMasking") spec.strategy.Set("momentumMasking", false);
    if (key == "sparseEncoding") spec.strategy.Set("sparseEncoding", "compact");
    if (key == "staleness") spec.strategy.Set("staleness", 0);
    if (key == "warmupSteps") spec.strategy.Set("warmupSteps", 200);
    if (key == "hMin") {  // bounds an adaptive interval only
      spec.strategy.Set("interval", "adaptive");
      spec.strategy.Set("hMin", 2);
    }
    if (key == "hMax") spec.strategy.Set("hMax", 16);
    if (key == "mu") spec.strategy.Set("mu", 0.01);
    if (key == "pushRatio") spec.strategy.Set("pushRatio", 0.2);
    if (key == "history") spec.strategy.Set("history", 4);
    if (key == "mode") spec.strategy.Set("mode", "B");
    if (key == "predictor") spec.strategy.Set("predictor", "zero");
    if (key == "calibration") spec.strategy.Set("calibration", true);
    if (key == "damping") spec.strategy.Set("damping", 0.5);
    if (key == "pullBits") spec.strategy.Set("pullBits", 16);
    if (key == "delay") spec.strategy.Set("delay", 1);
    if (key == "compression") {
      spec.strategy.Set("compression.type", "quantized");
      spec.strategy.Set("compression.bits", 4);
    }
  }
  return spec;
}

TEST(ValidateJobTest, EveryStrategyAcceptsItsOwnParameters) {
  for (const std::string& type : StrategyTypes()) {
    JobSpec spec = WithOwnParameters(type);
    EXPECT_TRUE(ValidateJob(spec).ok()) << type << ": " << ValidateJob(spec);
  }
}

TEST(ValidateJobTest, StrategyTable) {
  EXPECT_EQ(StrategyTypes().size(), 13u);
  EXPECT_EQ(StrategyTypes().front(), "ssgd");
  EXPECT_THAT(StrategyParameters("ssgd"), IsEmpty());
  EXPECT_THAT(StrategyParameters("ps"), IsEmpty());
  EXPECT_THAT(StrategyParameters("quantized"),
              ElementsAre("bits", "bucketSize", "errorFeedback", "denseFallback", "probeSteps",
                          "compressAbove"));
  EXPECT_THAT(StrategyParameters("auto"),
              ElementsAre("compressor", "probeSteps", "compressAbove", "bucketSize",
                          "errorFeedback"));
  EXPECT_THAT(StrategyParameters("gossip"),
              ElementsAre("threshold", "maxInterval", "minInterval", "period", "variant",
                          "lockstep", "calibrate", "targetInterval", "calibrationSteps"));
  EXPECT_THAT(StrategyParameters("hps"), ElementsAre("bits", "staleness"));
  EXPECT_THAT(StrategyParameters("localsgd"), ElementsAre("interval"));
  EXPECT_THAT(StrategyParameters("hierarchical"),
              ElementsAre("interval", "averageOptimizerState", "warmupSteps"));
  EXPECT_THAT(StrategyParameters("multistep"),
              ElementsAre("interval", "warmupEpochs", "hMin", "hMax", "mu", "update", "delay",
                          "compression"));
  EXPECT_THAT(StrategyParameters("nope"), IsEmpty());
}

TEST(ValidateJobTest, HpsBitsAndStaleness) {
  JobSpec spec = ValidSpec();
  spec.strategy.type = "hps";
  for (const char* bits : {"2", "4", "8", "16", "32", "dynamic"}) {
    spec.strategy.Set("bits", bits);
    EXPECT_TRUE(ValidateJob(spec).ok()) << bits << ": " << ValidateJob(spec);
  }
  for (int staleness : {0, 1}) {
    spec.strategy.Set("staleness", staleness);
    EXPECT_TRUE(ValidateJob(spec).ok()) << staleness << ": " << ValidateJob(spec);
  }
  // 1 bit stays valid for the quantized strategy.
  spec = ValidSpec();
  spec.strategy.type = "quantized";
  spec.strategy.Set("bits", "1");
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);
}

TEST(ValidateJobTest, PsShardsWithParameterServerStrategies) {
  for (const char* type : {"ps", "hps", "mp2"}) {
    JobSpec spec = ValidSpec();
    spec.strategy.type = type;
    if (spec.strategy.type == "mp2") spec.strategy.Set("predictor", "zero");
    for (int shards : {1, 2, 64}) {
      spec.ps_shards = shards;
      EXPECT_TRUE(ValidateJob(spec).ok()) << type << " x" << shards << ": " << ValidateJob(spec);
      EXPECT_EQ(PsShardCount(spec), shards) << type;
    }
    EXPECT_TRUE(UsesParameterServer(type));
  }
  JobSpec spec = ValidSpec();
  EXPECT_TRUE(ValidateJob(spec).ok());  // shards 1 (the default) with any strategy
  EXPECT_EQ(PsShardCount(spec), 1);
  spec.ps_shards = 3;  // invalid, and never more than the coordinator alone
  EXPECT_EQ(PsShardCount(spec), 1);
  EXPECT_FALSE(UsesParameterServer("ssgd"));
  EXPECT_FALSE(UsesParameterServer("gossip"));
}

TEST(ValidateJobTest, MultistepDelayAndCompression) {
  JobSpec spec = ValidSpec();
  spec.strategy.type = "multistep";
  spec.strategy.Set("interval", 4);
  // {compression.type, compression.bits}; "" and 0: not set.
  struct Compression {
    std::string type;
    int bits;
  };
  for (int delay : {0, 1}) {
    spec.strategy.Set("delay", delay);
    for (const Compression& c : std::vector<Compression>{{"", 0},
                                                         {"none", 0},
                                                         {"fp16", 0},
                                                         {"quantized", 0},
                                                         {"quantized", 1},
                                                         {"quantized", 2},
                                                         {"quantized", 8}}) {
      spec.strategy.Clear("compression");
      if (!c.type.empty()) spec.strategy.Set("compression.type", c.type);
      if (c.bits != 0) spec.strategy.Set("compression.bits", c.bits);
      EXPECT_TRUE(ValidateJob(spec).ok())
          << "delay " << delay << " " << c.type << " " << c.bits << ": " << ValidateJob(spec);
    }
  }
  // An integer interval of 0 is an error only once written: unset, multistep is adaptive.
  spec.strategy.Clear("interval");
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);
}

TEST(ValidateJobTest, PrioritySchedulerWithSsgdAndMultistep) {
  JobSpec spec = ValidSpec();
  spec.scheduler.type = "priority";
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);  // ssgd, the defaults
  spec.scheduler.partition_elements = 1 << 20;
  spec.scheduler.credit_elements = 1 << 20;  // credit == partition: one chunk per launch
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);
  spec.scheduler.credit_elements = 0;  // the default credit (16 Mi) above the partition
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);
  spec.strategy.type = "multistep";
  spec.strategy.Set("compression.type", "none");  // no compression is no conflict
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);
  spec = ValidSpec();
  spec.scheduler.type = "none";
  spec.strategy.type = "quantized";  // no scheduler with any strategy
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);
}

TEST(ValidateJobTest, DevicesAndBackends) {
  JobSpec spec = ValidSpec();
  EXPECT_EQ(spec.device, "auto");
  EXPECT_EQ(spec.communicator.backend, "auto");
  EXPECT_FALSE(spec.deterministic);
  for (const char* device : {"cpu", "cuda", "auto"}) {
    for (const char* backend : {"auto", "gloo"}) {
      spec.device = device;
      spec.communicator.backend = backend;
      EXPECT_TRUE(ValidateJob(spec).ok()) << device << "/" << backend << ": " << ValidateJob(spec);
    }
  }
  // nccl with ssgd on cuda, or on auto (a worker without a GPU fails when it resolves).
  spec.communicator.backend = "nccl";
  for (const char* device : {"cuda", "auto"}) {
    spec.device = device;
    EXPECT_TRUE(ValidateJob(spec).ok()) << device << ": " << ValidateJob(spec);
  }
  // Every strategy may run on cuda through Gloo (host staging); deterministic is a free choice.
  for (const std::string& type : StrategyTypes()) {
    spec = WithOwnParameters(type);
    spec.device = "cuda";
    spec.deterministic = true;
    EXPECT_TRUE(ValidateJob(spec).ok()) << type << ": " << ValidateJob(spec);
  }
  // The priority scheduler stays allowed where the device may resolve to cpu.
  spec = ValidSpec();
  spec.scheduler.type = "priority";
  for (const char* device : {"cpu", "auto"}) {
    spec.device = device;
    EXPECT_TRUE(ValidateJob(spec).ok()) << device << ": " << ValidateJob(spec);
  }
}

TEST(ValidateJobTest, ElasticWithinItsBounds) {
  JobSpec spec = ValidSpec();
  spec.elastic.enabled = true;
  EXPECT_TRUE(ValidateJob(spec).ok());  // maxReplicas unset: the group's replicas
  spec.elastic.min_replicas = 2;
  spec.elastic.max_replicas = 2;
  EXPECT_TRUE(ValidateJob(spec).ok());  // min = replicas = max
  spec.elastic.min_replicas = 1;
  spec.elastic.max_replicas = 64;  // one sample each at the most members
  spec.rebalance.enabled = true;
  spec.rebalance.max_batch = 64;
  EXPECT_TRUE(ValidateJob(spec).ok());
  // Without spec.elastic, its fields are not looked at.
  spec.elastic = ElasticSpec{};
  spec.elastic.min_replicas = 0;
  spec.gang_scheduling.enabled = true;
  EXPECT_TRUE(ValidateJob(spec).ok());
}

TEST(ValidateJobTest, GroupBatchSizesThatAddUpPass) {
  JobSpec spec = ValidSpec();
  spec.worker_groups = {Group("t4", 2, 8), Group("a100", 2, 24)};
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);
}

TEST(ValidateJobTest, AdamAndSchedules) {
  JobSpec spec = ValidSpec();
  spec.optimizer.type = "adam";
  spec.optimizer.beta1 = 0.8;
  spec.optimizer.schedule.type = "cosine";
  spec.optimizer.schedule.min_lr = 1e-4;
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);
  spec.optimizer.schedule = ScheduleSpec();
  spec.optimizer.schedule.type = "step";
  spec.optimizer.schedule.step_size = 2;
  spec.optimizer.schedule.gamma = 0.5;
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);
}

TEST(ValidateJobTest, TorchScriptNeedsNoZooName) {
  JobSpec spec = ValidSpec();
  spec.model.name = "";
  spec.model.torchscript = "model.pt";
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);
}

// What only the built-in trainer needs does not fail a job that runs the user's program.
TEST(ValidateJobTest, TrainerNeedsNoModelNorDataset) {
  JobSpec spec = ValidSpec();
  spec.model = ModelSpec();
  spec.dataset = DatasetSpec();
  spec.trainer.command = {"python3", "train.py"};
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);
  spec.trainer.args = {"--lr", "0.1"};
  spec.trainer.working_dir = "/app";
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);
  // A synthetic data set smaller than the number of workers: the program splits it, not hptrain.
  spec.dataset.name = "synthetic";
  spec.dataset.format = "synthetic";
  spec.dataset.synthetic.samples = 1;
  EXPECT_TRUE(ValidateJob(spec).ok()) << ValidateJob(spec);
  spec.trainer = TrainerSpec();
  spec.model.name = "mlp";
  EXPECT_THAT(std::string(ValidateJob(spec).message()),
              StartsWith("spec.dataset.synthetic.samples: 1 samples"));
}

TEST(IsDnsLabelTest, Cases) {
  EXPECT_TRUE(IsDnsLabel("a"));
  EXPECT_TRUE(IsDnsLabel("fashion-mnist-lenet5"));
  EXPECT_TRUE(IsDnsLabel("0abc"));
  EXPECT_TRUE(IsDnsLabel(std::string(63, 'a')));
  EXPECT_FALSE(IsDnsLabel(""));
  EXPECT_FALSE(IsDnsLabel(std::string(64, 'a')));
  EXPECT_FALSE(IsDnsLabel("a-"));
  EXPECT_FALSE(IsDnsLabel("-a"));
  EXPECT_FALSE(IsDnsLabel("a.b"));
  EXPECT_FALSE(IsDnsLabel("aB"));
  EXPECT_FALSE(IsDnsLabel("a_b"));
}

}  // namespace
}  // namespace hptrain::job
