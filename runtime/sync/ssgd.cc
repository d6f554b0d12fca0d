// ssgd: synchronous SGD, the reference every other strategy is measured against. Each bucket of
// summed gradients is all-reduced (ring, 2(N-1)/N · 4 bytes per element sent per worker). Under
// the priority scheduler (spec.scheduler) the same gradients are all-reduced chunk by chunk,
// input-side layers first, and the trainer updates each layer as its chunks arrive. On a GPU with
// the NCCL back end the buckets are device buffers, all-reduced by NCCL in place.
#include "runtime/sync/registry.h"

namespace hptrain::sync {
namespace {

class Ssgd : public Strategy, public SummingReducer {
 public:
  // `device_comm` (may be null): the communicator for device buffers; the buckets then come from
  // the GPU and go to it.
  Ssgd(comm::Communicator* comm, comm::Communicator* device_comm)
      : comm_(device_comm != nullptr ? device_comm : comm), on_device_(device_comm != nullptr) {
    traits_ = DeclaredTraits(name());
    traits_.reduces_on_device = on_device_;
    // Its exchange is the plain all-reduce of the sums, which the priority scheduler can run
    // layer by layer.
    traits_.supports_scheduler = true;
  }
  std::string name() const override { return "ssgd"; }

  absl::Status ReduceSum(const StepInfo&, int, absl::Span<float> gradients) override {
    return comm_->AllReduceSum(gradients.data(), gradients.size());
  }
  // One collective per bucket: its Work, so that the next bucket's can be in flight with it.
  std::shared_ptr<comm::Work> ReduceSumAsync(const StepInfo&, int,
                                             const comm::BufferRef& gradients) override {
    return comm_->AllReduceSumAsync(gradients);
  }

  GradientReducer* reducer() override { return this; }

 private:
  comm::Communicator* comm_;
  bool on_device_;
};

}  // namespace

// Registered at start-up; hptrain_sync is linked whole-archive so this object is kept.
bool ssgd_registered = RegisterStrategy(
    "ssgd", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      return std::make_unique<Ssgd>(context.comm, context.device_comm);
    });

}  // namespace hptrain::sync
