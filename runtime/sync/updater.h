// Updater: the strategy component that replaces the local optimizer: the new parameters come from
// elsewhere (the parameter server: ps, hps) or from a delayed global step (multistep, with its
// parameter correction).
//
// Contract:
//   - Accumulate is called as GradientReducer::Reduce is (once per bucket of every step, on the
//     bucketed reducer's thread, in bucket order, while backward may still run) with the bucket of
//     this worker's SUMMED gradient, and returns a Work. The updater keeps what it needs (pushes
//     it to the parameter server, adds it to the round's accumulator, all-reduces a round's
//     sum); the division by the batch belongs to its update, which knows over which samples.
//   - Update is called on every rank after all of the step's Works completed, on the client's
//     thread, instead of an optimizer step, with the model's flat parameters in host memory. It
//     writes the parameters the next step computes on and returns true when every worker now
//     holds the same ones (a synchronization, as ModelAverager::Average's).
//   - With the sub-tensor priority scheduler (StrategyTraits::supports_scheduler; spec.scheduler
//     priority, runtime/comm/priority_scheduler.h) the three scheduled hooks replace Accumulate
//     and Update: the step is planned on the client's thread, then each layer is prepared as
//     backward produces it and finished (updated) as soon as its exchange completes, on the
//     scheduler's thread, while the next step's forward already runs on the layers finished
//     before. Each range is one layer's [begin, end) of the flat buffers; the calls of one step
//     come in no fixed layer order, and never concurrently.
#ifndef HPTRAIN_RUNTIME_SYNC_UPDATER_H_
#define HPTRAIN_RUNTIME_SYNC_UPDATER_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/comm/work.h"
#include "runtime/sync/step_info.h"

namespace hptrain::sync {

// What a scheduled step exchanges: the buffer the scheduler all-reduces in place, in the
// gradients' layout (null: the step has no exchange), and whether the step ends with every
// worker holding the same parameters.
struct ScheduledStep {
  float* exchange = nullptr;
  bool synchronizes = false;
};

class Updater {
 public:
  virtual ~Updater() = default;

  // See the contract above.
  virtual std::shared_ptr<comm::Work> Accumulate(const StepInfo& step, int bucket,
                                                 const comm::BufferRef& gradients) = 0;
  virtual absl::StatusOr<bool> Update(const StepInfo& step, absl::Span<float> parameters) = 0;

  // The scheduled hooks (only for a strategy whose traits say supports_scheduler). Client's
  // thread, before the step's backward (the previous step is done); `gradients` is the client's
  // flat gradient buffer.
  virtual ScheduledStep PlanScheduledStep(const StepInfo& step, float* gradients) {
    (void)step;
    (void)gradients;
    return ScheduledStep();
  }
  // Scheduler thread, when backward has produced the layer's summed gradients.
  virtual absl::Status PrepareRange(const StepInfo& step, size_t begin, size_t end,
                                    const float* gradients) {
    (void)step;
    (void)begin;
    (void)end;
    (void)gradients;
    return absl::OkStatus();
  }
  // Scheduler thread: the layer's update, after its exchange (at once in a step without one).
  // `parameters` is the whole flat model.
  virtual absl::Status FinishRange(const StepInfo& step, size_t begin, size_t end,
                                   const float* gradients, absl::Span<float> parameters) {
    (void)step;
    (void)begin;
    (void)end;
    (void)gradients;
    (void)parameters;
    return absl::OkStatus();
  }
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_UPDATER_H_
