// fp16: every gradient element travels as IEEE half precision through the compressed ring
// (re-rounded at every hop). Bytes per worker per step: 2(N-1)/N · 2P, half of ssgd's.
// Error feedback (default on; `errorFeedback: false` gives the plain casting of DDP's fp16 hook)
// carries each hop's rounding error, including gradients below fp16's range, into the next step.
// On a GPU with the NCCL back end the buckets stay in device memory: the same ring runs over NCCL
// with the codec's CUDA twin (device_codecs.h), the same bytes on the wire.
#include <memory>
#include <vector>

#include "runtime/base/status.h"
#include "runtime/sync/codecs/device_codecs.h"
#include "runtime/sync/codecs/half_codec.h"
#include "runtime/sync/registry.h"

namespace hptrain::sync {
namespace {

class Fp16 : public Strategy, public SummingReducer {
 public:
  // `device_comm` (may be null): the communicator for device buffers, with device codecs.
  Fp16(comm::Communicator* comm, comm::Communicator* device_comm, bool feedback)
      : comm_(device_comm != nullptr ? device_comm : comm),
        on_device_(device_comm != nullptr),
        feedback_(feedback) {
    traits_ = DeclaredTraits(name());
    traits_.reduces_on_device = on_device_;
  }
  std::string name() const override { return "fp16"; }
  GradientReducer* reducer() override { return this; }

  absl::Status Init(const GradientLayout& layout) override {
    for (const auto& bucket : layout.buckets) {
      const size_t residual = feedback_ ? bucket.end - bucket.begin : 0;
      if (!on_device_) {
        codecs_.push_back(std::make_unique<HalfCodec>(residual));
        continue;
      }
      HPTRAIN_ASSIGN_OR_RETURN(auto codec, DeviceHalfCodec::Create(residual));
      codecs_.push_back(std::move(codec));
    }
    return absl::OkStatus();
  }

  absl::Status ReduceSum(const StepInfo&, int bucket, absl::Span<float> gradients) override {
    return comm_->AllReduceSumCompressed(gradients.data(), gradients.size(), *codecs_[bucket]);
  }

  StrategyStats stats() const override {
    StrategyStats s;
    s.bits = 16;
    s.compression_ratio = 2.0;
    return s;
  }

 private:
  comm::Communicator* comm_;
  bool on_device_;
  bool feedback_;
  std::vector<std::unique_ptr<comm::ChunkCodec>> codecs_;
};

}  // namespace

bool fp16_registered = RegisterStrategy(
    "fp16", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      // fp16's parameters (strategy_descriptors.cc): errorFeedback.
      return std::make_unique<Fp16>(context.comm, context.device_comm,
                                    context.options->Bool("errorFeedback"));
    });

}  // namespace hptrain::sync
