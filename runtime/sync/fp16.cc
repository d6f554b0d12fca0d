// fp16: every gradient element travels as IEEE half precision through the compressed ring
// (re-rounded at every hop). Bytes per worker per step: 2(N-1)/N · 2P, half of ssgd's.
// No error feedback: this is the plain casting baseline (DDP's fp16 compression hook).
#include <memory>
#include <vector>

#include "runtime/sync/codecs/half_codec.h"
#include "runtime/sync/registry.h"

namespace hptrain::sync {
namespace {

class Fp16 : public Strategy {
 public:
  explicit Fp16(comm::Communicator* comm) : comm_(comm) {}
  std::string name() const override { return "fp16"; }

  absl::Status ReduceGradients(const StepInfo&, int, absl::Span<float> gradients) override {
    return comm_->AllReduceSumCompressed(gradients.data(), gradients.size(), codec_);
  }

  StrategyStats stats() const override {
    StrategyStats s;
    s.bits = 16;
    s.compression_ratio = 2.0;
    return s;
  }

 private:
  comm::Communicator* comm_;
  HalfCodec codec_;
};

}  // namespace

bool fp16_registered = RegisterStrategy(
    "fp16", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      return std::make_unique<Fp16>(context.comm);
    });

}  // namespace hptrain::sync
