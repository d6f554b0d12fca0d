// The built-in strategy descriptors: the one place where a strategy's parameters are defined
// (strategy_descriptor.h). docs/algorithms.md explains each algorithm.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/sync/strategy_descriptor.h"
#include "runtime/sync/strategy_options.h"

namespace hptrain::sync {
namespace {

using P = ParamType;

template <typename... Args>
absl::Status Invalid(absl::string_view path, absl::string_view field, const Args&... reason) {
  return absl::InvalidArgumentError(absl::StrCat(path, ".", field, ": ", reason...));
}

ParamSpec Param(std::string name, ParamType type, std::string doc) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = type;
  p.doc = std::move(doc);
  return p;
}

ParamSpec AtLeast(ParamSpec p, double min) {
  p.range.min = min;
  return p;
}

ParamSpec OpenClosedUnit(ParamSpec p) {
  p.range.min = 0;
  p.range.min_exclusive = true;
  p.range.max = 1;
  return p;
}

template <typename T>
ParamSpec Default(ParamSpec p, T value) {
  if constexpr (std::is_same_v<T, bool>) {
    p.default_value = OptionValue(value);
  } else if constexpr (std::is_integral_v<T>) {
    p.default_value = OptionValue(static_cast<int64_t>(value));
  } else if constexpr (std::is_floating_point_v<T>) {
    p.default_value = OptionValue(static_cast<double>(value));
  } else {
    p.default_value = OptionValue(std::string(value));
  }
  return p;
}

ParamSpec Enum(ParamSpec p, std::vector<std::string> values, std::string noun) {
  p.enum_values = std::move(values);
  p.enum_noun = std::move(noun);
  return p;
}

std::vector<ParamSpec> BuildCatalogue() {
  std::vector<ParamSpec> c;
  ParamSpec bits = Param("bits", P::kIntegerOrString,
                         "bits per gradient element on the wire: 1, 2, 4, 8, 16 (fp16), 32 "
                         "(uncompressed) or dynamic (fp32 for probeSteps steps, then 8 bits or 32 "
                         "from the measured times, then chosen per epoch)");
  bits.enum_values = {"1", "2", "4", "8", "16", "32", "dynamic"};
  bits.words = {"dynamic"};
  c.push_back(Default(bits, 8));
  c.push_back(Default(AtLeast(Param("bucketSize", P::kInteger,
                                    "elements per quantization bucket (one scale per bucket)"),
                              1),
                      512));
  // Each sparsifying strategy gives its own default (With below).
  c.push_back(OpenClosedUnit(Param("density", P::kNumber, "fraction of gradient elements sent")));
  c.push_back(Default(Param("errorFeedback", P::kBoolean,
                            "add the compression error to the next step's gradient"),
                      true));
  ParamSpec interval = AtLeast(
      Param("interval", P::kIntegerOrString, "local steps between exchanges"), 1);
  interval.cel = {{"type(self) == int ? self != 0 : self == 'adaptive'",
                   "must be a non-zero integer or adaptive (leave interval out for the default)",
                   ""}};
  c.push_back(interval);
  c.push_back(Default(AtLeast(Param("warmupEpochs", P::kNumber,
                                    "epochs of dense (uncompressed, every-step) exchange first"),
                              0),
                      0.0));
  c.push_back(Default(AtLeast(Param("hMin", P::kInteger,
                                    "adaptive interval: the smallest interval"),
                              1),
                      1));
  c.push_back(Default(AtLeast(Param("hMax", P::kInteger,
                                    "adaptive interval: the largest interval"),
                              1),
                      32));
  c.push_back(Default(AtLeast(Param("mu", P::kNumber,
                                    "proximal correction: the pull of every local step toward "
                                    "the last global model"),
                              0),
                      0.0));
  c.push_back(Default(Enum(Param("update", P::kEnum,
                                 "how a round of local steps ends: average (the workers' models "
                                 "averaged) or delayed (one global step with the round's summed "
                                 "gradients)"),
                           {"average", "delayed"}, "update"),
                      "average"));
  ParamSpec delay = Param("delay", P::kInteger,
                          "rounds the global update may lag behind the local steps (0 or 1)");
  delay.enum_values = {"0", "1"};
  c.push_back(Default(delay, 0));
  ParamSpec compression = Param("compression", P::kObject,
                                "how the round's all-reduce of the accumulated gradients is "
                                "encoded, with error feedback");
  compression.fields.push_back(
      Default(Enum(Param("type", P::kEnum,
                         "none (fp32), quantized (bucketed stochastic uniform quantization) or "
                         "fp16 (IEEE half)"),
                   {"none", "quantized", "fp16"}, "compression"),
              "none"));
  ParamSpec compression_bits =
      Param("bits", P::kInteger, "quantized: bits per element on the wire");
  compression_bits.enum_values = {"1", "2", "4", "8"};
  compression.fields.push_back(Default(compression_bits, 8));
  compression.cel = {{"!has(self.bits) || (has(self.type) && self.type == 'quantized')",
                      "spec.strategy.compression.bits applies only to compression type quantized",
                      ".bits"}};
  c.push_back(compression);
  c.push_back(Default(AtLeast(Param("clipNorm", P::kNumber,
                                    "local gradient clipping, the bound on the global gradient "
                                    "norm; 0 = off"),
                              0),
                      0.0));
  c.push_back(Default(Param("momentumMasking", P::kBoolean,
                            "clear the local momentum of the elements sent, as DGC does"),
                      true));
  c.push_back(Default(Enum(Param("sparseEncoding", P::kEnum,
                                 "how the (index, value) pairs travel: pairs (8 bytes each) or "
                                 "compact (4 bytes each)"),
                           {"pairs", "compact"}, "sparse encoding"),
                      "pairs"));
  c.push_back(Default(AtLeast(Param("threshold", P::kNumber,
                                    "θ, the relative change of the model since the last exchange "
                                    "that requests the next one; setting it turns "
                                    "self-calibration off (the default applies with calibrate: "
                                    "false)"),
                              0),
                      0.01));
  c.push_back(Default(AtLeast(Param("maxInterval", P::kInteger,
                                    "T_max, local steps after which an exchange is forced; 0 = "
                                    "never"),
                              0),
                      64));
  c.push_back(Default(AtLeast(Param("minInterval", P::kInteger,
                                    "T_min, local steps before the change may request an "
                                    "exchange"),
                              1),
                      1));
  ParamSpec period = AtLeast(Param("period", P::kInteger,
                                   "fixed-period gossip: an exchange every period local steps"),
                             1);
  period.default_doc = "adaptive";
  c.push_back(period);
  c.push_back(Default(Enum(Param("variant", P::kEnum,
                                 "pairwise (both average), push (gossiping SGD) or easgd (elastic "
                                 "averaging with a center model)"),
                           {"pairwise", "push", "easgd"}, "variant"),
                      "pairwise"));
  c.push_back(Default(Param("lockstep", P::kBoolean,
                            "the handshake in lock step (reproducible) instead of asynchronous"),
                      false));
  // gossip's self-calibration (docs/algorithms.md §4g): on unless θ or a period is set, so its
  // default is a rule rather than a value (a schema default would be written into every job).
  ParamSpec calibrate = Param("calibrate", P::kBoolean,
                              "set θ from the model's own change: the first calibrationSteps "
                              "steps exchange every targetInterval steps and θ becomes the "
                              "median change over that interval (false: θ = threshold)");
  calibrate.default_doc = "true unless threshold or period is set";
  c.push_back(calibrate);
  c.push_back(Default(AtLeast(Param("targetInterval", P::kInteger,
                                    "self-calibration: local steps between a worker's own "
                                    "exchange requests that θ is calibrated for"),
                              1),
                      5));
  c.push_back(Default(AtLeast(Param("calibrationSteps", P::kInteger,
                                    "self-calibration: the local steps of the calibration "
                                    "window"),
                              1),
                      200));
  c.push_back(Default(OpenClosedUnit(Param("pushRatio", P::kNumber,
                                           "fraction of each large tensor pushed per round")),
                      0.1));
  ParamSpec history = Param("history", P::kInteger, "past model snapshots the predictor reads (K)");
  history.range.min = 2;
  history.range.max = 64;
  c.push_back(Default(history, 5));
  c.push_back(Default(Enum(Param("mode", P::kEnum,
                                 "A: the parameter server predicts, workers pull the model (deltas "
                                 "at pullBits); B: the workers predict too"),
                           {"A", "B"}, "mode"),
                      "A"));
  ParamSpec predictor = Param("predictor", P::kString,
                              "a predictor file made by `hptrain mp2 train` (an absolute path on "
                              "Kubernetes; the runtime images hold the shipped LeNet-5 one at "
                              "/usr/share/hptrain/predictors/lenet5-fashion-mnist.mp2p), or zero "
                              "(no change)");
  predictor.required = true;
  c.push_back(predictor);
  c.push_back(Default(Param("calibration", P::kBoolean,
                            "calibrate the predicted change per tensor"),
                      false));
  c.push_back(Default(OpenClosedUnit(Param("damping", P::kNumber,
                                           "share of the predicted change applied")),
                      0.25));
  c.push_back(Default(Param("localProgress", P::kBoolean,
                            "workers keep their own steps on the elements they did not push, "
                            "until those elements' next push"),
                      false));
  ParamSpec pull_bits = Param("pullBits", P::kInteger,
                              "mode A: bits per element of the pulled model, as deltas against "
                              "the parameter server's mirror of the worker's copy (tensors under "
                              "1024 elements fp32); 32 pulls the model whole");
  pull_bits.enum_values = {"2", "4", "8", "16", "32"};
  c.push_back(Default(pull_bits, 8));
  ParamSpec staleness = Param("staleness", P::kInteger,
                              "model versions a worker may run ahead of the parameter server "
                              "(0 = synchronous)");
  staleness.enum_values = {"0", "1"};
  c.push_back(Default(staleness, 1));
  c.push_back(Default(Param("averageOptimizerState", P::kBoolean,
                            "also average the optimizer state at every global sync"),
                      false));
  c.push_back(Default(Enum(Param("compressor", P::kEnum,
                                 "the compression auto picks on a slow link: quantized (8 bits, "
                                 "with error feedback), fp16 or topk (density 0.01)"),
                           {"quantized", "fp16", "topk"}, "compressor"),
                      "quantized"));
  c.push_back(Default(AtLeast(Param("probeSteps", P::kInteger,
                                    "steps exchanged in fp32 and timed before deciding whether "
                                    "to compress"),
                              2),
                      20));
  c.push_back(Default(AtLeast(Param("compressAbove", P::kNumber,
                                    "compress when the probe's exposed communication exceeds "
                                    "this fraction of its compute"),
                              0),
                      0.5));
  c.push_back(Default(Param("denseFallback", P::kBoolean,
                            "probe first and stay fp32 (as ssgd) where the link is fast enough "
                            "(probeSteps, compressAbove)"),
                      false));
  ParamSpec warmup_steps = AtLeast(
      Param("warmupSteps", P::kInteger, "the first global steps synchronous, as ssgd (K′ ramp-up)"),
      0);
  warmup_steps.default_doc = "the schedule's warm-up, at least half an epoch";
  c.push_back(warmup_steps);
  return c;
}

// The catalogue's `name`, with its default replaced.
template <typename T>
ParamSpec With(absl::string_view name, T default_value) {
  return Default(CatalogueParam(name), default_value);
}

// gossip (docs/algorithms.md §4b, §4g): a fixed period replaces the adaptive trigger, so the two
// are not combined; calibrate (on unless threshold or period is set) sets θ itself.
absl::Status ValidateGossip(const StrategyOptions& s, absl::string_view path) {
  const int64_t min_interval = s.Int("minInterval");
  const int64_t max_interval = s.Int("maxInterval");
  if (max_interval > 0 && min_interval > max_interval) {
    return Invalid(path, "minInterval", "must be <= ", path, ".maxInterval (", max_interval,
                   "), got ", min_interval);
  }
  if (s.Has("period")) {
    const char* adaptive = s.Has("threshold")     ? "threshold"
                           : s.Has("maxInterval") ? "maxInterval"
                           : s.Has("minInterval") ? "minInterval"
                                                  : nullptr;
    if (adaptive != nullptr) {
      return Invalid(path, adaptive, "applies only to the adaptive trigger, but ", path,
                     ".period is ", s.Int("period"), " (fixed-period gossip)");
    }
  }
  if (s.Has("calibrate") && s.Bool("calibrate")) {
    if (s.Has("threshold")) {
      return Invalid(path, "threshold", "cannot be set with ", path,
                     ".calibrate: true (calibration sets the threshold)");
    }
    if (s.Has("period")) {
      return Invalid(path, "calibrate", "applies only to the adaptive trigger, but ", path,
                     ".period is ", s.Int("period"), " (fixed-period gossip)");
    }
  }
  // targetInterval and calibrationSteps tune the self-calibration: refused where it is off.
  const bool calibrated = s.Has("calibrate") ? s.Bool("calibrate")
                                             : !s.Has("threshold") && !s.Has("period");
  for (const char* field : {"targetInterval", "calibrationSteps"}) {
    if (!s.Has(field) || calibrated) continue;
    const std::string why = s.Has("calibrate")   ? absl::StrCat(path, ".calibrate is false")
                            : s.Has("threshold") ? absl::StrCat(path, ".threshold is set")
                                                 : absl::StrCat(path, ".period is set");
    return Invalid(path, field, "applies only to the self-calibrated trigger, but ", why);
  }
  if (calibrated) {
    const int64_t target = s.Int("targetInterval");
    if (max_interval > 0 && target > max_interval) {
      return Invalid(path, "targetInterval", "must be <= ", path, ".maxInterval (",
                     max_interval, "), got ", target);
    }
    if (s.Int("calibrationSteps") < target) {
      return Invalid(path, "calibrationSteps", "must be >= ", path, ".targetInterval (", target,
                     ": the window must request at least one exchange), got ",
                     s.Int("calibrationSteps"));
    }
  }
  return absl::OkStatus();
}

// multistep: hMin/hMax bound the adaptive interval (an unset interval is adaptive); the
// compression's bits belong to type quantized.
absl::Status ValidateMultistep(const StrategyOptions& s, absl::string_view path) {
  const OptionValue* interval = s.Find("interval");
  const bool fixed = interval != nullptr && std::holds_alternative<int64_t>(*interval);
  if ((s.Has("hMin") || s.Has("hMax")) && fixed) {
    return Invalid(path, s.Has("hMin") ? "hMin" : "hMax",
                   "applies only to an adaptive interval, but ", path, ".interval is ",
                   s.Int("interval"));
  }
  if (s.Int("hMin") > s.Int("hMax")) {
    return Invalid(path, "hMin", "must be <= ", path, ".hMax (", s.Int("hMax"), "), got ",
                   s.Int("hMin"));
  }
  if (s.Has("update") && s.String("update") == "average" && s.Int("delay") == 1) {
    return Invalid(path, "update",
                   "average applies only with delay 0 (delay 1 takes the delayed global step), "
                   "but ", path, ".delay is 1");
  }
  if (s.Has("compression.bits")) {
    if (!s.Has("compression.type")) {
      return Invalid(path, "compression.type", "required (one of none, quantized, fp16)");
    }
    if (s.String("compression.type") != "quantized") {
      return Invalid(path, "compression.bits",
                     "applies only to compression type quantized, got type ",
                     s.String("compression.type"));
    }
  }
  return absl::OkStatus();
}

// quantized: the gate's parameters need the gate (bits dynamic, or a fixed width with
// denseFallback), which dynamic always has.
absl::Status ValidateQuantized(const StrategyOptions& s, absl::string_view path) {
  const bool dynamic = s.String("bits") == "dynamic";
  if (dynamic && s.Has("denseFallback")) {
    return Invalid(path, "denseFallback",
                   "applies only to a fixed bit width (bits dynamic always probes first)");
  }
  if (!dynamic && !s.Bool("denseFallback")) {
    for (const char* gate : {"probeSteps", "compressAbove"}) {
      if (s.Has(gate)) {
        return Invalid(path, gate, "applies only to bits dynamic or with ", path,
                       ".denseFallback: true");
      }
    }
  }
  return absl::OkStatus();
}

// auto: the compressor's own parameters apply to it alone.
absl::Status ValidateAuto(const StrategyOptions& s, absl::string_view path) {
  const std::string compressor = s.String("compressor");
  const struct {
    const char* param;
    std::vector<std::string> compressors;
  } owned[] = {{"bucketSize", {"quantized", "fp16"}}};
  for (const auto& [param, compressors] : owned) {
    if (!s.Has(param) ||
        std::find(compressors.begin(), compressors.end(), compressor) != compressors.end()) {
      continue;
    }
    return Invalid(path, param, "applies only to compressor ", absl::StrJoin(compressors, " or "),
                   ", got compressor ", compressor);
  }
  return absl::OkStatus();
}

// hierarchical: -1 is K′ = once per epoch (docs/algorithms.md §2b).
absl::Status ValidateHierarchical(const StrategyOptions& s, absl::string_view path) {
  if (s.Has("interval") && s.Int("interval") < 1 && s.Int("interval") != -1) {
    return Invalid(path, "interval",
                   "must be at least 1, or -1 for one global sync per epoch, got ",
                   s.Int("interval"));
  }
  return absl::OkStatus();
}

absl::Status ValidateMp2(const StrategyOptions& s, absl::string_view path) {
  if (s.String("predictor").empty()) {
    return Invalid(path, "predictor",
                   "required for strategy mp2: a predictor file made by `hptrain mp2 train`, or "
                   "zero (the zero-change ablation)");
  }
  return absl::OkStatus();
}

StrategyDescriptor Strategy(std::string name, std::string doc, std::vector<ParamSpec> params) {
  StrategyDescriptor d;
  d.name = std::move(name);
  d.doc = std::move(doc);
  d.params = std::move(params);
  return d;
}

}  // namespace

const std::vector<ParamSpec>& ParamCatalogue() {
  static const auto* catalogue = new std::vector<ParamSpec>(BuildCatalogue());
  return *catalogue;
}

std::vector<StrategyDescriptor> BuiltinStrategyDescriptors() {
  std::vector<StrategyDescriptor> all;
  auto on_device = [](StrategyDescriptor d) {
    d.devices.nccl = true;
    return d;
  };
  auto sparse = [&](StrategyDescriptor d) {
    d = on_device(std::move(d));
    d.devices.host_only_param = "sparseEncoding";
    d.devices.host_only_value = "compact";
    return d;
  };
  all.push_back(on_device(Strategy("ssgd", "fp32 gradients, ring all-reduce", {})));
  all.push_back(on_device(Strategy(
      "fp16", "IEEE half gradients through the ring",
      {CatalogueParam("bucketSize"), CatalogueParam("errorFeedback")})));
  StrategyDescriptor quantized = on_device(Strategy(
      "quantized", "bucketed stochastic uniform quantization through the ring",
      {CatalogueParam("bits"), CatalogueParam("bucketSize"), CatalogueParam("errorFeedback"),
       CatalogueParam("denseFallback"), CatalogueParam("probeSteps"),
       CatalogueParam("compressAbove")}));
  quantized.validate = ValidateQuantized;
  all.push_back(quantized);
  StrategyDescriptor automatic = on_device(Strategy(
      "auto", "ssgd or a compressor, picked from the times of the first steps",
      {CatalogueParam("compressor"), CatalogueParam("probeSteps"),
       CatalogueParam("compressAbove"), CatalogueParam("bucketSize"),
       CatalogueParam("errorFeedback")}));
  automatic.validate = ValidateAuto;
  all.push_back(automatic);
  all.push_back(sparse(Strategy("topk", "the largest density·n gradient elements, all-gathered",
                                {With("density", 0.01), CatalogueParam("errorFeedback"),
                                 CatalogueParam("warmupEpochs"),
                                 CatalogueParam("sparseEncoding")})));
  StrategyDescriptor dgc = sparse(Strategy(
      "dgc", "Deep Gradient Compression: momentum correction, sampled threshold, masking",
      // DGC's final density, 0.1 % (docs/algorithms.md §6).
      {With("density", 0.001), CatalogueParam("warmupEpochs"), CatalogueParam("clipNorm"),
       CatalogueParam("momentumMasking"), CatalogueParam("sparseEncoding")}));
  dgc.traits.applies_momentum = true;  // momentum correction
  all.push_back(dgc);
  all.push_back(Strategy("localsgd", "local SGD, models averaged every interval steps",
                         {With("interval", 8)}));
  ParamSpec multistep_interval = With("interval", "adaptive");
  multistep_interval.words = {"adaptive"};
  StrategyDescriptor multistep = Strategy(
      "multistep", "multi-step delayed update: H local steps, one all-reduce per round",
      {multistep_interval, CatalogueParam("warmupEpochs"), CatalogueParam("hMin"),
       CatalogueParam("hMax"), CatalogueParam("mu"), CatalogueParam("update"),
       CatalogueParam("delay"),
       CatalogueParam("compression")});
  multistep.validate = ValidateMultistep;
  multistep.cel = {{"!has(self.hMin) || !has(self.hMax) || self.hMin <= self.hMax",
                    "spec.strategy.hMin must be <= spec.strategy.hMax", ".hMin"},
                   {"!has(self.update) || self.update != 'average' || !has(self.delay) || "
                    "self.delay == 0",
                    "spec.strategy.update average applies only with spec.strategy.delay 0",
                    ".update"}};
  all.push_back(multistep);
  ParamSpec hierarchical_interval = With("interval", -1);
  hierarchical_interval.range = ParamRange{};  // -1 or at least 1: ValidateHierarchical
  hierarchical_interval.range_doc = "-1 (once per epoch) or >= 1";
  StrategyDescriptor hierarchical =
      Strategy("hierarchical", "node-local all-reduce every step, global model average every "
                               "interval steps (eDNNcomm)",
               {hierarchical_interval, CatalogueParam("averageOptimizerState"),
                CatalogueParam("warmupSteps")});
  hierarchical.validate = ValidateHierarchical;
  hierarchical.cel = {{"!has(self.interval) || type(self.interval) != int || self.interval >= 1 || "
                       "(self.interval == -1 && has(self.type) && self.type == 'hierarchical')",
                       "spec.strategy.interval must be >= 1 (hierarchical also takes -1, once per "
                       "epoch)",
                       ".interval"}};
  all.push_back(hierarchical);
  StrategyDescriptor gossip = Strategy(
      "gossip", "adaptive gossip: pairwise model averages when the model has changed enough",
      {CatalogueParam("threshold"), CatalogueParam("maxInterval"), CatalogueParam("minInterval"),
       CatalogueParam("period"), CatalogueParam("variant"), CatalogueParam("lockstep"),
       CatalogueParam("calibrate"), CatalogueParam("targetInterval"),
       CatalogueParam("calibrationSteps")});
  gossip.validate = ValidateGossip;
  gossip.traits.models_diverge = true;
  gossip.traits.exchanges_buffers = true;
  all.push_back(gossip);
  StrategyDescriptor ps = Strategy("ps", "BSP parameter server, fp32 push and pull", {});
  ps.traits.uses_parameter_server = true;
  all.push_back(ps);
  // H-PS picks its bit width among 2, 4, 8 and 16 and treats 32 as "off": 1 bit is not one of
  // its widths.
  ParamSpec hps_bits = CatalogueParam("bits");
  hps_bits.enum_values = {"2", "4", "8", "16", "32", "dynamic"};
  StrategyDescriptor hps = Strategy(
      "hps", "H-PS: quantized pushes, delta pulls overlapping the next step",
      {hps_bits, CatalogueParam("staleness")});
  hps.traits.uses_parameter_server = true;
  all.push_back(hps);
  StrategyDescriptor mp2 = Strategy(
      "mp2", "MP²: partial pushes, the parameter server predicts the rest",
      {CatalogueParam("pushRatio"), CatalogueParam("history"), CatalogueParam("mode"),
       CatalogueParam("predictor"), CatalogueParam("calibration"), CatalogueParam("damping"),
       CatalogueParam("pullBits"), CatalogueParam("localProgress")});
  mp2.traits.uses_parameter_server = true;
  mp2.validate = ValidateMp2;
  mp2.cel = {{"!has(self.type) || self.type != 'mp2' || (has(self.predictor) && "
              "size(self.predictor) > 0)",
              "spec.strategy.predictor is required for strategy mp2: a predictor file made by "
              "`hptrain mp2 train`, or zero (the zero-change ablation)",
              ".predictor"}};
  all.push_back(mp2);
  return all;
}

}  // namespace hptrain::sync
