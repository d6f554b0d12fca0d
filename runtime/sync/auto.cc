// auto: ssgd or a compressor, whichever the measured link calls for (docs/algorithms.md §8a).
//
// Two strategies made through the registry: ssgd, and the compressor that `compressor` names
// (quantized by default, 8 bits with error feedback; fp16; topk), with auto's values of its
// parameters. A CompressionGate (compression_gate.h) runs the first `probeSteps` steps through
// ssgd's reducer, measuring each worker's compute and exposed communication, and at one step all
// ranks agree on picks, for the rest of the run, ssgd (when exposed communication stays at or
// below `compressAbove` × compute) or the compressor. Every bucket of a step goes through the
// same one. When it keeps ssgd the run is ssgd's, bit for bit: the same reducer on the same
// gradients; the one extra collective (the probe's times, 3 floats per rank and step) changes no
// gradient.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/sync/compression_gate.h"
#include "runtime/sync/registry.h"

namespace hptrain::sync {
namespace {

// The compressor's options: auto's values of the parameters it shares with it.
StrategyOptions CompressorOptions(const StrategyOptions& options) {
  StrategyOptions inner;
  inner.type = options.String("compressor");
  for (const char* name : {"bucketSize", "errorFeedback"}) {
    const OptionValue* value = options.Find(name);
    // topk has no buckets of quantization.
    const bool shared = inner.type != "topk" || std::string(name) == "errorFeedback";
    if (value != nullptr && shared) inner.SetValue(name, *value);
  }
  return inner;
}

GateOptions GateOptionsOf(const StrategyOptions& options) {
  GateOptions gate;
  gate.probe_steps = options.Int("probeSteps");
  gate.compress_above = options.Number("compressAbove");
  return gate;
}

class Auto : public Strategy, public GradientReducer {
 public:
  static absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context) {
    auto strategy = std::unique_ptr<Auto>(new Auto(context));
    HPTRAIN_RETURN_IF_ERROR(strategy->Make(context));
    return std::unique_ptr<Strategy>(std::move(strategy));
  }

  std::string name() const override { return "auto"; }
  GradientReducer* reducer() override { return this; }

  absl::Status Init(const GradientLayout& layout) override {
    HPTRAIN_RETURN_IF_ERROR(dense_->Init(layout), "ssgd");
    return Annotate(compressor_->Init(layout), compressor_->name());
  }

  absl::Status Start(absl::Span<float> parameters, int64_t step,
                     const CheckpointSections& restored) override {
    gate_.Resume(step, restored, kGateSection);
    HPTRAIN_RETURN_IF_ERROR(dense_->Start(parameters, step, restored), "ssgd");
    return Annotate(compressor_->Start(parameters, step, restored), compressor_->name());
  }

  // The first bucket of every step asks the gate (at the decision step the ranks agree there);
  // the step's buckets then all go the same way.
  std::shared_ptr<comm::Work> Reduce(const StepInfo& step, int bucket,
                                     const comm::BufferRef& gradients) override {
    if (bucket == 0) {
      absl::StatusOr<CompressionGate::Choice> choice = gate_.Decide(step.step);
      if (!choice.ok()) return comm::Work::Done(choice.status());
      const bool decided = *choice != CompressionGate::Choice::kProbing;
      if (decided && !announced_) {
        announced_ = true;
        if (rank_ == 0)
          std::fprintf(stderr, "hptrain worker: strategy auto: %s\n", Decision().c_str());
      }
      compressing_ = *choice == CompressionGate::Choice::kCompressed;
    }
    GradientReducer* reducer = compressing_ ? compressor_->reducer() : dense_->reducer();
    return reducer->Reduce(step, bucket, gradients);
  }

  absl::Status Synchronize(int64_t steps_done, absl::Span<float> parameters) override {
    return compressor_->Synchronize(steps_done, parameters);
  }

  absl::Status SaveState(int64_t steps_done, CheckpointSections* sections) override {
    gate_.SaveInto(kGateSection, sections);
    return compressor_->SaveState(steps_done, sections);
  }

  void OnStepTiming(const StepTiming& timing) override { gate_.Record(timing); }

  absl::Status OnEpochEnd(const EpochTiming& timing) override {
    if (!gate_.compressing()) return absl::OkStatus();
    return compressor_->OnEpochEnd(timing);
  }

  StrategyStats stats() const override {
    StrategyStats s = gate_.compressing() ? compressor_->stats() : StrategyStats();
    s.decision = Decision();
    return s;
  }

 private:
  static constexpr const char* kGateSection = "auto.gate";

  explicit Auto(const StrategyContext& context)
      : compressor_options_(CompressorOptions(*context.options)),
        gate_(GateOptionsOf(*context.options), context.comm),
        rank_(context.comm->rank()) {
    dense_options_.type = "ssgd";
  }

  absl::Status Make(const StrategyContext& context) {
    StrategyContext dense = context;
    dense.options = &dense_options_;
    HPTRAIN_ASSIGN_OR_RETURN(dense_, CreateStrategy(dense));
    StrategyContext compressor = context;
    compressor.options = &compressor_options_;
    HPTRAIN_ASSIGN_OR_RETURN(compressor_, CreateStrategy(compressor));
    if (compressor_->reducer() == nullptr || compressor_->averager() != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.strategy.compressor: ", compressor_->name(), " is not a gradient reducer"));
    }
    traits_ = DeclaredTraits(name());
    traits_.reduces_on_device = dense_->traits().reduces_on_device;
    if (compressor_->traits().reduces_on_device != traits_.reduces_on_device) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.strategy.compressor: ", compressor_->name(),
                       traits_.reduces_on_device ? " does not" : " does",
                       " reduce in device memory with these settings, ssgd",
                       traits_.reduces_on_device ? " does" : " does not"));
    }
    return absl::OkStatus();
  }

  std::string Decision() const { return gate_.Decision(CompressorName()); }

  std::string CompressorName() const {
    const std::string& type = compressor_options_.type;
    if (type == "quantized")
      return absl::StrCat("quantized ", compressor_options_.Int("bits"), " bits");
    if (type == "topk") return absl::StrCat("topk density ", compressor_options_.Number("density"));
    return type;
  }

  StrategyOptions dense_options_;
  StrategyOptions compressor_options_;
  std::unique_ptr<Strategy> dense_;
  std::unique_ptr<Strategy> compressor_;
  CompressionGate gate_;
  const int rank_;
  bool compressing_ = false;  // this step's choice (exchange thread)
  bool announced_ = false;    // exchange thread
};

}  // namespace

bool auto_registered = RegisterStrategy("auto", Auto::Create);

}  // namespace hptrain::sync
