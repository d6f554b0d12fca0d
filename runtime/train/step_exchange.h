// StepExchange: a worker's side of the exchange library (runtime/sync) for each training step,
// over the model's flat buffers (flat_model.h). It holds the job's strategy, the bucketed reducer
// (runtime/comm/bucketed_reducer.h) that hands each full bucket of backward's gradients to the
// strategy's reducer or updater while backward goes on, and the local optimizer; after backward
// it waits for the buckets' Works and moves the model:
//   a reducer            the optimizer steps on the reduced gradients (already the mean: the
//                        trainer divides by nothing), then the model averager, if any, on the
//                        host copy of the model (with its buffers where the strategy exchanges
//                        them);
//   an updater           in place of the optimizer, on the host copy of the model.
// A step after which every worker holds the same parameters also averages the BatchNorm buffers
// (and the optimizer state, where the strategy asks) over the workers.
#ifndef HPTRAIN_RUNTIME_TRAIN_STEP_EXCHANGE_H_
#define HPTRAIN_RUNTIME_TRAIN_STEP_EXCHANGE_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/comm/bucketed_reducer.h"
#include "runtime/comm/communicator.h"
#include "runtime/job/job_spec.h"
#include "runtime/sync/strategy.h"
#include "runtime/train/flat_model.h"
#include "runtime/train/local_optimizer.h"
#include "runtime/train/models/model.h"

namespace hptrain::ps {
class PsConnection;
}

namespace hptrain::train {

// Where a step's time went besides computing.
struct ExchangeTimes {
  double comm = 0;     // in the exchange (overlapped or not)
  double exposed = 0;  // waited for it after backward
};

class StepExchange {
 public:
  // The communicators the strategy exchanges over; none is owned, all outlive the exchange.
  struct Peers {
    comm::Communicator* comm = nullptr;
    ps::PsConnection* ps = nullptr;             // ps, hps, mp2: the job's parameter server
    comm::Communicator* device_comm = nullptr;  // on a GPU with NCCL: device buckets
  };

  // Creates the strategy of `spec` and binds `flat`'s gradient slots to the reducer. An NCCL
  // device communicator with a strategy that exchanges through host memory is InvalidArgument.
  static absl::StatusOr<std::unique_ptr<StepExchange>> Create(const job::JobSpec& spec,
                                                              const Peers& peers, FlatModel* flat,
                                                              Model* model);

  sync::Strategy& strategy() { return *strategy_; }
  comm::BucketedReducer& reducer() { return *reducer_; }
  LocalOptimizer& optimizer() { return *optimizer_; }

  // Before backward: a new step of the reducer, for `step`.
  void BeginStep(const sync::StepInfo& step);
  // In the autograd hook: tensor `index`'s gradients are in its slot.
  void MarkReady(int index) { reducer_->MarkReady(index); }
  // After backward: waits for the exchange, then the optimizer and the averager, or the
  // updater; then, when the step synchronized the models, AfterSynchronization.
  absl::Status FinishStep(ExchangeTimes* times);
  // FinishStep in its three parts, for a loop that steps with an optimizer of its own
  // (user_loop.h): the exchange awaited; the reduced gradients, flat in the reducer's layout on
  // the training device, valid until the next BeginStep; after the loop's optimizer step, the
  // averager or the updater (and AfterSynchronization when the models then agree).
  absl::Status WaitForExchange(ExchangeTimes* times);
  absl::StatusOr<float*> ReducedGradients();
  absl::Status AfterLocalStep(ExchangeTimes* times);
  // After a step that left every worker with the same parameters: the BatchNorm buffers, and
  // (StrategyTraits::averages_optimizer_state) the optimizer state, averaged over the workers.
  absl::Status AfterSynchronization();
  // Every rank, before an evaluation or a checkpoint: Strategy::Synchronize on the host copy.
  // `before` names the occasion in errors.
  absl::Status Synchronize(int64_t steps_done, const char* before);

 private:
  StepExchange(comm::Communicator* comm, FlatModel* flat, Model* model)
      : comm_(comm), flat_(flat), model_(model) {}
  absl::Status CreateReducer(const job::JobSpec& spec, comm::Communicator* device_comm);
  absl::StatusOr<bool> AverageModels();
  absl::StatusOr<bool> UpdateModel();

  comm::Communicator* comm_;
  FlatModel* flat_;
  Model* model_;
  sync::StepInfo step_;              // the step in progress, as the reducer's thread reads it
  std::vector<float> flat_buffers_;  // the buffers handed to an averager that exchanges them
  std::unique_ptr<sync::Strategy> strategy_;
  std::unique_ptr<LocalOptimizer> optimizer_;
  // The reducer's thread calls into the strategy: declared after it, so destroyed (its thread
  // joined, its Works waited for) first.
  std::unique_ptr<comm::BucketedReducer> reducer_;
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_STEP_EXCHANGE_H_
