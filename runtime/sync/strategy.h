// Strategy: how workers keep their models in agreement. The trainer calls two hooks every step:
//
//   1. ReduceGradients, once per gradient bucket, on the communicator thread while backward is
//      still running (buckets in a fixed order, the same on every rank). The bucket holds this
//      worker's SUMMED gradient (Σ over its b_i samples of ∂loss/∂θ); on return it must hold what
//      the trainer divides by the global batch B before the optimizer step. SSGD all-reduces it,
//      giving Σ_i b_i·g_i / B after the division: weighted aggregation, so any allocation computes
//      the same update as one process with batch B.
//   2. AfterOptimizerStep, on the trainer thread, with the flat parameters after the local update
//      (local SGD, gossip and parameter-server strategies act here).
//
// Strategies see flat float buffers only, never libtorch. They are created by name through the
// registry (registry.h) from the job's strategy block.
#ifndef HPTRAIN_RUNTIME_SYNC_STRATEGY_H_
#define HPTRAIN_RUNTIME_SYNC_STRATEGY_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace hptrain::sync {

struct StepInfo {
  int64_t step = 0;        // global step, 0-based
  int epoch = 0;
  int local_batch = 0;     // b_i of this worker in this step
  int global_batch = 0;    // B
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  virtual std::string name() const = 0;

  // Hook 1 (see above). `bucket` indexes the reducer's buckets; called for every bucket of every
  // step, in bucket order. An error fails the step.
  virtual absl::Status ReduceGradients(const StepInfo& step, int bucket,
                                       absl::Span<float> gradients) = 0;

  // Hook 2 (see above). The default does nothing.
  virtual absl::Status AfterOptimizerStep(const StepInfo& step, absl::Span<float> parameters) {
    (void)step;
    (void)parameters;
    return absl::OkStatus();
  }
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_STRATEGY_H_
