// fp16: every gradient element travels as IEEE half precision through the compressed ring
// (re-rounded at every hop). Bytes per worker per step: 2(N-1)/N · 2P, half of ssgd's.
// Error feedback (default on; `errorFeedback: false` gives the plain casting of DDP's fp16 hook)
// carries each hop's rounding error, including gradients below fp16's range, into the next step.
#include <memory>
#include <vector>

#include "runtime/sync/codecs/half_codec.h"
#include "runtime/sync/registry.h"

namespace hptrain::sync {
namespace {

class Fp16 : public Strategy {
 public:
  Fp16(comm::Communicator* comm, bool feedback) : comm_(comm), feedback_(feedback) {}
  std::string name() const override { return "fp16"; }
  bool exchanges_parameters() const override { return false; }

  absl::Status Init(const GradientLayout& layout) override {
    for (const auto& bucket : layout.buckets) {
      codecs_.push_back(std::make_unique<HalfCodec>(feedback_ ? bucket.end - bucket.begin : 0));
    }
    return absl::OkStatus();
  }

  absl::Status ReduceGradients(const StepInfo&, int bucket,
                               absl::Span<float> gradients) override {
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
  bool feedback_;
  std::vector<std::unique_ptr<HalfCodec>> codecs_;
};

}  // namespace

bool fp16_registered = RegisterStrategy(
    "fp16", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      return std::make_unique<Fp16>(context.comm,
                                    context.job->strategy.error_feedback.value_or(true));
    });

}  // namespace hptrain::sync
