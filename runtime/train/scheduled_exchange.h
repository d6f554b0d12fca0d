// ScheduledExchange: a step's exchange under the sub-tensor priority scheduler (spec.scheduler.type
// priority; runtime/comm/priority_scheduler.h) instead of the bucketed reducer, for the strategies
// whose traits say supports_scheduler. Each layer is exchanged as backward produces it and
// updated as soon as its exchange completes, on the scheduler's thread, while the next step's
// forward already runs on the layers finished before (a model that gates its forward waits layer
// by layer; any other waits for the whole update).
//   - A reducer's step (ssgd): the scheduler all-reduces the summed gradients layer by layer;
//     each finished layer is divided by B (sync::DivideByGlobalBatch) and stepped by the local
//     optimizer.
//   - An updater's step (multistep): the updater plans the step (Updater::PlanScheduledStep) and
//     prepares and finishes each layer itself.
#ifndef HPTRAIN_RUNTIME_TRAIN_SCHEDULED_EXCHANGE_H_
#define HPTRAIN_RUNTIME_TRAIN_SCHEDULED_EXCHANGE_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/comm/bucketed_reducer.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/priority_scheduler.h"
#include "runtime/job/job_spec.h"
#include "runtime/sync/strategy.h"
#include "runtime/train/flat_model.h"
#include "runtime/train/local_optimizer.h"
#include "runtime/train/models/model.h"

namespace hptrain::train {

class ScheduledExchange {
 public:
  // InvalidArgument naming spec.scheduler.type when the strategy does not support the scheduler.
  // `layout` (the reducer) gives the tensors' ranges and the flat gradient buffer; none of the
  // pointers is owned.
  static absl::StatusOr<std::unique_ptr<ScheduledExchange>> Create(
      const job::ExchangeSchedulerSpec& spec, sync::Strategy* strategy, comm::Communicator* comm,
      comm::BucketedReducer* layout, FlatModel* flat, LocalOptimizer* optimizer, Model* model);

  // Before the step's backward: waits for the previous step's exchange and updates, plans
  // `step` and starts it.
  absl::Status Begin(const sync::StepInfo& step);
  // In the autograd hook: tensor `index`'s gradients are in the buffer.
  void MarkReady(int index) { scheduler_->MarkReady(index); }
  // After backward: the layers left are exchanged and updated in the background.
  void EndBackward() { scheduler_->EndBackward(); }
  // Waits until every step begun is finished (before any collective of the trainer's own and
  // anything that reads the whole model). Errors name the step.
  absl::Status Drain(int64_t last_step);
  // Exchange and exposed seconds since the last call.
  void TakeSeconds(double* comm_seconds, double* exposed_seconds) {
    scheduler_->TakeSeconds(comm_seconds, exposed_seconds);
  }
  // Whether the step last begun ends with every worker holding the same parameters.
  bool synchronizes() const { return synchronizes_; }

 private:
  ScheduledExchange(sync::Strategy* strategy, comm::BucketedReducer* layout, FlatModel* flat,
                    LocalOptimizer* optimizer)
      : strategy_(strategy), layout_(layout), flat_(flat), optimizer_(optimizer) {}

  sync::Strategy* strategy_;
  comm::BucketedReducer* layout_;
  FlatModel* flat_;
  LocalOptimizer* optimizer_;
  // The step the scheduler works on: written only while it is idle, as the trainer's own step
  // info already describes the next step while it runs.
  sync::StepInfo step_;
  bool synchronizes_ = false;
  // Declared last: destroyed (its thread joined) before what its hooks use.
  std::unique_ptr<comm::PriorityScheduler> scheduler_;
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_SCHEDULED_EXCHANGE_H_
