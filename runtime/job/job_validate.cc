#include "runtime/job/job_validate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status.h"
#include "runtime/sync/strategy_descriptor.h"
#include "runtime/sync/strategy_options_check.h"

namespace hptrain::job {
namespace {

template <typename... Args>
absl::Status Invalid(absl::string_view path, const Args&... reason) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", reason...));
}

bool Contains(const std::vector<std::string>& list, absl::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// `value` must be one of `allowed`; `what` names the kind of thing ("strategy", "model").
absl::Status OneOf(absl::string_view path, absl::string_view what, const std::string& value,
                   const std::vector<std::string>& allowed) {
  if (Contains(allowed, value)) return absl::OkStatus();
  if (value.empty()) return Invalid(path, "required (one of ", absl::StrJoin(allowed, ", "), ")");
  return Invalid(path, "unknown ", what, " \"", value, "\" (expected one of ",
                 absl::StrJoin(allowed, ", "), ")");
}

template <typename T>
absl::Status AtLeast(absl::string_view path, T value, T min) {
  if (value >= min) return absl::OkStatus();
  return Invalid(path, "must be >= ", min, ", got ", value);
}

absl::Status Positive(absl::string_view path, double value) {
  if (value > 0) return absl::OkStatus();
  return Invalid(path, "must be > 0, got ", value);
}

absl::Status InUnitInterval(absl::string_view path, double value) {
  if (value >= 0 && value < 1) return absl::OkStatus();
  return Invalid(path, "must be in [0, 1), got ", value);
}

absl::Status InOpenClosedUnit(absl::string_view path, double value) {
  if (value > 0 && value <= 1) return absl::OkStatus();
  return Invalid(path, "must be in (0, 1], got ", value);
}

absl::Status DnsLabel(absl::string_view path, const std::string& name) {
  if (name.empty()) return Invalid(path, "required");
  if (IsDnsLabel(name)) return absl::OkStatus();
  return Invalid(path, "\"", name,
                 "\" is not a DNS-1123 label (at most 63 characters: lowercase letters, digits and "
                 "'-', starting and ending with a letter or digit)");
}

absl::Status ValidateModel(const ModelSpec& model) {
  static const std::vector<std::string> kModels = {"lenet5", "mlp", "resnet20", "vgg11", "alexnet"};
  if (model.name.empty() && model.torchscript.empty()) {
    return Invalid("spec.model", "set name (one of ", absl::StrJoin(kModels, ", "),
                   ") or torchscript");
  }
  if (!model.name.empty() && !model.torchscript.empty()) {
    return Invalid("spec.model.torchscript", "cannot be combined with spec.model.name");
  }
  if (!model.name.empty())
    HPTRAIN_RETURN_IF_ERROR(OneOf("spec.model.name", "model", model.name, kModels));
  if (!model.hidden.empty() && model.name != "mlp") {
    return Invalid("spec.model.hidden", "applies only to model mlp");
  }
  for (size_t i = 0; i < model.hidden.size(); ++i) {
    HPTRAIN_RETURN_IF_ERROR(
        AtLeast(absl::StrCat("spec.model.hidden[", i, "]"), model.hidden[i], 1));
  }
  return absl::OkStatus();
}

absl::Status ValidateAugment(const AugmentSpec& augment) {
  const RandomCropSpec& crop = augment.random_crop;
  const RandomResizedCropSpec& resized = augment.random_resized_crop;
  if (crop.size > 0 && resized.size > 0) {
    return Invalid("spec.dataset.augment.randomResizedCrop",
                   "cannot be combined with randomCrop (use one of them)");
  }
  HPTRAIN_RETURN_IF_ERROR(
      AtLeast<int64_t>("spec.dataset.augment.randomCrop.size", crop.size, 0));
  HPTRAIN_RETURN_IF_ERROR(
      AtLeast<int64_t>("spec.dataset.augment.randomCrop.padding", crop.padding, 0));
  HPTRAIN_RETURN_IF_ERROR(
      AtLeast<int64_t>("spec.dataset.augment.randomResizedCrop.size", resized.size, 0));
  const auto range = [](const char* field, const std::vector<double>& v, bool at_most_one) {
    const std::string path = absl::StrCat("spec.dataset.augment.randomResizedCrop.", field);
    if (v.size() != 2) return Invalid(path, "needs two values [min, max], got ", v.size());
    if (!(v[0] > 0.0) || v[0] > v[1]) {
      return Invalid(path, "needs 0 < min <= max, got [", v[0], ", ", v[1], "]");
    }
    if (at_most_one && v[1] > 1.0) return Invalid(path, "max is at most 1, got ", v[1]);
    return absl::OkStatus();
  };
  HPTRAIN_RETURN_IF_ERROR(range("scale", resized.scale, true));
  return range("ratio", resized.ratio, false);
}

// Fields of the user-data formats (npy, imagefolder, filelist, webdataset).
absl::Status ValidateUserData(const DatasetSpec& dataset) {
  if (dataset.name.empty()) {
    return Invalid("spec.dataset.name",
                   "required: a label for the data set in messages and reports");
  }
  if (dataset.path.empty()) {
    return Invalid("spec.dataset.path", "required for format ", dataset.format);
  }
  if (!dataset.layout.empty()) {
    if (dataset.format != "npy") {
      return Invalid("spec.dataset.layout", "applies only to format npy, got format ",
                     dataset.format);
    }
    HPTRAIN_RETURN_IF_ERROR(
        OneOf("spec.dataset.layout", "layout", dataset.layout, {"NHWC", "NCHW"}));
  }
  const bool decoded = dataset.format != "npy";
  if (!dataset.image_size.empty()) {
    if (!decoded) {
      return Invalid("spec.dataset.imageSize",
                     "applies only to formats imagefolder, filelist and webdataset");
    }
    if (dataset.image_size.size() > 2) {
      return Invalid("spec.dataset.imageSize", "needs n or [height, width], got ",
                     dataset.image_size.size(), " values");
    }
    for (size_t i = 0; i < dataset.image_size.size(); ++i) {
      HPTRAIN_RETURN_IF_ERROR(AtLeast<int64_t>(absl::StrCat("spec.dataset.imageSize[", i, "]"),
                                               dataset.image_size[i], 1));
    }
  }
  if (dataset.channels != 0) {
    if (!decoded) {
      return Invalid("spec.dataset.channels",
                     "applies only to formats imagefolder, filelist and webdataset");
    }
    if (dataset.channels != 1 && dataset.channels != 3) {
      return Invalid("spec.dataset.channels", "must be 1 or 3, got ", dataset.channels);
    }
  }
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.dataset.classes", dataset.classes, 0));
  return absl::OkStatus();
}

absl::Status ValidateNormalization(const DatasetSpec& dataset) {
  if (dataset.mean.empty() && dataset.std.empty()) return absl::OkStatus();
  if (dataset.mean.empty() != dataset.std.empty()) {
    return Invalid(dataset.mean.empty() ? "spec.dataset.mean" : "spec.dataset.std",
                   "required with spec.dataset.", dataset.mean.empty() ? "std" : "mean");
  }
  if (dataset.mean.size() != dataset.std.size()) {
    return Invalid("spec.dataset.std", "needs as many values as spec.dataset.mean (",
                   dataset.mean.size(), "), got ", dataset.std.size());
  }
  if (!dataset.normalize) {
    return Invalid("spec.dataset.mean", "cannot be combined with normalize: false");
  }
  for (size_t i = 0; i < dataset.std.size(); ++i) {
    if (!(dataset.std[i] > 0.0)) {
      return Invalid(absl::StrCat("spec.dataset.std[", i, "]"), "must be > 0, got ",
                     dataset.std[i]);
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateDataset(const DatasetSpec& dataset) {
  // The format each built-in data set comes in; the loaders read nothing else, so another
  // pairing would only fail later, at the first batch.
  static const std::map<std::string, std::string> kFormats = {{"fashion-mnist", "idx"},
                                                              {"mnist", "idx"},
                                                              {"cifar10", "cifar-binary"},
                                                              {"cifar100", "cifar-binary"},
                                                              {"synthetic", "synthetic"}};
  static const std::vector<std::string> kNames = {"fashion-mnist", "mnist", "cifar10", "cifar100",
                                                  "synthetic"};
  static const std::vector<std::string> kFormatNames = {
      "idx", "cifar-binary", "synthetic", "npy", "imagefolder", "filelist", "webdataset"};
  HPTRAIN_RETURN_IF_ERROR(ValidateAugment(dataset.augment));
  HPTRAIN_RETURN_IF_ERROR(ValidateNormalization(dataset));
  if (!dataset.format.empty() && !dataset.builtin_format()) {
    HPTRAIN_RETURN_IF_ERROR(
        OneOf("spec.dataset.format", "format", dataset.format, kFormatNames));
    return ValidateUserData(dataset);
  }
  HPTRAIN_RETURN_IF_ERROR(OneOf("spec.dataset.name", "dataset", dataset.name, kNames));
  HPTRAIN_RETURN_IF_ERROR(OneOf("spec.dataset.format", "format", dataset.format, kFormatNames));
  const std::string& expected = kFormats.at(dataset.name);
  if (dataset.format != expected) {
    return Invalid("spec.dataset.format", "dataset ", dataset.name, " comes in format ", expected,
                   ", got \"", dataset.format, "\"");
  }
  for (const auto& [field, given] :
       {std::pair<const char*, bool>{"layout", !dataset.layout.empty()},
        {"imageSize", !dataset.image_size.empty()},
        {"channels", dataset.channels != 0},
        {"classes", dataset.classes != 0},
        {"skipCorrupt", dataset.skip_corrupt}}) {
    if (given) {
      return Invalid(absl::StrCat("spec.dataset.", field),
                     "applies only to formats npy, imagefolder, filelist and webdataset");
    }
  }
  if (dataset.name == "cifar10" || dataset.name == "cifar100") {
    if (dataset.path.empty())
      return Invalid("spec.dataset.path", "required for dataset ", dataset.name);
  }
  if (dataset.name == "synthetic") {
    const SyntheticSpec& s = dataset.synthetic;
    HPTRAIN_RETURN_IF_ERROR(AtLeast<int64_t>("spec.dataset.synthetic.samples", s.samples, 1));
    HPTRAIN_RETURN_IF_ERROR(
        AtLeast<int64_t>("spec.dataset.synthetic.testSamples", s.test_samples, 0));
    HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.dataset.synthetic.classes", s.classes, 2));
    if (s.shape.empty()) return Invalid("spec.dataset.synthetic.shape", "must not be empty");
    for (size_t i = 0; i < s.shape.size(); ++i) {
      HPTRAIN_RETURN_IF_ERROR(
          AtLeast<int64_t>(absl::StrCat("spec.dataset.synthetic.shape[", i, "]"), s.shape[i], 1));
    }
  }
  return absl::OkStatus();
}

// spec.task and spec.precision.
absl::Status ValidateTaskAndPrecision(const JobSpec& spec) {
  HPTRAIN_RETURN_IF_ERROR(OneOf("spec.task", "task", spec.task,
                                {std::begin(kTaskNames), std::end(kTaskNames)}));
  if (spec.task == "torchscript" && spec.model.torchscript.empty() && !spec.trainer.set()) {
    return Invalid("spec.task", "torchscript needs spec.model.torchscript: the module whose "
                   "loss(outputs, targets) method the trainer calls");
  }
  HPTRAIN_RETURN_IF_ERROR(OneOf("spec.precision", "precision", spec.precision,
                                {std::begin(kPrecisionNames), std::end(kPrecisionNames)}));
  if (spec.precision == "fp16" && spec.device == "cpu") {
    return Invalid("spec.precision",
                   "fp16 needs a GPU (spec.device: cpu); use bf16 on the CPU, or fp32");
  }
  const bool scales_loss = spec.precision == "fp16" || spec.testing.loss_scaling;
  if (scales_loss && spec.scheduler.type == "priority") {
    // The priority scheduler starts a step's exchange during backward; loss scaling starts it
    // only once every worker's gradients were found free of inf/nan.
    return Invalid("spec.scheduler.type", "priority cannot be used with loss scaling "
                   "(spec.precision fp16); use none");
  }
  if (!scales_loss && spec.testing.inf_gradient_step >= 0) {
    return Invalid("spec.testing.infGradientStep",
                   "needs loss scaling (spec.precision fp16 or spec.testing.lossScaling)");
  }
  return absl::OkStatus();
}

bool ModelGiven(const ModelSpec& model) {
  return !model.name.empty() || !model.torchscript.empty() || !model.hidden.empty();
}

bool DatasetGiven(const DatasetSpec& dataset) {
  return !dataset.name.empty() || !dataset.path.empty() || !dataset.format.empty();
}

// spec.trainer: a program to run. What it trains is its own, so spec.model cannot say it too.
absl::Status ValidateTrainer(const JobSpec& spec) {
  const TrainerSpec& t = spec.trainer;
  if (!t.set()) {
    if (!t.args.empty() || !t.working_dir.empty()) {
      return Invalid("spec.trainer.command", "required when spec.trainer.",
                     t.args.empty() ? "workingDir" : "args", " is set");
    }
    return absl::OkStatus();
  }
  if (t.command.front().empty()) {
    return Invalid("spec.trainer.command[0]", "must not be empty (the program to run)");
  }
  if (ModelGiven(spec.model)) {
    return Invalid("spec.model",
                   "cannot be combined with spec.trainer (the trainer's program builds its own "
                   "model; remove one of them)");
  }
  return absl::OkStatus();
}

// spec.strategy: the type, then everything its descriptor defines (strategy_options_check.h).
absl::Status ValidateStrategy(const StrategySpec& s) {
  std::vector<std::string> types;
  for (const sync::StrategyDescriptor& d : sync::StrategyDescriptors()) types.push_back(d.name);
  HPTRAIN_RETURN_IF_ERROR(OneOf("spec.strategy.type", "strategy", s.type, types));
  return sync::CheckStrategyOptions(s, "spec.strategy");
}

// spec.scheduler. Its sizes keep 0 for "unset" (the parser refuses a written 0).
absl::Status ValidateScheduler(const JobSpec& spec) {
  const ExchangeSchedulerSpec& s = spec.scheduler;
  HPTRAIN_RETURN_IF_ERROR(OneOf("spec.scheduler.type", "scheduler", s.type, {"none", "priority"}));
  if (s.partition_elements != 0) {
    HPTRAIN_RETURN_IF_ERROR(
        AtLeast<int64_t>("spec.scheduler.partitionElements", s.partition_elements, 1));
  }
  if (s.credit_elements != 0) {
    HPTRAIN_RETURN_IF_ERROR(
        AtLeast<int64_t>("spec.scheduler.creditElements", s.credit_elements, 1));
  }
  if (s.type != "priority") {
    if (s.partition_elements != 0 || s.credit_elements != 0) {
      return Invalid(s.partition_elements != 0 ? "spec.scheduler.partitionElements"
                                               : "spec.scheduler.creditElements",
                     "applies only to spec.scheduler.type priority, got ", s.type);
    }
    return absl::OkStatus();
  }
  // A chunk larger than the credit could never be launched.
  const int64_t partition = s.partition();
  const int64_t credit = s.credit();
  if (credit < partition) {
    if (s.credit_elements != 0) {
      return Invalid("spec.scheduler.creditElements",
                     "must be >= spec.scheduler.partitionElements (", partition, "), got ", credit);
    }
    return Invalid("spec.scheduler.partitionElements", "must be <= spec.scheduler.creditElements (",
                   credit, "), got ", partition);
  }
  const StrategySpec& strategy = spec.strategy;
  if (strategy.type != "ssgd" && strategy.type != "multistep") {
    return Invalid("spec.scheduler.type",
                   "priority applies only to strategies ssgd and multistep, got strategy ",
                   strategy.type);
  }
  // The scheduler exchanges the round's last backward layer by layer and updates each layer
  // before the next forward reaches it: no round may still be in flight then (delay 1), and its
  // chunks travel uncompressed.
  if (strategy.type == "multistep" && strategy.Int("delay") == 1) {
    return Invalid("spec.scheduler.type",
                   "priority cannot be combined with spec.strategy.delay 1 (the scheduler "
                   "applies each round before the next forward)");
  }
  if (strategy.type == "multistep" && strategy.Has("compression.type") &&
      strategy.String("compression.type") != "none") {
    return Invalid("spec.scheduler.type",
                   "priority cannot be combined with spec.strategy.compression (the scheduler's "
                   "chunks travel uncompressed), got compression type ",
                   strategy.String("compression.type"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePs(const JobSpec& spec) {
  if (spec.ps_shards < 1 || spec.ps_shards > kMaxPsShards) {
    return Invalid("spec.ps.shards", "must be between 1 and ", kMaxPsShards, ", got ",
                   spec.ps_shards);
  }
  if (spec.ps_shards > 1 && !UsesParameterServer(spec.strategy.type)) {
    return Invalid("spec.ps.shards", spec.ps_shards,
                   " needs a parameter-server strategy (ps, hps, mp2), not ", spec.strategy.type);
  }
  return absl::OkStatus();
}

absl::Status ValidateSchedule(const ScheduleSpec& s, double lr) {
  const ScheduleSpec defaults;
  HPTRAIN_RETURN_IF_ERROR(
      OneOf("spec.optimizer.schedule.type", "schedule", s.type, {"constant", "step", "cosine"}));
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.optimizer.schedule.warmupEpochs", s.warmup_epochs, 0.0));
  if (s.type == "step") {
    if (s.step_size == 0)
      return Invalid("spec.optimizer.schedule.stepSize", "required for schedule step");
    HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.optimizer.schedule.stepSize", s.step_size, 1));
    HPTRAIN_RETURN_IF_ERROR(InOpenClosedUnit("spec.optimizer.schedule.gamma", s.gamma));
  } else if (s.step_size != defaults.step_size || s.gamma != defaults.gamma) {
    return Invalid(s.step_size != defaults.step_size ? "spec.optimizer.schedule.stepSize"
                                                     : "spec.optimizer.schedule.gamma",
                   "applies only to schedule step, got schedule ", s.type);
  }
  if (s.type == "cosine") {
    HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.optimizer.schedule.minLr", s.min_lr, 0.0));
    if (s.min_lr >= lr) {
      return Invalid("spec.optimizer.schedule.minLr", "must be below spec.optimizer.lr (", lr,
                     "), got ", s.min_lr);
    }
  } else if (s.min_lr != defaults.min_lr) {
    return Invalid("spec.optimizer.schedule.minLr",
                   "applies only to schedule cosine, got schedule ", s.type);
  }
  return absl::OkStatus();
}

absl::Status ValidateOptimizer(const OptimizerSpec& o) {
  const OptimizerSpec defaults;
  HPTRAIN_RETURN_IF_ERROR(OneOf("spec.optimizer.type", "optimizer", o.type, {"sgd", "adam"}));
  HPTRAIN_RETURN_IF_ERROR(Positive("spec.optimizer.lr", o.lr));
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.optimizer.weightDecay", o.weight_decay, 0.0));
  if (o.type == "sgd") {
    HPTRAIN_RETURN_IF_ERROR(InUnitInterval("spec.optimizer.momentum", o.momentum));
    if (o.nesterov && o.momentum == 0) {
      return Invalid("spec.optimizer.nesterov", "requires spec.optimizer.momentum > 0");
    }
    if (o.beta1 != defaults.beta1 || o.beta2 != defaults.beta2) {
      return Invalid("spec.optimizer.betas", "applies only to optimizer adam");
    }
    if (o.eps != defaults.eps)
      return Invalid("spec.optimizer.eps", "applies only to optimizer adam");
  } else {
    if (o.momentum != defaults.momentum) {
      return Invalid("spec.optimizer.momentum", "applies only to optimizer sgd");
    }
    if (o.nesterov) return Invalid("spec.optimizer.nesterov", "applies only to optimizer sgd");
    HPTRAIN_RETURN_IF_ERROR(InUnitInterval("spec.optimizer.betas[0]", o.beta1));
    HPTRAIN_RETURN_IF_ERROR(InUnitInterval("spec.optimizer.betas[1]", o.beta2));
    HPTRAIN_RETURN_IF_ERROR(Positive("spec.optimizer.eps", o.eps));
  }
  return ValidateSchedule(o.schedule, o.lr);
}

absl::Status ValidateWorkers(const JobSpec& spec) {
  const std::vector<WorkerGroupSpec>& groups = spec.worker_groups;
  if (groups.empty()) {
    return Invalid("spec.workerGroups", "at least one worker group is required (or spec.workers)");
  }
  std::map<std::string, size_t> seen;
  int first_with_batch = -1;
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string path = absl::StrCat("spec.workerGroups[", i, "]");
    HPTRAIN_RETURN_IF_ERROR(DnsLabel(path + ".name", groups[i].name));
    auto [it, inserted] = seen.emplace(groups[i].name, i);
    if (!inserted) {
      return Invalid(path + ".name", "duplicate group name \"", groups[i].name,
                     "\" (also spec.workerGroups[", it->second, "])");
    }
    HPTRAIN_RETURN_IF_ERROR(AtLeast(path + ".replicas", groups[i].replicas, 1));
    HPTRAIN_RETURN_IF_ERROR(AtLeast(path + ".batchSize", groups[i].batch_size, 0));
    if (groups[i].batch_size > 0 && first_with_batch < 0) first_with_batch = static_cast<int>(i);
  }

  const int world = spec.WorldSize();
  if (spec.global_batch_size < world) {
    return Invalid("spec.globalBatchSize", "must be at least the number of workers (", world,
                   "), got ", spec.global_batch_size);
  }
  if (first_with_batch >= 0) {
    int64_t sum = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      if (groups[i].batch_size == 0) {
        return Invalid(absl::StrCat("spec.workerGroups[", i, "].batchSize"),
                       "required because spec.workerGroups[", first_with_batch,
                       "] sets it (set batchSize on every group or on none)");
      }
      sum += static_cast<int64_t>(groups[i].replicas) * groups[i].batch_size;
    }
    if (sum != spec.global_batch_size) {
      return Invalid("spec.globalBatchSize",
                     "must equal the sum of replicas x batchSize over the "
                     "worker groups (",
                     sum, "), got ", spec.global_batch_size);
    }
  }
  return absl::OkStatus();
}

// spec.elastic (docs/elastic.md): 1 <= minReplicas <= replicas <= maxReplicas over one worker
// group whose batch is the global batch divided over whoever is a member.
absl::Status ValidateElastic(const JobSpec& spec) {
  const ElasticSpec& e = spec.elastic;
  if (!e.enabled) return absl::OkStatus();
  if (spec.worker_groups.size() != 1) {
    return Invalid("spec.elastic", "an elastic job has one worker group (spec.workers or one "
                   "spec.workerGroups entry), got ", spec.worker_groups.size());
  }
  if (spec.trainer.set()) {
    return Invalid("spec.elastic", "not supported with spec.trainer (the user's own program) yet");
  }
  if (spec.gang_scheduling.enabled) {
    return Invalid("spec.elastic",
                   "not supported with spec.gangScheduling yet (its PodGroup's minMember is "
                   "every pod, so a lost worker would stop the gang)");
  }
  if (spec.worker_groups[0].batch_size != 0) {
    return Invalid("spec.workerGroups[0].batchSize",
                   "cannot be set with spec.elastic (the global batch is divided over whoever "
                   "is a member)");
  }
  const int replicas = spec.worker_groups[0].replicas;
  const int max_replicas = e.max_replicas == 0 ? replicas : e.max_replicas;
  if (e.min_replicas < 1 || e.min_replicas > replicas) {
    return Invalid("spec.elastic.minReplicas", "must be between 1 and the workers' replicas (",
                   replicas, "), got ", e.min_replicas);
  }
  if (max_replicas < replicas) {
    return Invalid("spec.elastic.maxReplicas", "must be at least the workers' replicas (",
                   replicas, "), got ", max_replicas);
  }
  HPTRAIN_RETURN_IF_ERROR(
      AtLeast<int64_t>("spec.elastic.joinTimeoutSeconds", e.join_timeout_seconds, 1));
  // Every member needs at least one sample of the global batch, however many there are.
  if (spec.global_batch_size < max_replicas) {
    return Invalid("spec.elastic.maxReplicas", max_replicas,
                   " members cannot share spec.globalBatchSize (", spec.global_batch_size,
                   "): every member needs at least one sample");
  }
  // The balancer places the whole global batch over any number of members between the bounds.
  const RebalanceSpec& r = spec.rebalance;
  if (r.enabled && static_cast<int64_t>(r.min_batch) * max_replicas > spec.global_batch_size) {
    return Invalid("spec.rebalance.minBatch", "minBatch x spec.elastic.maxReplicas (", r.min_batch,
                   " x ", max_replicas, ") exceeds spec.globalBatchSize (",
                   spec.global_batch_size, ")");
  }
  if (r.enabled && r.max_batch != 0 &&
      static_cast<int64_t>(r.max_batch) * e.min_replicas < spec.global_batch_size) {
    return Invalid("spec.rebalance.maxBatch", "maxBatch x spec.elastic.minReplicas (", r.max_batch,
                   " x ", e.min_replicas, ") is below spec.globalBatchSize (",
                   spec.global_batch_size, ")");
  }
  return absl::OkStatus();
}

absl::Status ValidateRebalance(const RebalanceSpec& r, int world, int global_batch) {
  HPTRAIN_RETURN_IF_ERROR(Positive("spec.rebalance.intervalSeconds", r.interval_seconds));
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.rebalance.intervalSteps", r.interval_steps, 0));
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.rebalance.minBatch", r.min_batch, 1));
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.rebalance.maxBatch", r.max_batch, 0));
  if (r.max_batch != 0 && r.max_batch < r.min_batch) {
    return Invalid("spec.rebalance.maxBatch", "must be >= spec.rebalance.minBatch (", r.min_batch,
                   ") or 0, got ", r.max_batch);
  }
  HPTRAIN_RETURN_IF_ERROR(InUnitInterval("spec.rebalance.hysteresis", r.hysteresis));
  if (!r.enabled) return absl::OkStatus();
  // The balancer must be able to place the whole global batch within [minBatch, maxBatch].
  if (static_cast<int64_t>(r.min_batch) * world > global_batch) {
    return Invalid("spec.rebalance.minBatch", "minBatch x workers (", r.min_batch, " x ", world,
                   ") exceeds spec.globalBatchSize (", global_batch, ")");
  }
  if (r.max_batch != 0 && static_cast<int64_t>(r.max_batch) * world < global_batch) {
    return Invalid("spec.rebalance.maxBatch", "maxBatch x workers (", r.max_batch, " x ", world,
                   ") is below spec.globalBatchSize (", global_batch, ")");
  }
  return absl::OkStatus();
}

absl::Status ValidateRunKnobs(const JobSpec& spec) {
  HPTRAIN_RETURN_IF_ERROR(Positive("spec.globalBatchSize", spec.global_batch_size));
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.epochs", spec.epochs, 1));
  HPTRAIN_RETURN_IF_ERROR(AtLeast<int64_t>("spec.maxSteps", spec.max_steps, 0));
  HPTRAIN_RETURN_IF_ERROR(AtLeast<int64_t>("spec.evalEverySteps", spec.eval_every_steps, 0));
  HPTRAIN_RETURN_IF_ERROR(OneOf("spec.device", "device", spec.device, {"cpu", "cuda", "auto"}));
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.threads", spec.threads, 0));
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.bucketMiB", spec.bucket_mib, 1));

  HPTRAIN_RETURN_IF_ERROR(
      AtLeast("spec.checkpoint.intervalSteps", spec.checkpoint.interval_steps, 0));
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.collect.every", spec.collect.every, 1));
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.collect.samples", spec.collect.samples, 1));
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.collect.windowEvery", spec.collect.window_every, 1));
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.collect.windowLength", spec.collect.window_length, 2));
  if (spec.checkpoint.interval_steps > 0 && spec.checkpoint.path.empty()) {
    return Invalid("spec.checkpoint.path", "required when spec.checkpoint.intervalSteps is set");
  }
  // The volume is mounted at the checkpoint file's directory, which must then be a real one.
  if (!spec.checkpoint.volume_yaml.empty() &&
      (spec.checkpoint.path.empty() || spec.checkpoint.path.front() != '/' ||
       spec.checkpoint.path.rfind('/') == 0)) {
    return Invalid("spec.checkpoint.path",
                   "must be an absolute path below a directory (e.g. /checkpoints/job.ckpt) when "
                   "spec.checkpoint.volume is set, got \"", spec.checkpoint.path, "\"");
  }
  const RunPolicySpec& p = spec.run_policy;
  HPTRAIN_RETURN_IF_ERROR(OneOf("spec.runPolicy.restartPolicy", "restart policy",
                                p.restart_policy, {"Never", "OnFailure", "ExitCode"}));
  HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.runPolicy.backoffLimit", p.backoff_limit, 0));
  HPTRAIN_RETURN_IF_ERROR(
      AtLeast<int64_t>("spec.runPolicy.activeDeadlineSeconds", p.active_deadline_seconds, 0));
  HPTRAIN_RETURN_IF_ERROR(
      AtLeast<int64_t>("spec.runPolicy.ttlSecondsAfterFinished", p.ttl_seconds_after_finished, 0));
  HPTRAIN_RETURN_IF_ERROR(
      AtLeast<int64_t>("spec.runPolicy.peerTimeoutSeconds", p.peer_timeout_seconds, 0));
  const TlsSpec& tls = spec.security.tls;
  if (!tls.enabled && (tls.mutual || !tls.secret_name.empty())) {
    return Invalid("spec.security.tls.enabled", "must be true when ",
                   tls.mutual ? "mutual" : "secretName", " is set");
  }
  if (!tls.secret_name.empty() && !IsDnsSubdomain(tls.secret_name)) {
    return Invalid("spec.security.tls.secretName",
                   "must be a DNS subdomain name (lowercase letters, digits, '-' and '.'), got \"",
                   tls.secret_name, "\"");
  }
  return absl::OkStatus();
}

absl::Status ValidateGangScheduling(const GangSchedulingSpec& gang) {
  if (gang.provider != "volcano" && gang.provider != "scheduler-plugins") {
    return Invalid("spec.gangScheduling.provider", "must be volcano or scheduler-plugins, got \"",
                   gang.provider, "\"");
  }
  if (!gang.queue.empty() && gang.provider != "volcano") {
    return Invalid("spec.gangScheduling.queue", "applies only to provider volcano");
  }
  if (!gang.priority_class_name.empty() && !IsDnsSubdomain(gang.priority_class_name)) {
    return Invalid("spec.gangScheduling.priorityClassName",
                   "must be a DNS subdomain name (lowercase letters, digits, '-' and '.'), got \"",
                   gang.priority_class_name, "\"");
  }
  return absl::OkStatus();
}

absl::Status ValidateTesting(const TestingSpec& testing, int world) {
  if (testing.slowdown_window < 1 || testing.slowdown_window > 1000) {
    return Invalid("spec.testing.slowdownWindow", "must be between 1 and 1000 steps, got ",
                   testing.slowdown_window);
  }
  if (testing.inf_gradient_step < -1) {
    return Invalid("spec.testing.infGradientStep", "must be a step (>= 0) or -1, got ",
                   testing.inf_gradient_step);
  }
  if (testing.inf_gradient_rank < 0 || testing.inf_gradient_rank >= world) {
    return Invalid("spec.testing.infGradientRank", "must be a worker rank in [0, ", world,
                   "), got ", testing.inf_gradient_rank);
  }
  if (testing.slowdown.empty()) return absl::OkStatus();
  if (static_cast<int>(testing.slowdown.size()) != world) {
    return Invalid("spec.testing.slowdown", "must have one factor per worker (", world, "), got ",
                   testing.slowdown.size());
  }
  for (size_t i = 0; i < testing.slowdown.size(); ++i) {
    HPTRAIN_RETURN_IF_ERROR(
        AtLeast(absl::StrCat("spec.testing.slowdown[", i, "]"), testing.slowdown[i], 1.0));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& StrategyTypes() {
  // Descriptors registered later (tests) are not in this list; StrategyParameters and
  // validation read the descriptors themselves.
  static const auto* types = [] {
    auto* list = new std::vector<std::string>;
    for (const sync::StrategyDescriptor& d : sync::StrategyDescriptors()) list->push_back(d.name);
    return list;
  }();
  return *types;
}

std::vector<std::string> StrategyParameters(absl::string_view type) {
  const sync::StrategyDescriptor* d = sync::FindStrategyDescriptor(type);
  return d == nullptr ? std::vector<std::string>{} : d->ParamNames();
}

bool UsesParameterServer(absl::string_view type) {
  const sync::StrategyDescriptor* d = sync::FindStrategyDescriptor(type);
  return d != nullptr && d->traits.uses_parameter_server;
}

int PsShardCount(const JobSpec& spec) {
  return UsesParameterServer(spec.strategy.type) ? std::max(spec.ps_shards, 1) : 1;
}

bool IsDnsLabel(absl::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-') return false;
  }
  return name.front() != '-' && name.back() != '-';
}

bool IsDnsSubdomain(absl::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (!IsDnsLabel(label)) return false;
  }
  return true;
}

// spec.topology covers every rank with non-empty nodes; spec.communicator applies to strategies
// that all-reduce (docs/algorithms.md §2).
absl::Status ValidateTopology(const JobSpec& spec) {
  const TopologySpec& t = spec.topology;
  const int world = spec.WorldSize();
  if (t.set()) {
    if (t.workers_per_node != 0 && !t.node_sizes.empty()) {
      return Invalid("spec.topology.nodes", "cannot be combined with spec.topology.workersPerNode");
    }
    if (t.node_sizes.empty()) {
      HPTRAIN_RETURN_IF_ERROR(AtLeast("spec.topology.workersPerNode", t.workers_per_node, 1));
    }
    int covered = 0;
    for (size_t k = 0; k < t.node_sizes.size(); ++k) {
      if (t.node_sizes[k] < 1) {
        return Invalid(absl::StrCat("spec.topology.nodes[", k, "]"), "node ", k,
                       " is empty (every node holds at least one worker), got ", t.node_sizes[k]);
      }
    }
    for (int size : t.NodeSizes(world)) covered += size;
    if (covered != world) {
      return Invalid(t.path(), "the nodes hold ", covered,
                     " workers, but the job has ", world,
                     " (every worker must be on exactly one node)");
    }
  }
  const CommunicatorSpec& c = spec.communicator;
  if (c.compress_inter_node_only && !c.hierarchical) {
    return Invalid("spec.communicator.compressInterNodeOnly",
                   "applies only with spec.communicator.hierarchical: true");
  }
  if (c.hierarchical && UsesParameterServer(spec.strategy.type)) {
    return Invalid("spec.communicator.hierarchical", "strategy ", spec.strategy.type,
                   " exchanges through the parameter server, not the communicator's all-reduce");
  }
  return absl::OkStatus();
}

namespace {

// spec.device against what cuda runs, and spec.communicator.backend: what is known before a
// worker sees its GPUs (ResolveDevice and ResolveBackend decide the rest at start).
absl::Status ValidateDevice(const JobSpec& spec) {
  if (spec.device == "cuda" && spec.scheduler.type == "priority") {
    return Invalid("spec.scheduler.type",
                   "priority is not supported on cuda yet (spec.device: cuda; use cpu, or auto to "
                   "train on cpu)");
  }
  const CommunicatorSpec& c = spec.communicator;
  HPTRAIN_RETURN_IF_ERROR(
      OneOf("spec.communicator.backend", "backend", c.backend, {"auto", "gloo", "nccl"}));
  if (c.backend != "nccl") return absl::OkStatus();
  if (spec.device == "cpu") {
    return Invalid("spec.communicator.backend",
                   "nccl needs the workers on cuda, got spec.device: cpu");
  }
  if (spec.scheduler.type == "priority") {
    return Invalid("spec.communicator.backend", "nccl needs the workers on cuda, where "
                   "spec.scheduler.type priority is not supported yet");
  }
  if (!ExchangesOnDevice(spec.strategy)) {
    return Invalid("spec.communicator.backend", "nccl does not carry strategy ", spec.strategy.type,
                   HostOnlyReason(spec.strategy),
                   ", which exchanges through host memory (use gloo or auto)");
  }
  if (c.hierarchical) {
    return Invalid("spec.communicator.backend",
                   "nccl cannot run spec.communicator.hierarchical, whose all-reduce runs over "
                   "Gloo's transport (use gloo or auto)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateJob(const JobSpec& spec) {
  HPTRAIN_RETURN_IF_ERROR(DnsLabel("metadata.name", spec.name));
  HPTRAIN_RETURN_IF_ERROR(DnsLabel("metadata.namespace", spec.ns));
  HPTRAIN_RETURN_IF_ERROR(ValidateTrainer(spec));
  // The user's program (spec.trainer) needs no model, and a data set only if it reads one.
  if (!spec.trainer.set()) HPTRAIN_RETURN_IF_ERROR(ValidateModel(spec.model));
  if (!spec.trainer.set() || DatasetGiven(spec.dataset)) {
    HPTRAIN_RETURN_IF_ERROR(ValidateDataset(spec.dataset));
  }
  HPTRAIN_RETURN_IF_ERROR(ValidateTaskAndPrecision(spec));
  HPTRAIN_RETURN_IF_ERROR(ValidateStrategy(spec.strategy));
  HPTRAIN_RETURN_IF_ERROR(ValidatePs(spec));
  HPTRAIN_RETURN_IF_ERROR(ValidateScheduler(spec));
  HPTRAIN_RETURN_IF_ERROR(ValidateOptimizer(spec.optimizer));
  if (spec.strategy.type == "multistep" && spec.optimizer.type != "sgd") {
    // Its delayed global update is an SGD step on the round's accumulated gradient.
    return Invalid("spec.optimizer.type", "strategy multistep takes optimizer sgd, got ",
                   spec.optimizer.type);
  }
  HPTRAIN_RETURN_IF_ERROR(ValidateRunKnobs(spec));
  HPTRAIN_RETURN_IF_ERROR(ValidateWorkers(spec));
  HPTRAIN_RETURN_IF_ERROR(ValidateElastic(spec));
  if (!spec.trainer.set() && spec.dataset.name == "synthetic" &&
      spec.dataset.synthetic.samples < spec.WorldSize()) {
    // Each worker reads its own shard of the training set; an empty shard cannot train.
    return Invalid("spec.dataset.synthetic.samples", spec.dataset.synthetic.samples,
                   " samples cannot be split over ", spec.WorldSize(),
                   " workers: every worker needs at least one");
  }
  HPTRAIN_RETURN_IF_ERROR(ValidateTopology(spec));
  HPTRAIN_RETURN_IF_ERROR(ValidateDevice(spec));
  HPTRAIN_RETURN_IF_ERROR(
      ValidateRebalance(spec.rebalance, spec.WorldSize(), spec.global_batch_size));
  HPTRAIN_RETURN_IF_ERROR(ValidateGangScheduling(spec.gang_scheduling));
  // An elastic job's per-worker knobs are per slot.
  return ValidateTesting(spec.testing, spec.Slots());
}

}  // namespace hptrain::job
