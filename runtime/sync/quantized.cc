// quantized: H-PS flexible quantization of gradients (docs/algorithms.md §5b(3)).
//
// Gradients go through the compressed ring (compressed_ring_allreduce.cc) with bucketed
// stochastic quantization and error feedback: every hop re-quantizes its partial sum and keeps its
// own quantization error for the next step. With `bits: dynamic`, tensors of fewer than 4096
// elements stay fp32 (tensor_split.h) as H-PS prescribes; fixed bit widths quantize everything.
//
// Bytes per worker per step, N workers, P elements (L quantized, S = P - L kept fp32), b bits,
// bucket size s:  2(N-1)/N · (L·b/8 + 8·L/s) + 2(N-1)/N · 4S   (chunk rounding aside)
// against ssgd's 2(N-1)/N · 4P: for LeNet-5, 25.4 % at 8 bits and 12.9 % at 4 bits.
//
// `bits: dynamic` first probes: its first `probeSteps` steps run at 32 bits (exactly ssgd), and a
// CompressionGate (compression_gate.h) then picks, the same on every rank, 8 bits when the
// exposed communication exceeded `compressAbove` × compute, 32 otherwise. From then on, at the
// end of every epoch, from the workers' times measured as the gate does (the least exposed
// communication over the ranks, the mean compute): halves b (not below 2) when exposed
// communication exceeds 10 % of compute (from 32, `compressAbove` of compute), doubles it when
// communication is under half of compute, within {2, 4, 8, 16 (fp16), 32 (off)}. The times are
// all-reduced first, so every worker takes the same decision. A fixed bit width with
// `denseFallback: true` takes the gate's decision too: its bits, or 32 for the rest of the run.
// At 32 bits the strategy is exactly ssgd (plain ring all-reduce, residuals folded in).
//
// On a GPU with the NCCL back end (job::ExchangesOnDevice) the buckets stay in device memory: the
// same ring runs over NCCL with the codecs' CUDA twins (device_codecs.h), the same bytes on the
// wire; 32 bits is NCCL's all-reduce, as for ssgd. With bits dynamic the small tensors are split
// off on the device (device/device_split.h) and all-reduced in fp32 over NCCL.
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/sync/codecs/device_codecs.h"
#include "runtime/sync/codecs/half_codec.h"
#include "runtime/sync/codecs/quantize_codec.h"
#include "runtime/sync/compression_gate.h"
#include "runtime/sync/device/device_split.h"
#include "runtime/sync/registry.h"
#include "runtime/sync/tensor_split.h"

namespace hptrain::sync {
namespace {

// quantized's parameters (strategy_descriptors.cc), as validated.
struct QuantizedOptions {
  int bits = 8;          // 1, 2, 4, 8, 16 or 32; dynamic starts at 8
  bool dynamic = false;  // bits: dynamic
  int64_t bucket_size = 512;
  bool error_feedback = true;
  bool dense_fallback = false;  // a fixed width behind the gate (dynamic always is)
  GateOptions gate;
};

QuantizedOptions QuantizedOptionsOf(const StrategyOptions& options) {
  QuantizedOptions quantized;
  quantized.dynamic = options.String("bits") == "dynamic";
  quantized.bits = quantized.dynamic ? 8 : static_cast<int>(options.Int("bits"));
  quantized.bucket_size = options.Int("bucketSize");
  quantized.error_feedback = options.Bool("errorFeedback");
  quantized.dense_fallback = options.Bool("denseFallback");
  quantized.gate.probe_steps = options.Int("probeSteps");
  quantized.gate.compress_above = options.Number("compressAbove");
  return quantized;
}

class Quantized : public Strategy, public SummingReducer {
 public:
  // With a device communicator the buckets are device buffers.
  Quantized(const StrategyContext& context, const QuantizedOptions& options)
      : seed_(context.seed),
        options_(options),
        comm_(context.comm),
        device_comm_(context.device_comm),
        compressed_bits_(options.bits),
        bits_(options.dynamic || options.dense_fallback ? 32 : options.bits),
        dynamic_(options.dynamic),
        gated_(options.dynamic || options.dense_fallback),
        gate_(options.gate, context.comm) {
    traits_ = DeclaredTraits(name());
    traits_.reduces_on_device = device_comm_ != nullptr;
  }

  std::string name() const override { return "quantized"; }
  GradientReducer* reducer() override { return this; }

  absl::Status Init(const GradientLayout& layout) override {
    split_ = TensorSplit(layout, dynamic_ ? kSmallTensorElements : 0);
    const bool feedback = options_.error_feedback;
    const int64_t bucket = options_.bucket_size;
    if (device_comm_ != nullptr) return InitDevice(layout, feedback, bucket);
    for (size_t k = 0; k < layout.buckets.size(); ++k) {
      const size_t large = split_.large_count(static_cast<int>(k));
      quantizers_.push_back(std::make_unique<QuantizeCodec>(
          compressed_bits_ <= 8 ? compressed_bits_ : 8, bucket, feedback ? large : 0, seed_ + k,
          comm_->rank()));
      halves_.push_back(std::make_unique<HalfCodec>(feedback ? large : 0));
    }
    return absl::OkStatus();
  }

  absl::Status Start(absl::Span<float>, int64_t step, const CheckpointSections& restored) override {
    if (!gated_) return absl::OkStatus();
    gate_.Resume(step, restored, kGateSection);
    if (gate_.choice() != CompressionGate::Choice::kProbing) bits_ = DecidedBits();
    return absl::OkStatus();
  }

  absl::Status SaveState(int64_t, CheckpointSections* sections) override {
    if (gated_) gate_.SaveInto(kGateSection, sections);
    return absl::OkStatus();
  }

  void OnStepTiming(const StepTiming& timing) override {
    if (gated_) gate_.Record(timing);
  }

  absl::Status ReduceSum(const StepInfo& step, int bucket, absl::Span<float> gradients) override {
    if (gated_ && bucket == 0) HPTRAIN_RETURN_IF_ERROR(AskGate(step));
    if (device_comm_ != nullptr) return ReduceOnDevice(step, bucket, gradients);
    const size_t large = split_.large_count(bucket);
    const size_t small = split_.small_count(bucket);
    QuantizeCodec& q = *quantizers_[bucket];
    HalfCodec& h = *halves_[bucket];
    if (bits_ == 32) {
      // Off: fold any error-feedback residual back in, then exactly ssgd's collective.
      if (!q.residual().empty() || !h.residual().empty()) {
        large_.resize(large);
        small_.resize(small);
        split_.Gather(bucket, gradients, large_.data(), small_.data());
        FoldResidual(q.residual(), absl::MakeSpan(large_));
        FoldResidual(h.residual(), absl::MakeSpan(large_));
        split_.Scatter(bucket, large_.data(), small_.data(), gradients);
      }
      tally_.Add(4.0 * gradients.size(), 4.0 * gradients.size());
      return comm_->AllReduceSum(gradients.data(), gradients.size());
    }
    // Quantize the large tensors in place when the bucket has no small ones.
    float* values = gradients.data();
    if (small > 0) {
      large_.resize(large);
      small_.resize(small);
      split_.Gather(bucket, gradients, large_.data(), small_.data());
      HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSum(small_.data(), small), "small tensors");
      values = large_.data();
    }
    size_t wire = 4 * small;
    if (large > 0) {
      if (bits_ == 16) {
        HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSumCompressed(values, large, h));
        wire += h.EncodedBytes(large);
      } else {
        q.set_bits(bits_);
        q.set_step(step.step);
        HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSumCompressed(values, large, q),
                                "quantized all-reduce at ", bits_, " bits");
        wire += q.EncodedBytes(large);
      }
    }
    if (small > 0) split_.Scatter(bucket, large_.data(), small_.data(), gradients);
    tally_.Add(4.0 * gradients.size(), static_cast<double>(wire));
    return absl::OkStatus();
  }

  absl::Status OnEpochEnd(const EpochTiming& timing) override {
    // Before the gate decided the width is the probe's 32.
    if (!dynamic_ || gate_.choice() == CompressionGate::Choice::kProbing) {
      return absl::OkStatus();
    }
    // As the gate measures the link: the least exposed time over the ranks (a rank's waiting for
    // the slowest one is load imbalance, which fewer bits do not remove), the mean compute.
    StepTiming epoch;
    epoch.compute_seconds = timing.compute_seconds;
    epoch.comm_seconds = timing.comm_seconds;
    epoch.exposed_comm_seconds = timing.exposed_comm_seconds;
    absl::StatusOr<AgreedTimes> agreed_or = AgreeTimes(comm_, {epoch});
    if (!agreed_or.ok()) return Annotate(agreed_or.status(), "the epoch's times");
    const AgreedTimes& agreed = *agreed_or;
    const double compute = agreed.compute, comm = agreed.comm, exposed = agreed.exposed;
    const double halve_above = bits_ == 32 ? gate_options().compress_above : 0.1;
    if (exposed > halve_above * compute && bits_ > 2) {
      bits_ = bits_ == 32 ? 16 : bits_ / 2;
    } else if (comm < 0.5 * compute && bits_ < 32) {
      bits_ = bits_ == 16 ? 32 : bits_ * 2;
    }
    return absl::OkStatus();
  }

  StrategyStats stats() const override {
    StrategyStats s;
    s.bits = bits_;
    s.compression_ratio = tally_.ratio();
    if (gated_) {
      s.decision = gate_.Decision(absl::StrCat(compressed_bits_, " bits"),
                                  dynamic_ ? " to start with" : "");
    }
    return s;
  }

 private:
  static constexpr const char* kGateSection = "quantized.gate";

  const GateOptions& gate_options() const { return options_.gate; }
  int DecidedBits() const { return gate_.compressing() ? compressed_bits_ : 32; }

  // At the first bucket of every step: at the gate's decision step the ranks agree (one
  // collective), and the width follows the decision.
  absl::Status AskGate(const StepInfo& step) {
    const bool probing = gate_.choice() == CompressionGate::Choice::kProbing;
    HPTRAIN_ASSIGN_OR_RETURN(CompressionGate::Choice choice, gate_.Decide(step.step));
    if (!probing || choice == CompressionGate::Choice::kProbing) return absl::OkStatus();
    bits_ = DecidedBits();
    if (comm_->rank() == 0) {
      std::fprintf(stderr, "hptrain worker: strategy quantized: %s\n", stats().decision.c_str());
    }
    return absl::OkStatus();
  }

  // Device route. A fixed bit width: one codec per bucket for it (no small tensors). Dynamic:
  // the large tensors of every bucket get both codecs, for the widths the epochs may choose.
  absl::Status InitDevice(const GradientLayout& layout, bool feedback, int64_t bucket_size) {
    if (dynamic_) {
      HPTRAIN_ASSIGN_OR_RETURN(device_split_, DeviceSplit::Create(layout, kSmallTensorElements));
    }
    for (size_t k = 0; k < layout.buckets.size(); ++k) {
      const size_t residual = !feedback  ? 0
                              : dynamic_ ? split_.large_count(static_cast<int>(k))
                                         : layout.buckets[k].end - layout.buckets[k].begin;
      const int bits = compressed_bits_;
      if (dynamic_) {
        HPTRAIN_ASSIGN_OR_RETURN(device_halves_.emplace_back(), DeviceHalfCodec::Create(residual));
        HPTRAIN_ASSIGN_OR_RETURN(
            device_quantizers_.emplace_back(),
            DeviceQuantizeCodec::Create(bits <= 8 ? bits : 8, bucket_size, residual,
                                        seed_ + k, comm_->rank()));
        continue;
      }
      if (bits == 16) {
        HPTRAIN_ASSIGN_OR_RETURN(device_halves_.emplace_back(), DeviceHalfCodec::Create(residual));
      } else if (bits <= 8) {
        HPTRAIN_ASSIGN_OR_RETURN(
            device_quantizers_.emplace_back(),
            DeviceQuantizeCodec::Create(bits, bucket_size, residual, seed_ + k,
                                        comm_->rank()));
      }
    }
    return absl::OkStatus();
  }

  // Bits dynamic on the device: the host route's steps on device buffers (the small tensors
  // all-reduced in fp32, the large ones through the codec of the current width).
  absl::Status ReduceDynamicOnDevice(const StepInfo& step, int bucket,
                                     absl::Span<float> gradients) {
    void* stream = device_comm_->device_stream();
    const size_t large = split_.large_count(bucket);
    const size_t small = split_.small_count(bucket);
    HPTRAIN_RETURN_IF_ERROR(device_split_->Split(bucket, gradients.data(), stream));
    float* x = device_split_->large();
    DeviceQuantizeCodec& q = *device_quantizers_[bucket];
    DeviceHalfCodec& h = *device_halves_[bucket];
    const double fp32 = 4.0 * gradients.size();
    if (bits_ == 32) {
      // Off: fold any error-feedback residual back in, then exactly ssgd's collective.
      if (large > 0) {
        HPTRAIN_RETURN_IF_ERROR(q.FoldResidualInto(x, large, stream));
        HPTRAIN_RETURN_IF_ERROR(h.FoldResidualInto(x, large, stream));
      }
      HPTRAIN_RETURN_IF_ERROR(device_split_->Join(bucket, gradients.data(), stream));
      tally_.Add(fp32, fp32);
      return device_comm_->AllReduceSum(gradients.data(), gradients.size());
    }
    size_t wire = 4 * small;
    if (small > 0) {
      HPTRAIN_RETURN_IF_ERROR(device_comm_->AllReduceSum(device_split_->small(), small),
                              "small tensors");
    }
    if (large > 0) {
      comm::ChunkCodec* codec = &h;
      if (bits_ != 16) {
        HPTRAIN_RETURN_IF_ERROR(q.set_bits(bits_));
        q.set_step(step.step);
        codec = &q;
      }
      HPTRAIN_RETURN_IF_ERROR(device_comm_->AllReduceSumCompressed(x, large, *codec),
                              "quantized all-reduce at ", bits_, " bits");
      wire += codec->EncodedBytes(large);
    }
    HPTRAIN_RETURN_IF_ERROR(device_split_->Join(bucket, gradients.data(), stream));
    tally_.Add(fp32, static_cast<double>(wire));
    return absl::OkStatus();
  }

  absl::Status ReduceOnDevice(const StepInfo& step, int bucket, absl::Span<float> gradients) {
    if (dynamic_) return ReduceDynamicOnDevice(step, bucket, gradients);
    const double fp32 = 4.0 * gradients.size();
    if (bits_ == 32) {
      tally_.Add(fp32, fp32);
      return device_comm_->AllReduceSum(gradients.data(), gradients.size());
    }
    comm::ChunkCodec* codec = nullptr;
    if (bits_ == 16) {
      codec = device_halves_[bucket].get();
    } else {
      DeviceQuantizeCodec& q = *device_quantizers_[bucket];
      q.set_step(step.step);
      codec = &q;
    }
    HPTRAIN_RETURN_IF_ERROR(
        device_comm_->AllReduceSumCompressed(gradients.data(), gradients.size(), *codec),
        "quantized all-reduce at ", bits_, " bits");
    tally_.Add(fp32, static_cast<double>(codec->EncodedBytes(gradients.size())));
    return absl::OkStatus();
  }

  const uint64_t seed_;  // spec.seed
  const QuantizedOptions options_;
  comm::Communicator* comm_;
  comm::Communicator* device_comm_;  // null: host buffers (no NCCL)
  const int compressed_bits_;  // the width set (8 for dynamic's start)
  int bits_;                   // the width of this step: 32 while the gate probes
  bool dynamic_;
  bool gated_;  // dynamic or denseFallback
  CompressionGate gate_;
  TensorSplit split_;
  std::vector<std::unique_ptr<QuantizeCodec>> quantizers_;
  std::vector<std::unique_ptr<HalfCodec>> halves_;
  std::vector<std::unique_ptr<DeviceQuantizeCodec>> device_quantizers_;
  std::vector<std::unique_ptr<DeviceHalfCodec>> device_halves_;
  std::unique_ptr<DeviceSplit> device_split_;  // bits dynamic on the device
  std::vector<float> large_;
  std::vector<float> small_;
  CompressionTally tally_;
};

}  // namespace

bool quantized_registered = RegisterStrategy(
    "quantized",
    [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      return std::make_unique<Quantized>(context, QuantizedOptionsOf(*context.options));
    });

}  // namespace hptrain::sync
