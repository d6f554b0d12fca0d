// GradientReducer: the strategy component that turns each worker's gradients into the gradient
// the local optimizer steps on (the PyTorch analogue is a DDP communication hook). ssgd, fp16,
// quantized, topk and dgc are reducers; localsgd, gossip, hierarchical and mp2 pair one with a
// model averager (model_averager.h).
//
// Contract of Reduce:
//   - The client calls it once per gradient bucket of every step, on one thread (the bucketed
//     reducer's communication thread, runtime/comm/bucketed_reducer.h), in bucket order, the same
//     order on every rank, while backward may still run. `gradients` is the bucket of this
//     worker's SUMMED gradient (Σ over its b_i samples of ∂loss/∂θ), in host memory or, when the
//     strategy's traits say reduces_on_device, in device memory with the stream that consumes it.
//   - It returns a Work (runtime/comm/work.h) at once or when done; the client may issue the next
//     bucket before waiting. Once the Work's Wait returned OK, the bucket holds the gradient the
//     optimizer steps on: for the synchronous reducers the MEAN gradient over the global batch,
//     Σ_i b_i·g_i / B (weighted aggregation: any allocation computes the update of one process
//     with batch B); for the reducers of model-averaging strategies this worker's own mean,
//     G_i / b_i (its node's for hierarchical). The client divides by nothing.
//   - The bucket must stay untouched by the client until then. An error fails the step.
//
// Most reducers compute a sum (an all-reduce of the bucket, or a rescaled local sum) and derive
// from SummingReducer, which divides by B once the sum is complete: the only place gradients are
// divided by the global batch (DivideByGlobalBatch).
#ifndef HPTRAIN_RUNTIME_SYNC_GRADIENT_REDUCER_H_
#define HPTRAIN_RUNTIME_SYNC_GRADIENT_REDUCER_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/comm/work.h"
#include "runtime/sync/step_info.h"

namespace hptrain::sync {

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;

  // See the contract above.
  virtual std::shared_ptr<comm::Work> Reduce(const StepInfo& step, int bucket,
                                             const comm::BufferRef& gradients) = 0;
};

// A reducer whose exchange leaves the bucket holding a sum S (S / B is the gradient to step on).
class SummingReducer : public GradientReducer {
 public:
  // ReduceSumAsync, then the division by B once its Work completed.
  std::shared_ptr<comm::Work> Reduce(const StepInfo& step, int bucket,
                                     const comm::BufferRef& gradients) final;

 protected:
  // The bucket's sum, in place, before returning. `gradients` points to device memory for a
  // strategy that reduces on the device.
  virtual absl::Status ReduceSum(const StepInfo& step, int bucket, absl::Span<float> gradients) = 0;
  // ReduceSum issued asynchronously; the default runs ReduceSum and returns a completed Work. A
  // reducer whose sum is one collective returns the communicator's Work instead.
  virtual std::shared_ptr<comm::Work> ReduceSumAsync(const StepInfo& step, int bucket,
                                                     const comm::BufferRef& gradients);
};

// x *= 1 / B: a host buffer at once; a device buffer enqueued on its stream.
absl::Status DivideByGlobalBatch(const StepInfo& step, const comm::BufferRef& gradients);

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_GRADIENT_REDUCER_H_
