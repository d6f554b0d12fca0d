#include "runtime/job/job_parser.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/base/status.h"
#include "runtime/job/job_validate.h"
#include "runtime/sync/strategy_descriptor.h"

namespace hptrain::job {
namespace {

// Errors are built without the source name ("<path>: <reason>"); ParseJobText prefixes it once.
absl::Status FieldError(absl::string_view path, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", reason));
}

// Escaped so that a message always stays on one line.
std::string Quote(absl::string_view text) {
  return absl::StrCat("\"", absl::CHexEscape(text), "\"");
}

bool Absent(const YAML::Node& node) { return !node.IsDefined() || node.IsNull(); }

// How a value reads in "must be X, got <...>".
std::string Describe(const YAML::Node& node) {
  if (Absent(node)) return "null";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a map";
  return Quote(node.Scalar());
}

// yaml-cpp marks quoted scalars with the non-specific tag "!". Kubernetes rejects `epochs: "5"`
// for an integer field, so numbers and booleans must be plain (or explicitly tagged) scalars.
absl::Status PlainScalar(const YAML::Node& node, const std::string& path, absl::string_view what,
                         std::string* text) {
  if (!node.IsScalar())
    return FieldError(path, absl::StrCat("must be ", what, ", got ", Describe(node)));
  if (node.Tag() == "!") {
    return FieldError(
        path, absl::StrCat("must be ", what, ", got the quoted string ", Quote(node.Scalar())));
  }
  *text = node.Scalar();
  return absl::OkStatus();
}

absl::Status Convert(const YAML::Node& node, const std::string& path, std::string* out) {
  if (!node.IsScalar())
    return FieldError(path, absl::StrCat("must be a string, got ", Describe(node)));
  *out = node.Scalar();
  return absl::OkStatus();
}

absl::Status Convert(const YAML::Node& node, const std::string& path, bool* out) {
  std::string text;
  HPTRAIN_RETURN_IF_ERROR(PlainScalar(node, path, "true or false", &text));
  if (!YAML::convert<bool>::decode(node, *out)) {
    return FieldError(path, absl::StrCat("must be true or false, got ", Quote(text)));
  }
  return absl::OkStatus();
}

absl::Status Convert(const YAML::Node& node, const std::string& path, double* out) {
  std::string text;
  HPTRAIN_RETURN_IF_ERROR(PlainScalar(node, path, "a number", &text));
  if (!absl::SimpleAtod(text, out)) {
    return FieldError(path, absl::StrCat("must be a number, got ", Quote(text)));
  }
  if (!std::isfinite(*out)) {
    return FieldError(path, absl::StrCat("must be a finite number, got ", Quote(text)));
  }
  return absl::OkStatus();
}

template <typename Int,
          typename = std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>>>
absl::Status Convert(const YAML::Node& node, const std::string& path, Int* out) {
  std::string text;
  HPTRAIN_RETURN_IF_ERROR(PlainScalar(node, path, "an integer", &text));
  if (std::is_unsigned_v<Int> && absl::StartsWith(text, "-")) {
    return FieldError(path, absl::StrCat("must be a non-negative integer, got ", Quote(text)));
  }
  if (absl::SimpleAtoi(text, out)) return absl::OkStatus();
  absl::string_view digits = absl::StripPrefix(absl::StripPrefix(text, "-"), "+");
  bool all_digits =
      !digits.empty() && std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit);
  return FieldError(path, absl::StrCat(all_digits ? "integer out of range" : "must be an integer",
                                       ", got ", Quote(text)));
}

// Re-emits a template as block YAML. Quoted scalars stay quoted: a pod template's
// `value: "8"` must not come back as the integer 8.
void EmitNode(const YAML::Node& node, YAML::Emitter* out) {
  if (node.IsMap()) {
    *out << YAML::BeginMap;
    for (const auto& entry : node) {
      *out << YAML::Key;
      EmitNode(entry.first, out);
      *out << YAML::Value;
      EmitNode(entry.second, out);
    }
    *out << YAML::EndMap;
  } else if (node.IsSequence()) {
    *out << YAML::BeginSeq;
    for (const auto& item : node) EmitNode(item, out);
    *out << YAML::EndSeq;
  } else if (node.IsScalar()) {
    const std::string& tag = node.Tag();
    if (tag == "!") {
      *out << YAML::DoubleQuoted;
    } else if (!tag.empty() && tag != "?") {
      *out << YAML::VerbatimTag(tag);
    }
    *out << node.Scalar();
  } else {
    *out << YAML::Null;
  }
}

// Reads the fields of one YAML map, remembering which keys were asked for so that Finish() can
// reject the others. The first error sticks and later reads do nothing, which keeps the
// per-section functions below free of error plumbing.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path) : node_(node), path_(std::move(path)) {
    is_map_ = node_.IsDefined() && node_.IsMap();
    if (!Absent(node_) && !is_map_) {
      status_ = FieldError(path_.empty() ? "document" : path_,
                           absl::StrCat("must be a map, got ", Describe(node_)));
    }
  }

  // Inside metadata any key is accepted.
  void AllowUnknownKeys() { allow_unknown_ = true; }

  std::string PathOf(absl::string_view key) const {
    return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  }

  // The value under `key`; an undefined node when the key is missing or after an error.
  YAML::Node Child(const char* key) {
    known_.push_back(key);
    if (!status_.ok() || !is_map_) return YAML::Node(YAML::NodeType::Undefined);
    return node_[key];
  }

  // Scalars and lists of scalars; `*out` keeps its default when the key is absent or null.
  template <typename T>
  void Read(const char* key, T* out) {
    YAML::Node value = Child(key);
    if (Absent(value)) return;
    T parsed{};
    Merge(Convert(value, PathOf(key), &parsed));
    if (status_.ok()) *out = std::move(parsed);
  }

  template <typename T>
  void Read(const char* key, std::optional<T>* out) {
    YAML::Node value = Child(key);
    if (Absent(value)) return;
    T parsed{};
    Merge(Convert(value, PathOf(key), &parsed));
    if (status_.ok()) *out = parsed;
  }

  template <typename T>
  void Read(const char* key, std::vector<T>* out) {
    YAML::Node value = Child(key);
    if (Absent(value)) return;
    if (!value.IsSequence()) {
      Merge(FieldError(PathOf(key), absl::StrCat("must be a list, got ", Describe(value))));
      return;
    }
    std::vector<T> parsed(value.size());
    for (size_t i = 0; i < parsed.size() && status_.ok(); ++i) {
      Merge(Convert(value[i], absl::StrCat(PathOf(key), "[", i, "]"), &parsed[i]));
    }
    if (status_.ok()) *out = std::move(parsed);
  }

  // A pod template: any map, kept as YAML text.
  void Template(const char* key, std::string* out) {
    YAML::Node value = Child(key);
    if (Absent(value)) return;
    if (!value.IsMap()) {
      Merge(FieldError(PathOf(key), absl::StrCat("must be a map, got ", Describe(value))));
      return;
    }
    YAML::Emitter emitter;
    EmitNode(value, &emitter);
    if (!emitter.good()) {
      Merge(FieldError(PathOf(key), absl::StrCat("cannot re-emit: ", emitter.GetLastError())));
      return;
    }
    *out = std::string(emitter.c_str()) + "\n";
  }

  void Merge(absl::Status status) {
    if (status_.ok()) status_ = std::move(status);
  }

  // The first error, else the first duplicate or unknown key, else OK.
  absl::Status Finish() {
    if (!status_.ok() || !is_map_) return status_;
    std::set<std::string> seen;
    for (const auto& entry : node_) {
      if (!entry.first.IsScalar()) {
        return FieldError(path_.empty() ? "document" : path_, "keys must be strings");
      }
      const std::string& key = entry.first.Scalar();
      if (!seen.insert(key).second) return FieldError(PathOf(key), "duplicate key");
      if (allow_unknown_ || std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      return FieldError(PathOf(key), absl::StrCat("unknown field (expected one of ",
                                                  absl::StrJoin(known_, ", "), ")"));
    }
    return absl::OkStatus();
  }

 private:
  const YAML::Node node_;
  const std::string path_;
  bool is_map_ = false;
  bool allow_unknown_ = false;
  std::vector<std::string> known_;
  absl::Status status_;
};

absl::Status ParseModel(const YAML::Node& node, ModelSpec* model) {
  MapReader r(node, "spec.model");
  r.Read("name", &model->name);
  r.Read("torchscript", &model->torchscript);
  r.Read("hidden", &model->hidden);
  return r.Finish();
}

// spec.trainer: the user's program. Written at all, it needs a command; an empty one would
// silently run the built-in trainer instead.
absl::Status ParseTrainer(const YAML::Node& node, TrainerSpec* trainer) {
  MapReader r(node, "spec.trainer");
  r.Read("command", &trainer->command);
  r.Read("args", &trainer->args);
  r.Read("workingDir", &trainer->working_dir);
  HPTRAIN_RETURN_IF_ERROR(r.Finish());
  if (!Absent(node) && trainer->command.empty()) {
    return FieldError("spec.trainer.command",
                      "required: the program to run and its fixed arguments, e.g. "
                      "[python3, train.py]");
  }
  return absl::OkStatus();
}

absl::Status ParseAugment(const YAML::Node& node, AugmentSpec* augment) {
  MapReader r(node, "spec.dataset.augment");
  YAML::Node crop = r.Child("randomCrop");
  r.Read("horizontalFlip", &augment->horizontal_flip);
  YAML::Node resized = r.Child("randomResizedCrop");
  HPTRAIN_RETURN_IF_ERROR(r.Finish());
  MapReader c(crop, "spec.dataset.augment.randomCrop");
  c.Read("size", &augment->random_crop.size);
  c.Read("padding", &augment->random_crop.padding);
  HPTRAIN_RETURN_IF_ERROR(c.Finish());
  if (!Absent(crop) && augment->random_crop.size == 0) {
    return FieldError("spec.dataset.augment.randomCrop.size", "required");
  }
  MapReader z(resized, "spec.dataset.augment.randomResizedCrop");
  z.Read("size", &augment->random_resized_crop.size);
  z.Read("scale", &augment->random_resized_crop.scale);
  z.Read("ratio", &augment->random_resized_crop.ratio);
  HPTRAIN_RETURN_IF_ERROR(z.Finish());
  if (!Absent(resized) && augment->random_resized_crop.size == 0) {
    return FieldError("spec.dataset.augment.randomResizedCrop.size", "required");
  }
  return absl::OkStatus();
}

absl::Status ParseDataset(const YAML::Node& node, DatasetSpec* dataset) {
  MapReader r(node, "spec.dataset");
  r.Read("name", &dataset->name);
  r.Read("path", &dataset->path);
  r.Read("format", &dataset->format);
  r.Read("layout", &dataset->layout);
  r.Read("normalize", &dataset->normalize);
  r.Read("mean", &dataset->mean);
  r.Read("std", &dataset->std);
  r.Read("imageSize", &dataset->image_size);
  r.Read("channels", &dataset->channels);
  r.Read("classes", &dataset->classes);
  r.Read("skipCorrupt", &dataset->skip_corrupt);
  YAML::Node augment = r.Child("augment");
  YAML::Node synthetic = r.Child("synthetic");
  HPTRAIN_RETURN_IF_ERROR(r.Finish());
  HPTRAIN_RETURN_IF_ERROR(ParseAugment(augment, &dataset->augment));
  if (Absent(synthetic)) return absl::OkStatus();

  MapReader s(synthetic, "spec.dataset.synthetic");
  s.Read("samples", &dataset->synthetic.samples);
  s.Read("testSamples", &dataset->synthetic.test_samples);
  s.Read("shape", &dataset->synthetic.shape);
  s.Read("classes", &dataset->synthetic.classes);
  HPTRAIN_RETURN_IF_ERROR(s.Finish());
  if (dataset->name != "synthetic") {
    return FieldError(
        "spec.dataset.synthetic",
        absl::StrCat("applies only to dataset \"synthetic\", got ", Quote(dataset->name)));
  }
  return absl::OkStatus();
}

// One strategy parameter's value, converted to the type its descriptor declares.
absl::Status ParseOption(const sync::ParamSpec& param, const YAML::Node& node,
                         const std::string& path, const std::string& name,
                         StrategySpec* strategy) {
  switch (param.type) {
    case sync::ParamType::kBoolean: {
      bool value = false;
      HPTRAIN_RETURN_IF_ERROR(Convert(node, path, &value));
      strategy->Set(name, value);
      return absl::OkStatus();
    }
    case sync::ParamType::kInteger: {
      int64_t value = 0;
      HPTRAIN_RETURN_IF_ERROR(Convert(node, path, &value));
      strategy->Set(name, value);
      return absl::OkStatus();
    }
    case sync::ParamType::kNumber: {
      double value = 0;
      HPTRAIN_RETURN_IF_ERROR(Convert(node, path, &value));
      strategy->Set(name, value);
      return absl::OkStatus();
    }
    case sync::ParamType::kEnum:
    case sync::ParamType::kString: {
      std::string value;
      HPTRAIN_RETURN_IF_ERROR(Convert(node, path, &value));
      strategy->Set(name, value);
      return absl::OkStatus();
    }
    case sync::ParamType::kIntegerOrString: {
      // A plain integer, else a word some strategy takes (or, where the parameter lists its
      // values, any string, which validation checks against them).
      int64_t number = 0;
      if (node.IsScalar() && node.Tag() != "!" && absl::SimpleAtoi(node.Scalar(), &number)) {
        strategy->Set(name, number);
        return absl::OkStatus();
      }
      bool word = !param.enum_values.empty();
      for (const sync::StrategyDescriptor& d : sync::StrategyDescriptors()) {
        const sync::ParamSpec* p = d.Param(param.name);
        if (p != nullptr && node.IsScalar() &&
            std::find(p->words.begin(), p->words.end(), node.Scalar()) != p->words.end()) {
          word = true;
        }
      }
      if (word) {
        std::string value;
        HPTRAIN_RETURN_IF_ERROR(Convert(node, path, &value));
        strategy->Set(name, value);
        return absl::OkStatus();
      }
      HPTRAIN_RETURN_IF_ERROR(Convert(node, path, &number));
      strategy->Set(name, number);
      return absl::OkStatus();
    }
    case sync::ParamType::kObject: {
      MapReader r(node, path);
      for (const sync::ParamSpec& field : param.fields) {
        YAML::Node value = r.Child(field.name.c_str());
        if (Absent(value)) continue;
        r.Merge(ParseOption(field, value, r.PathOf(field.name),
                            absl::StrCat(name, ".", field.name), strategy));
      }
      return r.Finish();
    }
  }
  return absl::OkStatus();
}

// spec.strategy: `type` and the parameters of every strategy descriptor
// (runtime/sync/strategy_descriptor.h); whether the type takes them is ValidateJob's to say.
absl::Status ParseStrategy(const YAML::Node& node, StrategySpec* strategy) {
  MapReader r(node, "spec.strategy");
  r.Read("type", &strategy->type);
  for (const sync::ParamSpec* param : sync::AllStrategyParams()) {
    YAML::Node value = r.Child(param->name.c_str());
    if (Absent(value)) continue;
    r.Merge(ParseOption(*param, value, r.PathOf(param->name), param->name, strategy));
  }
  return r.Finish();
}

// spec.scheduler. The struct keeps 0 for "unset", so a 0 written in the document is refused here,
// as the CRD's minimum of 1 refuses it on Kubernetes, instead of silently meaning the default.
absl::Status ParseScheduler(const YAML::Node& node, ExchangeSchedulerSpec* scheduler) {
  MapReader r(node, "spec.scheduler");
  r.Read("type", &scheduler->type);
  std::optional<int64_t> partition;
  std::optional<int64_t> credit;
  r.Read("partitionElements", &partition);
  r.Read("creditElements", &credit);
  HPTRAIN_RETURN_IF_ERROR(r.Finish());
  const std::pair<const char*, std::optional<int64_t>> given[] = {
      {"spec.scheduler.partitionElements", partition}, {"spec.scheduler.creditElements", credit}};
  for (const auto& [path, value] : given) {
    if (value.has_value() && *value < 1) {
      return FieldError(path, absl::StrCat("must be >= 1, got ", *value));
    }
  }
  scheduler->partition_elements = partition.value_or(0);
  scheduler->credit_elements = credit.value_or(0);
  return absl::OkStatus();
}

absl::Status ParseOptimizer(const YAML::Node& node, OptimizerSpec* optimizer) {
  MapReader r(node, "spec.optimizer");
  r.Read("type", &optimizer->type);
  r.Read("lr", &optimizer->lr);
  r.Read("momentum", &optimizer->momentum);
  r.Read("weightDecay", &optimizer->weight_decay);
  r.Read("nesterov", &optimizer->nesterov);
  std::vector<double> betas;
  r.Read("betas", &betas);
  r.Read("eps", &optimizer->eps);
  YAML::Node schedule = r.Child("schedule");
  HPTRAIN_RETURN_IF_ERROR(r.Finish());
  if (!betas.empty()) {
    if (betas.size() != 2) {
      return FieldError(
          "spec.optimizer.betas",
          absl::StrCat("must be a list of 2 numbers [beta1, beta2], got ", betas.size()));
    }
    optimizer->beta1 = betas[0];
    optimizer->beta2 = betas[1];
  }

  MapReader s(schedule, "spec.optimizer.schedule");
  s.Read("type", &optimizer->schedule.type);
  s.Read("warmupEpochs", &optimizer->schedule.warmup_epochs);
  s.Read("stepSize", &optimizer->schedule.step_size);
  s.Read("gamma", &optimizer->schedule.gamma);
  s.Read("minLr", &optimizer->schedule.min_lr);
  return s.Finish();
}

// spec.workers {replicas, template} is shorthand for one group named "worker".
absl::Status ParseWorkers(const YAML::Node& groups, const YAML::Node& workers,
                          std::vector<WorkerGroupSpec>* out) {
  if (!Absent(workers)) {
    if (!Absent(groups)) {
      return FieldError("spec.workers",
                        "cannot be combined with spec.workerGroups (use one of them)");
    }
    WorkerGroupSpec group;
    group.name = "worker";
    MapReader r(workers, "spec.workers");
    r.Read("replicas", &group.replicas);
    r.Template("template", &group.template_yaml);
    HPTRAIN_RETURN_IF_ERROR(r.Finish());
    out->push_back(std::move(group));
    return absl::OkStatus();
  }
  if (Absent(groups)) return absl::OkStatus();
  if (!groups.IsSequence()) {
    return FieldError("spec.workerGroups", absl::StrCat("must be a list, got ", Describe(groups)));
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    WorkerGroupSpec group;
    MapReader r(groups[i], absl::StrCat("spec.workerGroups[", i, "]"));
    r.Read("name", &group.name);
    r.Read("replicas", &group.replicas);
    r.Read("batchSize", &group.batch_size);
    r.Template("template", &group.template_yaml);
    HPTRAIN_RETURN_IF_ERROR(r.Finish());
    out->push_back(std::move(group));
  }
  return absl::OkStatus();
}

// spec.topology: workersPerNode (every node that many consecutive ranks) or nodes (the workers
// of each node in rank order).
absl::Status ParseTopology(const YAML::Node& node, TopologySpec* topology) {
  MapReader r(node, "spec.topology");
  r.Read("workersPerNode", &topology->workers_per_node);
  r.Read("nodes", &topology->node_sizes);
  return r.Finish();
}

absl::Status ParseSpec(const YAML::Node& node, JobSpec* spec) {
  MapReader r(node, "spec");
  YAML::Node trainer = r.Child("trainer");
  YAML::Node model = r.Child("model");
  YAML::Node dataset = r.Child("dataset");
  YAML::Node strategy = r.Child("strategy");
  YAML::Node optimizer = r.Child("optimizer");
  r.Read("globalBatchSize", &spec->global_batch_size);
  r.Read("epochs", &spec->epochs);
  r.Read("maxSteps", &spec->max_steps);
  r.Read("evalEverySteps", &spec->eval_every_steps);
  r.Read("task", &spec->task);
  r.Read("precision", &spec->precision);
  r.Read("seed", &spec->seed);
  r.Read("device", &spec->device);
  r.Read("deterministic", &spec->deterministic);
  r.Read("threads", &spec->threads);
  r.Read("bucketMiB", &spec->bucket_mib);
  YAML::Node worker_groups = r.Child("workerGroups");
  YAML::Node workers = r.Child("workers");
  YAML::Node ps = r.Child("ps");
  YAML::Node rebalance = r.Child("rebalance");
  YAML::Node checkpoint = r.Child("checkpoint");
  YAML::Node collect = r.Child("collect");
  YAML::Node run_policy = r.Child("runPolicy");
  YAML::Node security = r.Child("security");
  YAML::Node testing = r.Child("testing");
  r.Read("schedulerName", &spec->scheduler_name);
  YAML::Node gang = r.Child("gangScheduling");
  YAML::Node scheduler = r.Child("scheduler");
  YAML::Node topology = r.Child("topology");
  YAML::Node communicator = r.Child("communicator");
  YAML::Node elastic = r.Child("elastic");
  HPTRAIN_RETURN_IF_ERROR(r.Finish());

  if (!Absent(elastic)) {
    spec->elastic.enabled = true;
    MapReader el(elastic, "spec.elastic");
    el.Read("minReplicas", &spec->elastic.min_replicas);
    el.Read("maxReplicas", &spec->elastic.max_replicas);
    el.Read("joinTimeoutSeconds", &spec->elastic.join_timeout_seconds);
    HPTRAIN_RETURN_IF_ERROR(el.Finish());
  }

  MapReader g(gang, "spec.gangScheduling");
  g.Read("enabled", &spec->gang_scheduling.enabled);
  g.Read("provider", &spec->gang_scheduling.provider);
  g.Read("queue", &spec->gang_scheduling.queue);
  g.Read("priorityClassName", &spec->gang_scheduling.priority_class_name);
  HPTRAIN_RETURN_IF_ERROR(g.Finish());

  HPTRAIN_RETURN_IF_ERROR(ParseTrainer(trainer, &spec->trainer));
  HPTRAIN_RETURN_IF_ERROR(ParseModel(model, &spec->model));
  HPTRAIN_RETURN_IF_ERROR(ParseDataset(dataset, &spec->dataset));
  HPTRAIN_RETURN_IF_ERROR(ParseStrategy(strategy, &spec->strategy));
  HPTRAIN_RETURN_IF_ERROR(ParseOptimizer(optimizer, &spec->optimizer));
  HPTRAIN_RETURN_IF_ERROR(ParseScheduler(scheduler, &spec->scheduler));
  HPTRAIN_RETURN_IF_ERROR(ParseWorkers(worker_groups, workers, &spec->worker_groups));
  HPTRAIN_RETURN_IF_ERROR(ParseTopology(topology, &spec->topology));

  MapReader cm(communicator, "spec.communicator");
  cm.Read("hierarchical", &spec->communicator.hierarchical);
  cm.Read("compressInterNodeOnly", &spec->communicator.compress_inter_node_only);
  cm.Read("backend", &spec->communicator.backend);
  HPTRAIN_RETURN_IF_ERROR(cm.Finish());

  MapReader p(ps, "spec.ps");
  p.Read("shards", &spec->ps_shards);
  p.Template("template", &spec->ps_template_yaml);
  HPTRAIN_RETURN_IF_ERROR(p.Finish());

  MapReader rb(rebalance, "spec.rebalance");
  rb.Read("enabled", &spec->rebalance.enabled);
  rb.Read("intervalSeconds", &spec->rebalance.interval_seconds);
  rb.Read("intervalSteps", &spec->rebalance.interval_steps);
  rb.Read("minBatch", &spec->rebalance.min_batch);
  rb.Read("maxBatch", &spec->rebalance.max_batch);
  rb.Read("hysteresis", &spec->rebalance.hysteresis);
  HPTRAIN_RETURN_IF_ERROR(rb.Finish());

  MapReader c(checkpoint, "spec.checkpoint");
  c.Read("path", &spec->checkpoint.path);
  c.Read("intervalSteps", &spec->checkpoint.interval_steps);
  c.Template("volume", &spec->checkpoint.volume_yaml);
  HPTRAIN_RETURN_IF_ERROR(c.Finish());

  MapReader co(collect, "spec.collect");
  co.Read("path", &spec->collect.path);
  co.Read("every", &spec->collect.every);
  co.Read("samples", &spec->collect.samples);
  co.Read("windowEvery", &spec->collect.window_every);
  co.Read("windowLength", &spec->collect.window_length);
  HPTRAIN_RETURN_IF_ERROR(co.Finish());

  MapReader rp(run_policy, "spec.runPolicy");
  rp.Read("restartPolicy", &spec->run_policy.restart_policy);
  rp.Read("backoffLimit", &spec->run_policy.backoff_limit);
  rp.Read("activeDeadlineSeconds", &spec->run_policy.active_deadline_seconds);
  rp.Read("ttlSecondsAfterFinished", &spec->run_policy.ttl_seconds_after_finished);
  rp.Read("suspend", &spec->run_policy.suspend);
  rp.Read("peerTimeoutSeconds", &spec->run_policy.peer_timeout_seconds);
  HPTRAIN_RETURN_IF_ERROR(rp.Finish());

  MapReader sec(security, "spec.security");
  YAML::Node tls = sec.Child("tls");
  HPTRAIN_RETURN_IF_ERROR(sec.Finish());
  MapReader tl(tls, "spec.security.tls");
  tl.Read("enabled", &spec->security.tls.enabled);
  tl.Read("secretName", &spec->security.tls.secret_name);
  tl.Read("mutual", &spec->security.tls.mutual);
  HPTRAIN_RETURN_IF_ERROR(tl.Finish());

  MapReader t(testing, "spec.testing");
  t.Read("slowdown", &spec->testing.slowdown);
  t.Read("slowdownFile", &spec->testing.slowdown_file);
  t.Read("slowdownWindow", &spec->testing.slowdown_window);
  t.Read("devicePath", &spec->testing.device_path);
  t.Read("cudnn", &spec->testing.cudnn);
  t.Read("lossScaling", &spec->testing.loss_scaling);
  t.Read("infGradientStep", &spec->testing.inf_gradient_step);
  t.Read("infGradientRank", &spec->testing.inf_gradient_rank);
  return t.Finish();
}

absl::Status ParseRoot(const YAML::Node& root, JobSpec* spec) {
  MapReader r(root, "");
  std::string api_version;
  std::string kind;
  r.Read("apiVersion", &api_version);
  r.Read("kind", &kind);
  YAML::Node metadata = r.Child("metadata");
  YAML::Node spec_node = r.Child("spec");
  r.Child("status");  // present in `kubectl get -o yaml` output; not ours to read
  HPTRAIN_RETURN_IF_ERROR(r.Finish());
  if (api_version != kApiVersion) {
    return FieldError("apiVersion",
                      absl::StrCat("must be \"", kApiVersion, "\", got ",
                                   api_version.empty() ? "nothing" : Quote(api_version)));
  }
  if (kind != kKind) {
    return FieldError("kind", absl::StrCat("must be \"", kKind, "\", got ",
                                           kind.empty() ? "nothing" : Quote(kind)));
  }

  MapReader m(metadata, "metadata");
  m.AllowUnknownKeys();
  m.Read("name", &spec->name);
  m.Read("namespace", &spec->ns);
  for (const char* key : {"labels", "annotations"}) {
    YAML::Node value = m.Child(key);
    if (!Absent(value) && !value.IsMap()) {
      m.Merge(FieldError(m.PathOf(key), absl::StrCat("must be a map, got ", Describe(value))));
    }
  }
  HPTRAIN_RETURN_IF_ERROR(m.Finish());

  if (Absent(spec_node)) return FieldError("spec", "required");
  return ParseSpec(spec_node, spec);
}

// Defaults that depend on other fields (job_parser.h, step 4).
void ApplyDefaults(JobSpec* spec) {
  DatasetSpec& dataset = spec->dataset;
  if (dataset.path.empty() && (dataset.name == "fashion-mnist" || dataset.name == "mnist")) {
    dataset.path = absl::StrCat("/usr/share/datasets/", dataset.name);
  }
  if (dataset.format.empty()) {
    if (dataset.name == "fashion-mnist" || dataset.name == "mnist") dataset.format = "idx";
    if (dataset.name == "cifar10" || dataset.name == "cifar100") dataset.format = "cifar-binary";
    if (dataset.name == "synthetic") dataset.format = "synthetic";
  }
  if (spec->model.name == "mlp" && spec->model.hidden.empty()) spec->model.hidden = {256, 128};
}

// Applies one `dotted.path=value` override to the tree (job_parser.h).
absl::Status ApplyOverride(const std::string& override_text, YAML::Node* root) {
  auto malformed = [&](absl::string_view reason) {
    return FieldError(absl::StrCat("--set ", Quote(override_text)), reason);
  };
  size_t eq = override_text.find('=');
  if (eq == std::string::npos) return malformed("expected dotted.path=value");
  std::vector<std::string> parts = absl::StrSplit(override_text.substr(0, eq), '.');
  for (const std::string& part : parts) {
    if (part.empty()) return malformed("empty path component");
  }
  std::string value_text = override_text.substr(eq + 1);
  YAML::Node value;
  try {
    value = value_text.empty() ? YAML::Node(std::string()) : YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    return malformed(absl::StrCat("malformed value: ", e.msg));
  }

  // `current` is re-pointed with reset(): assigning one Node to another would copy the value
  // into the tree instead.
  YAML::Node current = *root;
  std::string at;  // the path walked so far, for messages
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    bool last = i + 1 == parts.size();
    if (current.IsDefined() && current.IsSequence()) {
      size_t index = 0;
      if (!absl::SimpleAtoi(part, &index)) {
        return malformed(absl::StrCat(at, " is a list; ", Quote(part), " is not an index"));
      }
      if (index > current.size()) {
        return malformed(absl::StrCat(at, ".", index, " is out of range (the list has ",
                                      current.size(), " items)"));
      }
      if (index == current.size()) {
        current.push_back(last ? value : YAML::Node(YAML::NodeType::Map));
      } else if (last) {
        current[index] = value;
      }
      if (!last) current.reset(current[index]);
    } else if (!current.IsDefined() || current.IsNull() || current.IsMap()) {
      if (last) {
        current[part] = value;
      } else {
        current.reset(current[part]);
      }
    } else {
      return malformed(
          absl::StrCat(at.empty() ? "the document" : at, " is a scalar, not a map or list"));
    }
    at = at.empty() ? part : absl::StrCat(at, ".", part);
  }
  return absl::OkStatus();
}

// Where yaml-cpp stops advancing in `text`, if it does. yaml-cpp 0.7 does not consume a ','
// outside a flow collection at the start of a document (a file that is just ","): it reports an
// empty document at the same place again and again, and YAML::LoadAll never returns while its
// memory grows. A document that starts where the previous one did is that case.
class StuckDocumentFinder : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (documents_++ > 0 && mark.pos == last_.pos) stuck_ = true;
    last_ = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  // Throws YAML::ParserException for malformed YAML, as LoadAll would.
  static std::optional<YAML::Mark> Find(const std::string& text) {
    std::istringstream stream(text);
    YAML::Parser parser(stream);
    StuckDocumentFinder finder;
    while (parser.HandleNextDocument(finder)) {
      if (finder.stuck_) return finder.last_;
    }
    return std::nullopt;
  }

 private:
  int documents_ = 0;
  bool stuck_ = false;
  YAML::Mark last_;
};

absl::StatusOr<JobSpec> ParseYaml(const std::string& text,
                                  const std::vector<std::string>& overrides,
                                  const std::string& source) {
  std::vector<YAML::Node> documents;
  try {
    if (std::optional<YAML::Mark> stuck = StuckDocumentFinder::Find(text)) {
      const size_t at = static_cast<size_t>(stuck->pos);
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", stuck->line + 1, ":", stuck->column + 1, ": malformed YAML: unexpected ",
          at < text.size() ? absl::StrCat("'", absl::CEscape(text.substr(at, 1)), "'")
                           : std::string("end of input"),
          " at the start of a document"));
    }
    documents = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", e.mark.line + 1, ":",
                                                   e.mark.column + 1, ": malformed YAML: ", e.msg));
  }
  if (documents.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected one YAML document, found ", documents.size()));
  }
  YAML::Node root = documents.empty() ? YAML::Node() : documents[0];
  // A default-constructed Node has no storage yet, so overrides could not grow it in place.
  if (Absent(root)) root = YAML::Node(YAML::NodeType::Map);

  for (const std::string& override_text : overrides) {
    HPTRAIN_RETURN_IF_ERROR(ApplyOverride(override_text, &root), source);
  }
  JobSpec spec;
  HPTRAIN_RETURN_IF_ERROR(ParseRoot(root, &spec), source);
  ApplyDefaults(&spec);
  HPTRAIN_RETURN_IF_ERROR(ValidateJob(spec), source);
  return spec;
}

}  // namespace

absl::StatusOr<JobSpec> ParseJobText(const std::string& text,
                                     const std::vector<std::string>& overrides,
                                     const std::string& source_name) {
  // ParseYaml catches what it expects; this is the adapter's backstop so that no yaml-cpp
  // exception (a bad conversion or subscript we did not foresee) leaves the module.
  try {
    return ParseYaml(text, overrides, source_name);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", e.msg));
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
}

absl::StatusOr<JobSpec> ParseJobFile(const std::string& path,
                                     const std::vector<std::string>& overrides) {
  auto file_error = [&path](int err) -> absl::Status {
    switch (err) {
      case ENOENT:
        return absl::NotFoundError(absl::StrCat(path, ": no such file"));
      case EACCES:
        return absl::PermissionDeniedError(absl::StrCat(path, ": permission denied"));
      case EISDIR:
        return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory"));
      default:
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::strerror(err)));
    }
  };
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return file_error(errno);
  std::string text;
  char buffer[8192];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  int err = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (err != 0) return file_error(err);
  return ParseJobText(text, overrides, path);
}

}  // namespace hptrain::job
