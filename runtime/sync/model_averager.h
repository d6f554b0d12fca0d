// ModelAverager: the strategy component that brings the workers' models together after each
// local optimizer step (the PyTorch analogue is torch.distributed's model averagers). localsgd
// (every H steps), hierarchical (every K′ steps, across nodes), gossip (with one partner, when
// the trigger fires) and mp2 (each worker's model replaced by the parameter server's) are
// averagers, each paired with a reducer that gives the local optimizer this worker's own mean
// gradient.
//
// Contract of Average:
//   - The client calls it on every rank after every local optimizer step, on its own thread, with
//     the model in host memory (a client training on a GPU copies it to the host before and back
//     after). It may read and write the parameters (and the buffers, when the strategy's traits
//     say exchanges_buffers) and run collectives.
//   - It returns true when the call left every worker with the same parameters (a synchronization:
//     localsgd's and hierarchical's averages, every mp2 round). The client then averages the
//     BatchNorm buffers over the workers as well (docs/algorithms.md §3b, §1b), and the optimizer
//     state where the traits say averages_optimizer_state. Every rank returns the same answer for
//     the same step.
#ifndef HPTRAIN_RUNTIME_SYNC_MODEL_AVERAGER_H_
#define HPTRAIN_RUNTIME_SYNC_MODEL_AVERAGER_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/sync/step_info.h"

namespace hptrain::sync {

// The model as a strategy sees it: its flat parameters and, for a strategy that exchanges them
// (StrategyTraits::exchanges_buffers), its flattened buffers (BatchNorm running statistics).
struct ModelView {
  absl::Span<float> parameters;
  absl::Span<float> buffers;  // empty unless the strategy exchanges buffers
};

class ModelAverager {
 public:
  virtual ~ModelAverager() = default;

  // See the contract above.
  virtual absl::StatusOr<bool> Average(const StepInfo& step, const ModelView& model) = 0;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_MODEL_AVERAGER_H_
