#include "runtime/job/job_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace hptrain::job {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

// A small valid job; most tests change it with overrides.
constexpr char kMinimal[] = R"(apiVersion: hptrain.io/v1alpha1
kind: TrainingJob
metadata:
  name: t
spec:
  model: {name: lenet5}
  dataset: {name: fashion-mnist}
  globalBatchSize: 64
  workerGroups:
    - name: cpu
      replicas: 2
)";

absl::StatusOr<JobSpec> Parse(const std::string& text,
                              const std::vector<std::string>& overrides = {}) {
  return ParseJobText(text, overrides, "job.yaml");
}

// The message of a parse that must fail with InvalidArgument on one line.
std::string ErrorOf(const std::string& text, const std::vector<std::string>& overrides = {}) {
  absl::StatusOr<JobSpec> spec = Parse(text, overrides);
  EXPECT_FALSE(spec.ok());
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << spec.status();
  std::string message(spec.status().message());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  return message;
}

// The message of kMinimal with `overrides` applied, which must fail.
std::string SetError(const std::vector<std::string>& overrides) {
  return ErrorOf(kMinimal, overrides);
}

TEST(JobParserTest, EveryExampleParsesAndValidates) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("examples")) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    absl::StatusOr<JobSpec> spec = ParseJobFile(entry.path().string());
    EXPECT_TRUE(spec.ok()) << entry.path() << ": " << spec.status();
  }
  EXPECT_GE(count, 4);
}

// A job that runs the user's program: no model, no data set.
constexpr char kTrainer[] = R"(apiVersion: hptrain.io/v1alpha1
kind: TrainingJob
metadata:
  name: t
spec:
  trainer:
    command: [python3, train.py]
    args: [--epochs, "1"]
    workingDir: src
  globalBatchSize: 64
  workers: {replicas: 2}
)";

TEST(JobParserTest, TrainerNeedsNoModelNorDataset) {
  absl::StatusOr<JobSpec> spec = Parse(kTrainer);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->trainer.command, ElementsAre("python3", "train.py"));
  EXPECT_THAT(spec->trainer.args, ElementsAre("--epochs", "1"));
  EXPECT_EQ(spec->trainer.working_dir, "src");
  EXPECT_TRUE(spec->trainer.set());
  EXPECT_TRUE(spec->model.name.empty());
  EXPECT_TRUE(spec->dataset.name.empty());
}

TEST(JobParserTest, WithoutTrainerTheBuiltinTrainerRuns) {
  absl::StatusOr<JobSpec> spec = Parse(kMinimal);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->trainer.set());
}

TEST(JobParserTest, TrainerMayNameADataSet) {
  absl::StatusOr<JobSpec> spec = Parse(kTrainer, {"spec.dataset.name=mnist"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->dataset.path, "/usr/share/datasets/mnist");  // the defaults still apply
  // ... and the data set is still checked.
  EXPECT_THAT(ErrorOf(kTrainer, {"spec.dataset.name=imagenet"}),
              StartsWith("job.yaml: spec.dataset.name: unknown dataset \"imagenet\""));
  EXPECT_THAT(ErrorOf(kTrainer, {"spec.dataset.path=/data"}),
              StartsWith("job.yaml: spec.dataset.name: required"));
}

TEST(JobParserTest, TrainerSkipsTheBuiltinTrainersDataChecks) {
  // One synthetic sample for two workers: the built-in trainer cannot split it, a program may
  // not even read it.
  absl::StatusOr<JobSpec> spec =
      Parse(kTrainer, {"spec.dataset.name=synthetic", "spec.dataset.synthetic.samples=1"});
  EXPECT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(SetError({"spec.dataset.name=synthetic", "spec.dataset.synthetic.samples=1"}),
              StartsWith("job.yaml: spec.dataset.synthetic.samples: 1 samples cannot be split"));
}

TEST(JobParserTest, TrainerErrorsNameTheFields) {
  std::string both = ErrorOf(kTrainer, {"spec.model.name=lenet5"});
  EXPECT_THAT(both, StartsWith("job.yaml: spec.model: cannot be combined with spec.trainer"));
  EXPECT_THAT(ErrorOf(kTrainer, {"spec.model.torchscript=m.pt"}),
              StartsWith("job.yaml: spec.model: cannot be combined with spec.trainer"));
  EXPECT_THAT(ErrorOf(kTrainer, {"spec.trainer.command=[]"}),
              StartsWith("job.yaml: spec.trainer.command: required"));
  EXPECT_THAT(ErrorOf(kTrainer, {"spec.trainer={args: [x]}"}),
              StartsWith("job.yaml: spec.trainer.command: required"));
  EXPECT_THAT(ErrorOf(kTrainer, {"spec.trainer.command=python3 train.py"}),
              StartsWith("job.yaml: spec.trainer.command: must be a list"));
  EXPECT_THAT(ErrorOf(kTrainer, {"spec.trainer.command=[[a]]"}),
              StartsWith("job.yaml: spec.trainer.command[0]: must be a string"));
  EXPECT_THAT(ErrorOf(kTrainer, {"spec.trainer.command=[\"\", x]"}),
              StartsWith("job.yaml: spec.trainer.command[0]: must not be empty"));
  EXPECT_THAT(ErrorOf(kTrainer, {"spec.trainer.env=[]"}),
              StartsWith("job.yaml: spec.trainer.env: unknown field"));
  // Without spec.trainer the built-in trainer's requirements hold as before.
  EXPECT_THAT(ErrorOf(kTrainer, {"spec.trainer=null"}),
              StartsWith("job.yaml: spec.model: set name"));
  EXPECT_THAT(ErrorOf(kTrainer, {"spec.trainer=null", "spec.model.name=lenet5"}),
              StartsWith("job.yaml: spec.dataset.name: required"));
}

TEST(JobParserTest, FashionMnistDemo) {
  absl::StatusOr<JobSpec> spec = ParseJobFile("examples/fashion-mnist.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "fashion-mnist-lenet5");
  EXPECT_EQ(spec->ns, "default");
  EXPECT_EQ(spec->model.name, "lenet5");
  EXPECT_EQ(spec->dataset.name, "fashion-mnist");
  EXPECT_EQ(spec->dataset.path, "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(spec->dataset.format, "idx");
  EXPECT_EQ(spec->strategy.type, "ssgd");
  EXPECT_EQ(spec->optimizer.type, "sgd");
  EXPECT_DOUBLE_EQ(spec->optimizer.lr, 0.05);
  EXPECT_DOUBLE_EQ(spec->optimizer.momentum, 0.9);
  EXPECT_DOUBLE_EQ(spec->optimizer.weight_decay, 5e-4);
  EXPECT_EQ(spec->global_batch_size, 128);
  EXPECT_EQ(spec->epochs, 5);
  EXPECT_EQ(spec->seed, 42u);
  ASSERT_EQ(spec->worker_groups.size(), 1u);
  EXPECT_EQ(spec->worker_groups[0].name, "cpu");
  EXPECT_EQ(spec->WorldSize(), 4);
  EXPECT_THAT(spec->InitialAllocation(), ElementsAre(32, 32, 32, 32));
  const std::string& pod = spec->worker_groups[0].template_yaml;
  EXPECT_THAT(pod, HasSubstr("name: worker"));
  EXPECT_THAT(pod, Not(HasSubstr("image:")));  // the chart's runtime.image applies
  EXPECT_THAT(pod, HasSubstr("cpu: \"1\""));  // quoted scalars stay strings
  EXPECT_THAT(pod, HasSubstr("memory: 2Gi"));
}

TEST(JobParserTest, HeterogeneousExample) {
  absl::StatusOr<JobSpec> spec = ParseJobFile("examples/heterogeneous-gpus.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ns, "training");
  EXPECT_EQ(spec->device, "cuda");
  EXPECT_EQ(spec->dataset.format, "cifar-binary");
  EXPECT_EQ(spec->dataset.path, "/data/cifar-10-batches-bin");
  EXPECT_TRUE(spec->rebalance.enabled);
  EXPECT_THAT(spec->RankGroups(), ElementsAre("a100", "a100", "t4", "t4"));
  EXPECT_THAT(spec->worker_groups[0].template_yaml, HasSubstr("nvidia.com/gpu: 1"));
  EXPECT_THAT(spec->worker_groups[1].template_yaml, HasSubstr("tolerations:"));
  EXPECT_THAT(spec->ps_template_yaml, HasSubstr("name: ps"));
}

TEST(JobParserTest, SyntheticExampleUsesWorkersShorthand) {
  absl::StatusOr<JobSpec> spec = ParseJobFile("examples/synthetic-mlp.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->worker_groups.size(), 1u);
  EXPECT_EQ(spec->worker_groups[0].name, "worker");
  EXPECT_EQ(spec->worker_groups[0].replicas, 2);
  EXPECT_EQ(spec->dataset.format, "synthetic");
  EXPECT_EQ(spec->dataset.path, "");
  EXPECT_EQ(spec->dataset.synthetic.samples, 2048);
  EXPECT_THAT(spec->model.hidden, ElementsAre(64));
}

TEST(JobParserTest, TorchScriptExample) {
  absl::StatusOr<JobSpec> spec = ParseJobFile("examples/torchscript.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model.name, "");
  EXPECT_EQ(spec->model.torchscript, "/models/lenet5.pt");  // absolute, as a pod needs
  EXPECT_EQ(spec->strategy.type, "topk");
  ASSERT_TRUE(spec->strategy.Has("errorFeedback"));
  EXPECT_TRUE(spec->strategy.Bool("errorFeedback"));
}

TEST(JobParserTest, DefaultsOfAMinimalJob) {
  absl::StatusOr<JobSpec> spec = Parse(kMinimal);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->strategy.type, "ssgd");
  EXPECT_FALSE(spec->strategy.Has("errorFeedback"));
  EXPECT_EQ(spec->epochs, 1);
  // auto: cuda where a worker sees a GPU, else cpu (ResolveDevice); nothing is resolved here.
  EXPECT_EQ(spec->device, "auto");
  EXPECT_EQ(spec->communicator.backend, "auto");
  EXPECT_FALSE(spec->deterministic);
  EXPECT_EQ(spec->worker_groups[0].template_yaml, "");
}

TEST(JobParserTest, ElasticFieldsAndDefaults) {
  absl::StatusOr<JobSpec> spec = Parse(kMinimal);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->elastic.enabled);
  EXPECT_EQ(spec->Slots(), 2);

  // Present, even empty: on, with minReplicas 1, maxReplicas the group's replicas, 300 s.
  spec = Parse(kMinimal, {"spec.elastic={}"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->elastic.enabled);
  EXPECT_EQ(spec->elastic.min_replicas, 1);
  EXPECT_EQ(spec->elastic.max_replicas, 2);
  EXPECT_EQ(spec->elastic.join_timeout_seconds, 300);

  spec = Parse(kMinimal, {"spec.elastic.minReplicas=2", "spec.elastic.maxReplicas=6",
                          "spec.elastic.joinTimeoutSeconds=45"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->elastic.enabled);
  EXPECT_EQ(spec->elastic.min_replicas, 2);
  EXPECT_EQ(spec->elastic.max_replicas, 6);
  EXPECT_EQ(spec->elastic.join_timeout_seconds, 45);
  EXPECT_EQ(spec->Slots(), 6);
  EXPECT_THAT(spec->SlotGroups(), ElementsAre("cpu", "cpu", "cpu", "cpu", "cpu", "cpu"));

  // The default follows the replicas the job is written (or scaled) with.
  spec = Parse(kMinimal, {"spec.elastic.minReplicas=2", "spec.workerGroups.0.replicas=5"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->elastic.max_replicas, 5);
}

TEST(JobParserTest, ElasticErrorsNameTheFields) {
  EXPECT_THAT(SetError({"spec.elastic.minReplica=2"}),
              HasSubstr("spec.elastic.minReplica: unknown field (expected one of minReplicas, "
                        "maxReplicas, joinTimeoutSeconds)"));
  EXPECT_THAT(SetError({"spec.elastic=4"}), HasSubstr("spec.elastic: must be a map"));
  EXPECT_THAT(SetError({"spec.elastic.maxReplicas=0"}),
              HasSubstr("spec.elastic.maxReplicas: must be >= 1, got 0"));
  EXPECT_THAT(SetError({"spec.elastic.maxReplicas=1"}),
              HasSubstr("spec.elastic.maxReplicas: must be at least the workers' replicas (2), "
                        "got 1"));
  EXPECT_THAT(SetError({"spec.elastic.minReplicas=3"}),
              HasSubstr("spec.elastic.minReplicas: must be between 1 and the workers' replicas "
                        "(2), got 3"));
  EXPECT_THAT(SetError({"spec.elastic.joinTimeoutSeconds=0"}),
              HasSubstr("spec.elastic.joinTimeoutSeconds: must be >= 1, got 0"));
  EXPECT_THAT(SetError({"spec.elastic={}", "spec.workerGroups.1.name=gpu"}),
              HasSubstr("spec.elastic: an elastic job has one worker group"));
}

TEST(JobParserTest, DeviceBackendAndDeterministic) {
  absl::StatusOr<JobSpec> spec =
      Parse(std::string(kMinimal) +
            "  device: cuda\n  deterministic: true\n  communicator: {backend: nccl}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->device, "cuda");
  EXPECT_TRUE(spec->deterministic);
  EXPECT_EQ(spec->communicator.backend, "nccl");
  spec = Parse(kMinimal, {"spec.device=cpu", "spec.communicator.backend=gloo",
                          "spec.deterministic=false"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->device, "cpu");
  EXPECT_EQ(spec->communicator.backend, "gloo");
  EXPECT_FALSE(spec->deterministic);
  EXPECT_FALSE(spec->testing.device_path);
  spec = Parse(kMinimal, {"spec.testing.devicePath=true"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->testing.device_path);
  EXPECT_TRUE(Parse(kMinimal)->testing.cudnn);
  EXPECT_FALSE(Parse(kMinimal, {"spec.testing.cudnn=false"})->testing.cudnn);
  EXPECT_EQ(SetError({"spec.testing.devicePath=1.5"}),
            "job.yaml: spec.testing.devicePath: must be true or false, got \"1.5\"");
}

TEST(JobParserTest, LossScalingTestingKnobs) {
  absl::StatusOr<JobSpec> spec = Parse(kMinimal);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->testing.loss_scaling);
  EXPECT_EQ(spec->testing.inf_gradient_step, -1);
  EXPECT_EQ(spec->testing.inf_gradient_rank, 0);
  spec = Parse(kMinimal, {"spec.testing.lossScaling=true", "spec.testing.infGradientStep=3",
                          "spec.testing.infGradientRank=1"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->testing.loss_scaling);
  EXPECT_EQ(spec->testing.inf_gradient_step, 3);
  EXPECT_EQ(spec->testing.inf_gradient_rank, 1);
  EXPECT_THAT(SetError({"spec.testing.infGradientStep=3"}),
              StartsWith("job.yaml: spec.testing.infGradientStep: needs loss scaling"));
  EXPECT_THAT(SetError({"spec.testing.lossScaling=true", "spec.testing.infGradientRank=9"}),
              StartsWith("job.yaml: spec.testing.infGradientRank: must be a worker rank"));
  // The priority scheduler starts the exchange during backward, before the inf/nan check.
  EXPECT_THAT(SetError({"spec.testing.lossScaling=true", "spec.scheduler.type=priority"}),
              StartsWith("job.yaml: spec.scheduler.type: priority cannot be used with loss "
                         "scaling"));
  EXPECT_THAT(SetError({"spec.precision=fp16", "spec.scheduler.type=priority"}),
              StartsWith("job.yaml: spec.scheduler.type: priority cannot be used with loss "
                         "scaling"));
}

TEST(JobParserTest, DeviceBackendAndDeterministicErrors) {
  EXPECT_EQ(SetError({"spec.device=tpu"}),
            "job.yaml: spec.device: unknown device \"tpu\" (expected one of cpu, cuda, auto)");
  EXPECT_EQ(SetError({"spec.device=[cuda]"}),
            "job.yaml: spec.device: must be a string, got a list");
  EXPECT_EQ(SetError({"spec.communicator.backend=mpi"}),
            "job.yaml: spec.communicator.backend: unknown backend \"mpi\" (expected one of auto, "
            "gloo, nccl)");
  EXPECT_EQ(SetError({"spec.communicator.backend={a: 1}"}),
            "job.yaml: spec.communicator.backend: must be a string, got a map");
  EXPECT_EQ(SetError({"spec.deterministic=maybe"}),
            "job.yaml: spec.deterministic: must be true or false, got \"maybe\"");
  EXPECT_EQ(SetError({"spec.deterministic=\"true\""}),
            "job.yaml: spec.deterministic: must be true or false, got the quoted string \"true\"");
  EXPECT_THAT(SetError({"spec.communicator.backnd=nccl"}),
              StartsWith("job.yaml: spec.communicator.backnd: unknown field (expected one of "));
  EXPECT_THAT(SetError({"spec.communicator.backnd=nccl"}), HasSubstr("backend"));
  EXPECT_EQ(SetError({"spec.device=cpu", "spec.communicator.backend=nccl"}),
            "job.yaml: spec.communicator.backend: nccl needs the workers on cuda, got spec.device: "
            "cpu");
  EXPECT_THAT(SetError({"spec.device=cuda", "spec.scheduler.type=priority"}),
              StartsWith("job.yaml: spec.scheduler.type: priority is not supported on cuda yet"));
}

TEST(JobParserTest, MlpGetsDefaultHiddenWidths) {
  absl::StatusOr<JobSpec> spec = Parse(kMinimal, {"spec.model.name=mlp"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->model.hidden, ElementsAre(256, 128));
}

TEST(JobParserTest, MnistDefaultPath) {
  absl::StatusOr<JobSpec> spec = Parse(kMinimal, {"spec.dataset.name=mnist"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->dataset.path, "/usr/share/datasets/mnist");
  EXPECT_EQ(spec->dataset.format, "idx");
}

TEST(JobParserTest, DgcClippingAndWarmup) {
  absl::StatusOr<JobSpec> spec =
      Parse(kMinimal, {"spec.strategy.type=dgc", "spec.strategy.density=0.01",
                       "spec.strategy.warmupEpochs=0.5", "spec.strategy.clipNorm=5"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_DOUBLE_EQ(spec->strategy.Number("density"), 0.01);
  EXPECT_DOUBLE_EQ(spec->strategy.Number("warmupEpochs"), 0.5);
  EXPECT_DOUBLE_EQ(spec->strategy.Number("clipNorm"), 5);
  EXPECT_EQ(SetError({"spec.strategy.type=dgc", "spec.strategy.clipNorm=x"}),
            "job.yaml: spec.strategy.clipNorm: must be a number, got \"x\"");
  EXPECT_THAT(SetError({"spec.strategy.type=topk", "spec.strategy.clipNorm=5"}),
              HasSubstr("spec.strategy.clipNorm: does not apply to strategy topk"));
  EXPECT_FALSE(spec->strategy.Has("momentumMasking"));  // unset: DGC's masking
  absl::StatusOr<JobSpec> unmasked =
      Parse(kMinimal, {"spec.strategy.type=dgc", "spec.strategy.momentumMasking=false"});
  ASSERT_TRUE(unmasked.ok()) << unmasked.status();
  ASSERT_TRUE(unmasked->strategy.Has("momentumMasking"));
  EXPECT_FALSE(unmasked->strategy.Bool("momentumMasking"));
  EXPECT_THAT(SetError({"spec.strategy.type=topk", "spec.strategy.momentumMasking=false"}),
              HasSubstr("spec.strategy.momentumMasking: does not apply to strategy topk"));
}

TEST(JobParserTest, MultistepIntervalIsAnIntegerOrAdaptive) {
  absl::StatusOr<JobSpec> adaptive =
      Parse(kMinimal, {"spec.strategy.type=multistep", "spec.strategy.interval=adaptive",
                       "spec.strategy.hMin=2", "spec.strategy.hMax=16", "spec.strategy.mu=0.01",
                       "spec.strategy.delay=0", "spec.strategy.warmupEpochs=1"});
  ASSERT_TRUE(adaptive.ok()) << adaptive.status();
  EXPECT_EQ(adaptive->strategy.String("interval"), "adaptive");
  EXPECT_EQ(adaptive->strategy.Int("interval"), 0);
  EXPECT_EQ(adaptive->strategy.Int("hMin"), 2);
  EXPECT_EQ(adaptive->strategy.Int("hMax"), 16);
  EXPECT_DOUBLE_EQ(adaptive->strategy.Number("mu"), 0.01);
  absl::StatusOr<JobSpec> fixed =
      Parse(kMinimal, {"spec.strategy.type=multistep", "spec.strategy.interval=4"});
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_NE(fixed->strategy.String("interval"), "adaptive");
  EXPECT_EQ(fixed->strategy.Int("interval"), 4);
  EXPECT_EQ(SetError({"spec.strategy.type=multistep", "spec.strategy.interval=often"}),
            "job.yaml: spec.strategy.interval: must be an integer, got \"often\"");
  EXPECT_THAT(SetError({"spec.strategy.type=localsgd", "spec.strategy.interval=adaptive"}),
              HasSubstr("spec.strategy.interval: adaptive applies only to strategy multistep"));
  EXPECT_THAT(SetError({"spec.strategy.type=multistep", "spec.strategy.hMin=9",
                        "spec.strategy.hMax=4"}),
              HasSubstr("spec.strategy.hMin: must be <= spec.strategy.hMax (4), got 9"));
  absl::StatusOr<JobSpec> delayed =
      Parse(kMinimal, {"spec.strategy.type=multistep", "spec.strategy.delay=1"});
  ASSERT_TRUE(delayed.ok()) << delayed.status();
  EXPECT_EQ(delayed->strategy.Int("delay"), 1);
  EXPECT_FALSE(delayed->strategy.Has("interval"));  // unset: adaptive
  EXPECT_TRUE(fixed->strategy.Has("interval"));
}

// A written 0 is not "unset": it used to mean adaptive (multistep) or 8 (localsgd) silently.
TEST(JobParserTest, MultistepRangesNameTheField) {
  EXPECT_EQ(SetError({"spec.strategy.type=multistep", "spec.strategy.interval=0"}),
            "job.yaml: spec.strategy.interval: must be >= 1, got 0");
  EXPECT_EQ(SetError({"spec.strategy.type=localsgd", "spec.strategy.interval=0"}),
            "job.yaml: spec.strategy.interval: must be >= 1, got 0");
  EXPECT_EQ(SetError({"spec.strategy.type=multistep", "spec.strategy.interval=-1"}),
            "job.yaml: spec.strategy.interval: must be >= 1, got -1");
  EXPECT_THAT(SetError({"spec.strategy.interval=0"}),
              StartsWith("job.yaml: spec.strategy.interval: does not apply to strategy ssgd"));
  EXPECT_EQ(SetError({"spec.strategy.type=multistep", "spec.strategy.hMin=8",
                      "spec.strategy.hMax=4"}),
            "job.yaml: spec.strategy.hMin: must be <= spec.strategy.hMax (4), got 8");
  EXPECT_EQ(SetError({"spec.strategy.type=multistep", "spec.strategy.mu=-0.5"}),
            "job.yaml: spec.strategy.mu: must be >= 0, got -0.5");
  EXPECT_EQ(SetError({"spec.strategy.type=multistep", "spec.strategy.delay=2"}),
            "job.yaml: spec.strategy.delay: must be 0 or 1, got 2");
  EXPECT_EQ(SetError({"spec.strategy.type=multistep", "spec.strategy.delay=-1"}),
            "job.yaml: spec.strategy.delay: must be 0 or 1, got -1");
}

TEST(JobParserTest, MultistepCompression) {
  absl::StatusOr<JobSpec> spec = Parse(kMinimal, {"spec.strategy.type=multistep"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->strategy.Has("compression.type"));  // unset: none
  EXPECT_FALSE(spec->strategy.Has("compression.bits"));
  spec = Parse(std::string(kMinimal) +
               "  strategy:\n"
               "    type: multistep\n"
               "    interval: 4\n"
               "    delay: 1\n"
               "    compression: {type: quantized, bits: 4}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->strategy.String("compression.type"), "quantized");
  EXPECT_EQ(spec->strategy.Int("compression.bits"), 4);
  EXPECT_EQ(spec->strategy.Int("delay"), 1);
  spec = Parse(kMinimal, {"spec.strategy.type=multistep", "spec.strategy.compression.type=fp16"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->strategy.String("compression.type"), "fp16");

  EXPECT_EQ(SetError({"spec.strategy.type=multistep", "spec.strategy.compression.level=3"}),
            "job.yaml: spec.strategy.compression.level: unknown field (expected one of type, "
            "bits)");
  EXPECT_EQ(SetError({"spec.strategy.type=multistep", "spec.strategy.compression=quantized"}),
            "job.yaml: spec.strategy.compression: must be a map, got \"quantized\"");
  EXPECT_EQ(SetError({"spec.strategy.type=multistep", "spec.strategy.compression.type=quantized",
                      "spec.strategy.compression.bits=dynamic"}),
            "job.yaml: spec.strategy.compression.bits: must be an integer, got \"dynamic\"");
  EXPECT_EQ(SetError({"spec.strategy.type=multistep", "spec.strategy.compression.type=quantized",
                      "spec.strategy.compression.bits=16"}),
            "job.yaml: spec.strategy.compression.bits: must be 1, 2, 4 or 8, got 16");
  EXPECT_EQ(SetError({"spec.strategy.type=multistep", "spec.strategy.compression.type=topk"}),
            "job.yaml: spec.strategy.compression.type: unknown compression \"topk\" (expected "
            "one of none, quantized, fp16)");
  EXPECT_EQ(SetError({"spec.strategy.type=localsgd", "spec.strategy.compression.type=fp16"}),
            "job.yaml: spec.strategy.compression: does not apply to strategy localsgd (localsgd "
            "takes interval)");
}

TEST(JobParserTest, ExchangeScheduler) {
  absl::StatusOr<JobSpec> spec = Parse(kMinimal);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->scheduler.type, "none");
  EXPECT_EQ(spec->scheduler.partition_elements, 0);  // unset: kSchedulerPartitionElements
  EXPECT_EQ(spec->scheduler.credit_elements, 0);
  spec = Parse(std::string(kMinimal) +
               "  strategy: {type: multistep, interval: 4}\n"
               "  scheduler: {type: priority, partitionElements: 1048576, "
               "creditElements: 4194304}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->scheduler.type, "priority");
  EXPECT_EQ(spec->scheduler.partition_elements, 1048576);
  EXPECT_EQ(spec->scheduler.credit_elements, 4194304);
  spec = Parse(kMinimal, {"spec.scheduler.type=priority"});  // ssgd, default sizes
  ASSERT_TRUE(spec.ok()) << spec.status();

  EXPECT_EQ(SetError({"spec.scheduler.order=fifo"}),
            "job.yaml: spec.scheduler.order: unknown field (expected one of type, "
            "partitionElements, creditElements)");
  EXPECT_EQ(SetError({"spec.scheduler=priority"}),
            "job.yaml: spec.scheduler: must be a map, got \"priority\"");
  EXPECT_EQ(SetError({"spec.scheduler.type=bytescheduler"}),
            "job.yaml: spec.scheduler.type: unknown scheduler \"bytescheduler\" (expected one of "
            "none, priority)");
  EXPECT_EQ(SetError({"spec.scheduler.type=priority", "spec.scheduler.partitionElements=0"}),
            "job.yaml: spec.scheduler.partitionElements: must be >= 1, got 0");
  EXPECT_EQ(SetError({"spec.scheduler.type=priority", "spec.scheduler.creditElements=-4"}),
            "job.yaml: spec.scheduler.creditElements: must be >= 1, got -4");
  EXPECT_EQ(SetError({"spec.scheduler.type=priority", "spec.scheduler.creditElements=1.5"}),
            "job.yaml: spec.scheduler.creditElements: must be an integer, got \"1.5\"");
  EXPECT_EQ(SetError({"spec.scheduler.partitionElements=1024"}),
            "job.yaml: spec.scheduler.partitionElements: applies only to spec.scheduler.type "
            "priority, got none");
  EXPECT_EQ(SetError({"spec.scheduler.type=priority", "spec.scheduler.partitionElements=2048",
                      "spec.scheduler.creditElements=1024"}),
            "job.yaml: spec.scheduler.creditElements: must be >= "
            "spec.scheduler.partitionElements (2048), got 1024");
  EXPECT_EQ(SetError({"spec.scheduler.type=priority", "spec.strategy.type=topk"}),
            "job.yaml: spec.scheduler.type: priority applies only to strategies ssgd and "
            "multistep, got strategy topk");
  EXPECT_THAT(SetError({"spec.scheduler.type=priority", "spec.strategy.type=multistep",
                        "spec.strategy.delay=1"}),
              HasSubstr("spec.scheduler.type: priority cannot be combined with "
                        "spec.strategy.delay 1"));
  EXPECT_THAT(SetError({"spec.scheduler.type=priority", "spec.strategy.type=multistep",
                        "spec.strategy.compression.type=fp16"}),
              HasSubstr("spec.scheduler.type: priority cannot be combined with "
                        "spec.strategy.compression"));
  // spec.schedulerName (the pods' Kubernetes scheduler) is another field.
  spec = Parse(kMinimal, {"spec.schedulerName=volcano", "spec.scheduler.type=none"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->scheduler_name, "volcano");
}

// Regression: density 0 read as "unset", so it passed validation and every worker then failed at
// start. A value that is set is checked against the descriptor's range.
TEST(JobParserTest, TopkDensityZeroFailsValidation) {
  EXPECT_EQ(SetError({"spec.strategy.type=topk", "spec.strategy.density=0"}),
            "job.yaml: spec.strategy.density: must be in (0, 1], got 0");
  EXPECT_EQ(SetError({"spec.strategy.type=dgc", "spec.strategy.density=0"}),
            "job.yaml: spec.strategy.density: must be in (0, 1], got 0");
}

TEST(JobParserTest, SparseEncoding) {
  for (const std::string type : {"topk", "dgc"}) {
    absl::StatusOr<JobSpec> spec = Parse(kMinimal, {"spec.strategy.type=" + type});
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_FALSE(spec->strategy.Has("sparseEncoding"));  // unset: pairs
    absl::StatusOr<JobSpec> compact =
        Parse(kMinimal, {"spec.strategy.type=" + type, "spec.strategy.sparseEncoding=compact"});
    ASSERT_TRUE(compact.ok()) << compact.status();
    EXPECT_EQ(compact->strategy.String("sparseEncoding"), "compact");
  }
  EXPECT_THAT(SetError({"spec.strategy.type=topk", "spec.strategy.sparseEncoding=fp16"}),
              HasSubstr("spec.strategy.sparseEncoding: unknown sparse encoding \"fp16\""));
  EXPECT_THAT(SetError({"spec.strategy.type=fp16", "spec.strategy.sparseEncoding=compact"}),
              HasSubstr("spec.strategy.sparseEncoding: does not apply to strategy fp16"));
}

TEST(JobParserTest, PsShardsAndStaleness) {
  absl::StatusOr<JobSpec> spec = Parse(kMinimal);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ps_shards, 1);
  EXPECT_FALSE(spec->strategy.Has("staleness"));  // unset: 1

  spec =
      Parse(kMinimal, {"spec.strategy.type=hps", "spec.strategy.staleness=0", "spec.ps.shards=4"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ps_shards, 4);
  EXPECT_EQ(spec->strategy.Int("staleness"), 0);

  EXPECT_EQ(SetError({"spec.ps.shards=two"}),
            "job.yaml: spec.ps.shards: must be an integer, got \"two\"");
  EXPECT_EQ(SetError({"spec.strategy.type=hps", "spec.strategy.staleness=0.5"}),
            "job.yaml: spec.strategy.staleness: must be an integer, got \"0.5\"");
  EXPECT_EQ(
      SetError({"spec.ps.shards=2"}),
      "job.yaml: spec.ps.shards: 2 needs a parameter-server strategy (ps, hps, mp2), not ssgd");
  EXPECT_EQ(SetError({"spec.strategy.type=hps", "spec.strategy.staleness=3"}),
            "job.yaml: spec.strategy.staleness: must be 0 or 1, got 3");
  EXPECT_THAT(SetError({"spec.strategy.type=mp2", "spec.strategy.staleness=1"}),
              HasSubstr("spec.strategy.staleness: does not apply to strategy mp2"));
  EXPECT_THAT(SetError({"spec.ps.replicas=2"}),
              StartsWith("job.yaml: spec.ps.replicas: unknown field (expected one of shards, "
                         "template)"));
}

TEST(JobParserTest, AllFieldsRoundTrip) {
  absl::StatusOr<JobSpec> spec = Parse(R"(apiVersion: hptrain.io/v1alpha1
kind: TrainingJob
metadata: {name: full, namespace: ns1, labels: {team: x}, annotations: {a: b}, generateName: f-}
spec:
  model: {name: mlp, hidden: [32, 16]}
  dataset:
    name: synthetic
    normalize: false
    synthetic: {samples: 100, testSamples: 10, shape: [3, 8, 8], classes: 4}
  strategy: {type: quantized, bits: 4, bucketSize: 512, errorFeedback: false}
  optimizer:
    type: adam
    lr: 0.001
    weightDecay: 0.01
    betas: [0.8, 0.99]
    eps: 1.0e-6
    schedule: {type: step, warmupEpochs: 1, stepSize: 3, gamma: 0.5}
  globalBatchSize: 20
  epochs: 3
  maxSteps: 100
  evalEverySteps: 25
  seed: 18446744073709551615
  device: cpu
  threads: 2
  bucketMiB: 4
  workerGroups:
    - {name: a, replicas: 1, batchSize: 8}
    - {name: b, replicas: 2, batchSize: 6}
  rebalance: {enabled: true, intervalSeconds: 5, intervalSteps: 10, minBatch: 2, maxBatch: 12, hysteresis: 0.1}
  checkpoint: {path: /tmp/ckpt.pt, intervalSteps: 50}
  runPolicy: {backoffLimit: 1, activeDeadlineSeconds: 600, ttlSecondsAfterFinished: 60, suspend: true}
  testing: {slowdown: [1, 2.5, 1]}
status: {phase: Running}
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ns, "ns1");
  EXPECT_THAT(spec->model.hidden, ElementsAre(32, 16));
  EXPECT_FALSE(spec->dataset.normalize);
  EXPECT_THAT(spec->dataset.synthetic.shape, ElementsAre(3, 8, 8));
  EXPECT_EQ(spec->dataset.synthetic.classes, 4);
  EXPECT_EQ(spec->dataset.synthetic.test_samples, 10);
  EXPECT_EQ(spec->strategy.String("bits"), "4");
  EXPECT_EQ(spec->strategy.Int("bucketSize"), 512);
  ASSERT_TRUE(spec->strategy.Has("errorFeedback"));
  EXPECT_FALSE(spec->strategy.Bool("errorFeedback"));
  EXPECT_DOUBLE_EQ(spec->optimizer.beta1, 0.8);
  EXPECT_DOUBLE_EQ(spec->optimizer.beta2, 0.99);
  EXPECT_DOUBLE_EQ(spec->optimizer.eps, 1e-6);
  EXPECT_EQ(spec->optimizer.schedule.type, "step");
  EXPECT_EQ(spec->optimizer.schedule.step_size, 3);
  EXPECT_DOUBLE_EQ(spec->optimizer.schedule.gamma, 0.5);
  EXPECT_EQ(spec->max_steps, 100);
  EXPECT_EQ(spec->eval_every_steps, 25);
  EXPECT_EQ(spec->seed, 18446744073709551615ull);
  EXPECT_EQ(spec->threads, 2);
  EXPECT_EQ(spec->bucket_mib, 4);
  EXPECT_THAT(spec->InitialAllocation(), ElementsAre(8, 6, 6));
  EXPECT_EQ(spec->rebalance.interval_steps, 10);
  EXPECT_EQ(spec->rebalance.max_batch, 12);
  EXPECT_EQ(spec->checkpoint.interval_steps, 50);
  EXPECT_EQ(spec->run_policy.active_deadline_seconds, 600);
  EXPECT_TRUE(spec->run_policy.suspend);
  EXPECT_THAT(spec->testing.slowdown, ElementsAre(1.0, 2.5, 1.0));
}

TEST(JobParserTest, NullValueMeansUnset) {
  absl::StatusOr<JobSpec> spec = Parse(std::string(kMinimal) + "  epochs:\n  strategy: ~\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->epochs, 1);
}

// --- errors ----------------------------------------------------------------------------------

TEST(JobParserTest, TypeErrorNamesThePath) {
  EXPECT_EQ(SetError({"spec.globalBatchSize=abc"}),
            "job.yaml: spec.globalBatchSize: must be an integer, got \"abc\"");
  EXPECT_EQ(SetError({"spec.epochs=1.5"}),
            "job.yaml: spec.epochs: must be an integer, got \"1.5\"");
  EXPECT_THAT(SetError({"spec.epochs=99999999999"}),
              HasSubstr("spec.epochs: integer out of range"));
  EXPECT_THAT(SetError({"spec.seed=-1"}), HasSubstr("spec.seed: must be a non-negative integer"));
  EXPECT_THAT(SetError({"spec.optimizer.lr=fast"}),
              HasSubstr("spec.optimizer.lr: must be a number"));
  EXPECT_THAT(SetError({"spec.optimizer.lr=nan"}),
              HasSubstr("spec.optimizer.lr: must be a finite number"));
  EXPECT_THAT(SetError({"spec.rebalance.enabled=maybe"}),
              HasSubstr("spec.rebalance.enabled: must be true or false, got \"maybe\""));
  EXPECT_THAT(SetError({"spec.epochs=[1]"}),
              HasSubstr("spec.epochs: must be an integer, got a list"));
  EXPECT_THAT(SetError({"spec.model.name={a: 1}"}),
              HasSubstr("spec.model.name: must be a string, got a map"));
  EXPECT_THAT(SetError({"spec.model=lenet5"}),
              HasSubstr("spec.model: must be a map, got \"lenet5\""));
  EXPECT_THAT(SetError({"spec.workerGroups=cpu"}), HasSubstr("spec.workerGroups: must be a list"));
  EXPECT_THAT(SetError({"spec.testing.slowdown=[1, x]"}),
              HasSubstr("spec.testing.slowdown[1]: must be a number, got \"x\""));
  EXPECT_THAT(SetError({"spec.workerGroups.0.replicas=two"}),
              HasSubstr("spec.workerGroups[0].replicas: must be an integer"));
  EXPECT_THAT(SetError({"spec.workerGroups.0.template=[a]"}),
              HasSubstr("spec.workerGroups[0].template: must be a map, got a list"));
  EXPECT_THAT(SetError({"spec.optimizer.betas=[0.9]"}),
              HasSubstr("spec.optimizer.betas: must be a list of 2"));
}

TEST(JobParserTest, QuotedNumbersAreStrings) {
  std::string text = kMinimal;
  text.replace(text.find("globalBatchSize: 64"), 19, "globalBatchSize: \"64\"");
  EXPECT_EQ(ErrorOf(text),
            "job.yaml: spec.globalBatchSize: must be an integer, got the quoted string \"64\"");
}

TEST(JobParserTest, UnknownKeysAreErrors) {
  EXPECT_THAT(
      SetError({"spec.strategy.foo=1"}),
      StartsWith("job.yaml: spec.strategy.foo: unknown field (expected one of type, bits,"));
  EXPECT_THAT(SetError({"spec.epoch=3"}), StartsWith("job.yaml: spec.epoch: unknown field"));
  EXPECT_THAT(SetError({"extra=1"}), StartsWith("job.yaml: extra: unknown field"));
  EXPECT_THAT(SetError({"spec.workerGroups.0.image=x"}),
              StartsWith("job.yaml: spec.workerGroups[0].image: unknown field"));
  EXPECT_THAT(SetError({"spec.optimizer.schedule.decay=1"}),
              StartsWith("job.yaml: spec.optimizer.schedule.decay: unknown field"));
  EXPECT_THAT(SetError({"spec.dataset.synthetic.size=1", "spec.dataset.name=synthetic"}),
              StartsWith("job.yaml: spec.dataset.synthetic.size: unknown field"));
}

TEST(JobParserTest, TemplateAndMetadataAcceptAnyKey) {
  absl::StatusOr<JobSpec> spec = Parse(
      kMinimal, {"spec.workerGroups.0.template.spec.whatever.deep=1", "metadata.labels.team=vision",
                 "metadata.uid=abc", "spec.ps.template.metadata.labels.x=y"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->worker_groups[0].template_yaml, HasSubstr("whatever:"));
  EXPECT_THAT(spec->ps_template_yaml, HasSubstr("x: y"));
}

TEST(JobParserTest, DuplicateKey) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "  globalBatchSize: 32\n"),
            "job.yaml: spec.globalBatchSize: duplicate key");
}

TEST(JobParserTest, MalformedYamlNamesLineAndColumn) {
  std::string message = ErrorOf("apiVersion: hptrain.io/v1alpha1\nkind: [TrainingJob\nspec: {}\n");
  EXPECT_THAT(message, MatchesRegex("job\\.yaml:[0-9]+:[0-9]+: malformed YAML: .+"));
  EXPECT_THAT(ErrorOf("a: 1\n b: 2\n"), StartsWith("job.yaml:2:3: malformed YAML: "));
}

TEST(JobParserTest, OneDocumentOnly) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "---\n" + kMinimal),
            "job.yaml: expected one YAML document, found 2");
}

// Found by tests/fuzz (fuzz_job_parser): yaml-cpp 0.7's LoadAll never returned, its memory
// growing, for a document starting with a ',' outside a flow collection.
TEST(JobParserTest, CommaAtTheStartOfADocumentIsAnErrorNotAHang) {
  EXPECT_EQ(ErrorOf(","),
            "job.yaml:1:1: malformed YAML: unexpected ',' at the start of a document");
  EXPECT_EQ(ErrorOf("# a comment\n, 28, 28]\n"),
            "job.yaml:2:1: malformed YAML: unexpected ',' at the start of a document");
  EXPECT_EQ(ErrorOf("a: 1\n---\n, }\n"),
            "job.yaml:3:1: malformed YAML: unexpected ',' at the start of a document");
}

TEST(JobParserTest, ApiVersionKindAndName) {
  EXPECT_EQ(SetError({"apiVersion=v1"}),
            "job.yaml: apiVersion: must be \"hptrain.io/v1alpha1\", got \"v1\"");
  EXPECT_THAT(SetError({"kind=Pod"}), StartsWith("job.yaml: kind: must be \"TrainingJob\""));
  EXPECT_THAT(ErrorOf(""), StartsWith("job.yaml: apiVersion: must be"));
  EXPECT_THAT(ErrorOf("[1, 2]"), StartsWith("job.yaml: document: must be a map"));
  EXPECT_EQ(SetError({"metadata.name="}), "job.yaml: metadata.name: required");
  EXPECT_THAT(SetError({"metadata.name=My_Job"}),
              StartsWith("job.yaml: metadata.name: \"My_Job\" is not a DNS-1123 label"));
  EXPECT_THAT(SetError({"metadata.labels=x"}),
              StartsWith("job.yaml: metadata.labels: must be a map"));
  std::string no_spec = kMinimal;
  no_spec.resize(no_spec.find("spec:"));
  EXPECT_EQ(ErrorOf(no_spec), "job.yaml: spec: required");
}

TEST(JobParserTest, ValidationErrorsCarryTheSource) {
  EXPECT_EQ(SetError({"spec.strategy.type=foo"}),
            "job.yaml: spec.strategy.type: unknown strategy \"foo\" (expected one of ssgd, fp16, "
            "quantized, auto, topk, dgc, localsgd, multistep, hierarchical, gossip, ps, hps, mp2)");
  EXPECT_THAT(SetError({"spec.strategy.density=0.1"}),
              StartsWith("job.yaml: spec.strategy.density: does not apply to strategy ssgd"));
}

TEST(JobParserTest, WorkersAndWorkerGroupsAreExclusive) {
  EXPECT_THAT(SetError({"spec.workers.replicas=2"}),
              StartsWith("job.yaml: spec.workers: cannot be combined with spec.workerGroups"));
  // Nulling workerGroups out makes room for the shorthand.
  absl::StatusOr<JobSpec> spec =
      Parse(kMinimal, {"spec.workerGroups=~", "spec.workers.replicas=3"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->RankGroups(), ElementsAre("worker", "worker", "worker"));
}

TEST(JobParserTest, SyntheticBlockNeedsSyntheticDataset) {
  EXPECT_THAT(
      SetError({"spec.dataset.synthetic.samples=10"}),
      StartsWith("job.yaml: spec.dataset.synthetic: applies only to dataset \"synthetic\""));
}

TEST(JobParserTest, MissingFile) {
  absl::StatusOr<JobSpec> spec = ParseJobFile("no/such/job.yaml");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(spec.status().message(), "no/such/job.yaml: no such file");
}

TEST(JobParserTest, FileErrorsNameTheFile) {
  std::string path = ::testing::TempDir() + "/job_parser_test_bad.yaml";
  {
    std::ofstream out(path);
    out << kMinimal << "  epochs: zero\n";
  }
  absl::StatusOr<JobSpec> spec = ParseJobFile(path);
  EXPECT_EQ(spec.status().message(), path + ": spec.epochs: must be an integer, got \"zero\"");
  spec = ParseJobFile(path, {"spec.epochs=2"});
  EXPECT_TRUE(spec.ok()) << spec.status();
  std::filesystem::remove(path);
  EXPECT_THAT(std::string(ParseJobFile(::testing::TempDir()).status().message()),
              HasSubstr("is a directory"));
}

// --- overrides -------------------------------------------------------------------------------

TEST(JobParserOverrideTest, Scalars) {
  absl::StatusOr<JobSpec> spec =
      Parse(kMinimal, {"spec.epochs=3", "spec.strategy.type=topk", "spec.strategy.density=0.01",
                       "spec.strategy.errorFeedback=true", "spec.optimizer.lr=0.2"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->epochs, 3);
  EXPECT_EQ(spec->strategy.type, "topk");
  EXPECT_DOUBLE_EQ(spec->strategy.Number("density"), 0.01);
  ASSERT_TRUE(spec->strategy.Has("errorFeedback"));
  EXPECT_TRUE(spec->strategy.Bool("errorFeedback"));
  EXPECT_DOUBLE_EQ(spec->optimizer.lr, 0.2);
}

TEST(JobParserOverrideTest, Lists) {
  absl::StatusOr<JobSpec> spec = Parse(
      kMinimal, {"spec.testing.slowdown=[1,3]", "spec.model.name=mlp", "spec.model.hidden=[8, 8]"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->testing.slowdown, ElementsAre(1.0, 3.0));
  EXPECT_THAT(spec->model.hidden, ElementsAre(8, 8));
}

TEST(JobParserOverrideTest, IndexIntoWorkerGroups) {
  absl::StatusOr<JobSpec> spec = Parse(kMinimal, {"spec.workerGroups.0.replicas=4"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->WorldSize(), 4);
  // Index == length appends a group.
  spec = Parse(kMinimal, {"spec.workerGroups.1.name=gpu", "spec.workerGroups.1.replicas=3"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->RankGroups(), ElementsAre("cpu", "cpu", "gpu", "gpu", "gpu"));
  // Index into a list of scalars.
  spec = Parse(kMinimal, {"spec.testing.slowdown=[1,1]", "spec.testing.slowdown.1=2.5"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->testing.slowdown, ElementsAre(1.0, 2.5));
}

TEST(JobParserOverrideTest, CreatesMissingKeys) {
  absl::StatusOr<JobSpec> spec =
      Parse(kMinimal, {"spec.checkpoint.path=/tmp/c.pt", "spec.rebalance.enabled=true",
                       "spec.optimizer.schedule.type=cosine"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->checkpoint.path, "/tmp/c.pt");
  EXPECT_TRUE(spec->rebalance.enabled);
  EXPECT_EQ(spec->optimizer.schedule.type, "cosine");
}

TEST(JobParserOverrideTest, BuildsAWholeJobFromNothing) {
  absl::StatusOr<JobSpec> spec =
      Parse("", {"apiVersion=hptrain.io/v1alpha1", "kind=TrainingJob", "metadata.name=cli",
                 "spec.model.name=lenet5", "spec.dataset.name=mnist", "spec.globalBatchSize=8",
                 "spec.workers.replicas=2"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "cli");
  EXPECT_EQ(spec->WorldSize(), 2);
}

TEST(JobParserOverrideTest, LaterOverrideWins) {
  absl::StatusOr<JobSpec> spec = Parse(kMinimal, {"spec.epochs=3", "spec.epochs=7"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->epochs, 7);
}

TEST(JobParserOverrideTest, StringValuesAndEmptyValue) {
  absl::StatusOr<JobSpec> spec =
      Parse(kMinimal, {"spec.checkpoint.path=/a b/c:d.pt", "spec.dataset.path="});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->checkpoint.path, "/a b/c:d.pt");
  EXPECT_EQ(spec->dataset.path, "/usr/share/datasets/fashion-mnist");  // empty = default
}

TEST(JobParserOverrideTest, Malformed) {
  EXPECT_EQ(SetError({"spec.epochs"}),
            "job.yaml: --set \"spec.epochs\": expected dotted.path=value");
  EXPECT_EQ(SetError({"=3"}), "job.yaml: --set \"=3\": empty path component");
  EXPECT_EQ(SetError({"spec..epochs=3"}),
            "job.yaml: --set \"spec..epochs=3\": empty path component");
  EXPECT_EQ(SetError({"spec.workerGroups.first.replicas=2"}),
            "job.yaml: --set \"spec.workerGroups.first.replicas=2\": spec.workerGroups is a list; "
            "\"first\" is not an index");
  EXPECT_EQ(
      SetError({"spec.workerGroups.5.replicas=2"}),
      "job.yaml: --set \"spec.workerGroups.5.replicas=2\": spec.workerGroups.5 is out of range "
      "(the list has 1 items)");
  EXPECT_EQ(SetError({"spec.globalBatchSize.x=2"}),
            "job.yaml: --set \"spec.globalBatchSize.x=2\": spec.globalBatchSize is a scalar, not a "
            "map or list");
  EXPECT_THAT(SetError({"spec.testing.slowdown=[1,"}),
              StartsWith("job.yaml: --set \"spec.testing.slowdown=[1,\": malformed value: "));
}

TEST(JobParserOverrideTest, OverridesDoNotLeakBetweenCalls) {
  ASSERT_TRUE(Parse(kMinimal, {"spec.epochs=9"}).ok());
  absl::StatusOr<JobSpec> spec = Parse(kMinimal);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->epochs, 1);
  EXPECT_THAT(std::string(SetError({"spec.epochs=0"})), Not(HasSubstr("--set")));
}

TEST(JobParserTest, SchedulerGangSchedulingAndSlowdownFile) {
  absl::StatusOr<JobSpec> spec =
      Parse(kMinimal, {"spec.schedulerName=volcano", "spec.gangScheduling.enabled=true",
                       "spec.gangScheduling.queue=research",
                       "spec.testing.slowdownFile=/tmp/slowdown", "spec.testing.slowdownWindow=9"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->scheduler_name, "volcano");
  EXPECT_TRUE(spec->gang_scheduling.enabled);
  EXPECT_EQ(spec->gang_scheduling.provider, "volcano");
  EXPECT_EQ(spec->gang_scheduling.queue, "research");
  EXPECT_EQ(spec->testing.slowdown_file, "/tmp/slowdown");
  EXPECT_EQ(spec->testing.slowdown_window, 9);
  EXPECT_EQ(Parse(kMinimal)->testing.slowdown_window, 1);
  EXPECT_THAT(SetError({"spec.gangScheduling.provider=kube-batch"}),
              HasSubstr("spec.gangScheduling.provider: must be volcano or scheduler-plugins"));
  EXPECT_THAT(SetError({"spec.gangScheduling.provider=scheduler-plugins",
                        "spec.gangScheduling.queue=q"}),
              HasSubstr("spec.gangScheduling.queue: applies only to provider volcano"));
  EXPECT_THAT(SetError({"spec.gangScheduling.size=3"}), HasSubstr("spec.gangScheduling.size"));
}

}  // namespace
}  // namespace hptrain::job
