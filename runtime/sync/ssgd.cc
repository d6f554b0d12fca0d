// ssgd: synchronous SGD, the reference every other strategy is measured against. Each bucket of
// summed gradients is all-reduced (ring, 2(N-1)/N · 4 bytes per element sent per worker). Under
// the priority scheduler (spec.scheduler) the same gradients are all-reduced chunk by chunk,
// input-side layers first, and the trainer updates each layer as its chunks arrive.
#include "runtime/sync/registry.h"

namespace hptrain::sync {
namespace {

class Ssgd : public Strategy {
 public:
  explicit Ssgd(comm::Communicator* comm) : comm_(comm) {}
  std::string name() const override { return "ssgd"; }

  absl::Status ReduceGradients(const StepInfo&, int, absl::Span<float> gradients) override {
    return comm_->AllReduceSum(gradients.data(), gradients.size());
  }

  // The scheduler all-reduces the trainer's gradients (PlanScheduledStep's default).
  bool supports_scheduler() const override { return true; }

 private:
  comm::Communicator* comm_;
};

}  // namespace

// Registered at start-up; hptrain_sync is linked whole-archive so this object is kept.
bool ssgd_registered = RegisterStrategy(
    "ssgd", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      return std::make_unique<Ssgd>(context.comm);
    });

}  // namespace hptrain::sync
