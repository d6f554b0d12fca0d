// UserLoop: the exchange side of a training loop that its user runs (the Python API,
// python/hptrain): their model, their loss, their data loader, with the job's strategy, allocation,
// checkpoints and reports, step for step as the built-in trainer (trainer.h) does them.
//
// The model is the user's (models/external_model.h): its parameters become views into one flat
// buffer (flat_model.h), and autograd hooks hand each gradient to the strategy's reducer as
// backward produces it, multiplied by this worker's batch b_i: the user's loss is a mean over the
// local batch, the reducers take sums, so every strategy steps on Σ b_i·g_i / B as in the built-in
// trainer. One backward per step.
//
// A step, driven by the user's loop:
//   hooks        the first gradient of a step begins it (the allocation of the step, the
//                reducer's new step); each gradient goes to its bucket;
//   EndStep      with hptrain's optimizer (spec.optimizer): waits for the exchange, steps, then
//                the averager, or the updater in its place;
//   or           WaitForGradients (the reduced gradients written into each parameter's .grad),
//                the user's optimizer steps, then EndStep runs the averager;
//   then         the step's record (StepStats, sent once Report adds the loss, or with the next
//                step), and at an epoch's end what the built-in trainer does there: the models
//                synchronized (Strategy::Synchronize), the BatchNorm buffers averaged, the
//                strategy's epoch hook; checkpoints every spec.checkpoint.intervalSteps, at each
//                epoch's end and after the last step (rank 0, before each write the
//                `before_checkpoint` hook, which saves the user's own state beside it).
// The global batch's order is the built-in trainer's (data/sampler.h): BatchIndices(step) is
// this worker's slice of step `step`, under the allocation in force at that step.
//
// Thread-safety: one thread drives the loop; the hooks run on autograd's thread, and
// BatchIndices may run ahead on the data loader's.
#ifndef HPTRAIN_RUNTIME_TRAIN_USER_LOOP_H_
#define HPTRAIN_RUNTIME_TRAIN_USER_LOOP_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/run_checkpoint.h"
#include "runtime/train/trainer.h"

namespace hptrain::train {

class FlatModel;
class ExternalModel;
class StepExchange;

struct UserModel {
  std::vector<torch::Tensor> parameters;  // float32, on the training device
  std::vector<std::string> parameter_names;
  std::vector<torch::Tensor> buffers;  // floating-point buffers (BatchNorm statistics)
  std::vector<std::string> buffer_names;
};

struct UserLoopOptions {
  // hptrain's optimizer (spec.optimizer, its LR schedule) steps; false: the user's optimizer
  // does, between WaitForGradients and EndStep (strategies with an updater refuse it).
  bool own_optimizer = true;
  int64_t dataset_size = 0;  // training samples: the steps per epoch follow
  // Rank 0, before every checkpoint write, with the step it records.
  std::function<absl::Status(int64_t step)> before_checkpoint;
};

class UserLoop {
 public:
  static absl::StatusOr<std::unique_ptr<UserLoop>> Create(const job::JobSpec& spec,
                                                          const TrainerOptions& options,
                                                          comm::Communicator* comm,
                                                          TrainerCallbacks callbacks,
                                                          UserModel model,
                                                          UserLoopOptions loop);
  ~UserLoop();

  // With TrainerOptions::resume, the checkpoint at spec.checkpoint.path into the model, the
  // optimizer and the strategy; returns the step training continues from (0: none yet). Once,
  // before the first step. Without resume: 0, and the strategy starts fresh.
  absl::StatusOr<int64_t> Restore();

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t total_steps() const { return total_steps_; }
  // The position of the next step.
  const RunPosition& position() const { return position_; }
  bool done() const { return position_.step >= total_steps_; }

  // This worker's slice of global step `step` (>= the next step): indices into the data set.
  absl::StatusOr<std::vector<int64_t>> BatchIndices(int64_t step);

  // The user's optimizer: the step's exchange awaited, the reduced gradients in each
  // parameter's .grad.
  absl::Status WaitForGradients();
  // Ends the step (see the header comment). FailedPrecondition when no backward ran.
  absl::Status EndStep();
  // The last step's loss (this worker's mean) for its record and the epoch's mean.
  void Report(double loss);

  // Every rank: the models made the same (a no-op when they were at this step already) and the
  // BatchNorm buffers averaged, for an evaluation.
  absl::Status SynchronizeForEvaluation();
  // Every rank, after an evaluation of the synchronized model: `accuracy` and `loss` (means
  // over the ranks' values) reported as the evaluation of the current position.
  absl::Status ReportEvaluation(double accuracy, double loss);
  // Every rank: a checkpoint of the current position now (spec.checkpoint.path).
  absl::Status SaveCheckpoint();

  int64_t num_parameters() const;

 private:
  UserLoop(const job::JobSpec& spec, const TrainerOptions& options, comm::Communicator* comm,
           TrainerCallbacks callbacks, UserLoopOptions loop);
  absl::Status Init(UserModel model);
  void RegisterHooks();
  absl::StatusOr<std::vector<int>> AllocationFor(int64_t step);
  // From the first hook of a step.
  absl::Status BeginStep();
  absl::Status SynchronizeModels(const char* before);
  absl::Status EpochEnd();
  absl::Status SaveCheckpointIfDue(bool force);
  void EmitPendingStep();
  RunState RunParts();

  job::JobSpec spec_;
  TrainerOptions options_;
  comm::Communicator* comm_;
  TrainerCallbacks callbacks_;
  UserLoopOptions loop_;

  std::unique_ptr<ExternalModel> model_;
  std::unique_ptr<FlatModel> flat_;
  std::unique_ptr<StepExchange> exchange_;

  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  RunPosition position_;
  bool started_ = false;
  int64_t synchronized_step_ = -1;  // the step after which the models were last made the same

  // The step in progress: begun by the first hook.
  std::mutex step_mu_;
  bool begun_ = false;
  absl::Status begin_status_;
  bool waited_ = false;
  int local_batch_ = 0;
  double lr_ = 0;
  std::chrono::steady_clock::time_point step_start_;

  std::mutex allocation_mu_;
  std::map<int64_t, std::vector<int>> allocations_;  // by step, from the next step on
  std::vector<int64_t> perm_;
  int perm_epoch_ = -1;
  std::mutex perm_mu_;

  std::optional<StepStats> pending_;  // the last step's record, until Report adds its loss
  double loss_sum_ = 0, loss_count_ = 0;  // this epoch's reported losses, weighted by batch
  std::chrono::steady_clock::time_point run_start_;
  struct Private;
  std::unique_ptr<Private> private_;
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_USER_LOOP_H_
