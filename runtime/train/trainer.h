// Trainer: one worker's training loop (libtorch stays behind this header), the first client of
// the exchange library (runtime/sync, docs/adding-a-strategy.md).
//
// Per step (docs/design.md "Training semantics"), top to bottom in TrainStep:
//   1. batch     this worker's slice [o_i, o_i + b_i) of the global batch from the epoch's seeded
//                permutation (data/sampler.h);
//   2. forward   and the task's loss summed over the slice (task.h: cross-entropy, BCE, MSE or a
//                TorchScript module's own), under autocast with spec.precision bf16 or fp16
//                (precision.h; the weights, their gradients and the optimizer stay fp32);
//   3. backward  autograd hooks copy each parameter's gradient into its slot of the flat
//                gradient buffer (flat_model.h); full buckets go to the strategy's reducer (or
//                updater) on the bucketed reducer's thread while backward continues, bucket k+1's
//                exchange issued while k's is still in flight (runtime/comm/work.h).
//                Under loss scaling (fp16) the hooks only store; once every worker found its
//                gradients free of inf/nan the exchange begins, or the step is skipped by all;
//   4. wait      for every bucket's Work: the buffer holds the gradients to step on, the mean
//                over the global batch B (or this worker's own mean, for the averagers);
//   5. update    the local optimizer on the flat parameters (the model's parameters are views
//                into them), then the model averager, if any; or the updater instead
//                (step_exchange.h). A step after which the models agree averages the BatchNorm
//                buffers too.
// At the end of every epoch BatchNorm buffers are averaged over the workers, the test split is
// evaluated in shards and the results all-reduced, so every rank reports the same numbers
// (evaluator.h). When the workers train models of their own (StrategyTraits::models_diverge:
// gossip), each worker's own model is first evaluated on the whole test set
// (EpochStats::worker_test_accuracy). Checkpoints (run_checkpoint.h) are written by rank 0 every
// `checkpoint.intervalSteps` steps and at the end; spec.collect records MP² snapshots on rank 0.
//
// On a GPU (TrainerOptions::device "cuda:N") the model, its flat parameters and gradients, the
// optimizer state and each batch (copied from pinned host memory, asynchronously) live on the
// device. The exchange then takes one of two routes:
//   - device (spec.communicator.backend nccl, StrategyTraits::reduces_on_device): each gradient
//     is copied into a flat device buffer on the default stream; for a full bucket the reducer's
//     thread orders the communicator's stream after those copies (Communicator::WaitForStream)
//     and hands the strategy the device bucket, which NCCL all-reduces on its own stream while
//     backward goes on; the optimizer's stream waits on the collectives' events. Nothing
//     crosses to the host and no thread polls the GPU.
//   - staged (gloo): each gradient is copied into the reducer's host buffer as backward produces
//     it, the strategy exchanges it there as on the CPU, and the reduced gradients go back to the
//     device in one copy before the optimizer step. Several workers can share one GPU this way.
// Averagers and updaters get a host copy of the model, as do Start and Synchronize, written back
// to the device after.
//
// Elastic jobs (TrainerOptions::elastic, docs/elastic.md): before every step the trainer asks the
// membership of that step; a new epoch is a change at this step boundary (Synchronize, the run
// state captured, the exchange rebuilt on the regrouped communicators, rank 0's state loaded by
// every rank as from a checkpoint). A step that fails because a peer vanished is a change too,
// without the Synchronize, continuing from the new rank 0's position. A joiner starts with such a
// change. A worker that is no longer a member leaves: Run returns OK and left() is true.
//
// Thread-safety: one thread drives Run(); callbacks are invoked on that thread.
#ifndef HPTRAIN_RUNTIME_TRAIN_TRAINER_H_
#define HPTRAIN_RUNTIME_TRAIN_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/threads.h"

namespace hptrain::ps {
class PsConnection;
}

namespace hptrain::train {

struct StepStats {
  int64_t step = 0;  // global steps completed (1 after the first step)
  int epoch = 0;
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
  int batch_size = 0;
  double train_loss = 0;       // mean loss over this worker's slice
  double compute_seconds = 0;  // data + forward + backward (+ emulated slowdown)
  double comm_seconds = 0;     // time spent in gradient reduction (overlapped or not)
  double exposed_comm_seconds = 0;
  double step_seconds = 0;
  double lr = 0;
  double compression_ratio = 1.0;  // from the strategy
  int bits = 32;                   // bits per gradient element on the wire (32 = uncompressed)
  int64_t staleness = 0;           // parameter-server strategies: versions the copy lags
  int interval = 1;                // local steps between synchronisations (localsgd, multistep)
  int64_t exchanges = 0;           // gossip: model exchanges so far
  double gossip_threshold = 0;     // gossip: θ in force (0: fixed period, or calibrating)
  // What an adaptive strategy picked and why (StrategyStats::decision); empty for the others.
  std::string strategy_decision;
  // Samples left out of batches so far (both splits) under spec.dataset.skipCorrupt.
  int64_t corrupt_samples = 0;
  // Loss scaling (spec.precision fp16): steps skipped for an inf/nan gradient so far, and the
  // loss scale now (0 without loss scaling).
  int64_t amp_skipped_steps = 0;
  double loss_scale = 0;
};

// One evaluation of the model on the test set: at the end of every epoch and, with
// spec.evalEverySteps, every that many steps within an epoch (interim).
struct EpochStats {
  int epoch = 0;           // 0-based epoch the evaluation falls in
  int64_t step = 0;        // global steps done
  double epochs_done = 0;  // fractional: epoch + steps done in it / steps per epoch
  bool interim = false;    // within the epoch, not at its end
  // The task's metrics (task.h) by name, primary first ({"accuracy", 0.87}, {"top5_accuracy",
  // 0.99}), and the primary one's name.
  std::vector<std::pair<std::string, double>> metrics;
  std::string metric;
  double test_accuracy = 0;  // classification: top-1 accuracy (metrics' "accuracy"); 0 otherwise
  double test_loss = 0;
  double train_loss = 0;    // mean over the epoch's steps so far, all ranks
  double wall_seconds = 0;  // since the run started
  // Strategies whose workers train models of their own (Strategy::models_diverge: gossip) with
  // more than one worker: the primary metric (the accuracy, for classification) of each worker's
  // own model on the whole test set, by rank, measured before the models are averaged (metrics
  // are the average model's).
  // Empty otherwise. The same on every rank.
  std::vector<double> worker_test_accuracy;
  int rank = 0;  // this worker's rank: its own model's entry in worker_test_accuracy
};

// Elastic jobs (docs/elastic.md): a membership epoch as the coordinator set it.
struct MembershipEpoch {
  int64_t epoch = 0;
  std::vector<int> members;      // worker slots, in rank order
  std::vector<int> batch_sizes;  // by rank
  bool lost = false;             // the epoch began because a member was lost
};

// The communicators of a membership epoch, as TrainerCallbacks::regroup connected them.
struct EpochGroup {
  bool left = false;  // this worker is not a member: it leaves the job
  MembershipEpoch membership;
  int rank = 0;
  comm::Communicator* comm = nullptr;
  comm::Communicator* device_comm = nullptr;  // the epoch's NCCL communicator, or null
};

// One membership change as this worker went through it.
struct MembershipChangeStats {
  int64_t epoch = 0;          // the epoch entered
  int64_t step = 0;           // the global step training continues from
  bool planned = true;        // at an agreed step boundary (false: after a failed step)
  double seconds = 0;         // from the change's start to the state loaded
  int64_t dropped_values = 0; // per-worker strategy state dropped (Strategy::UnsavedStateValues)
  int rank = 0;               // this worker's rank in the new epoch
  int world = 0;
  // FNV-1a of the flat parameters training continues from: the same on every rank.
  uint64_t parameters_hash = 0;
};

struct TrainerCallbacks {
  std::function<void(const StepStats&)> on_step;
  std::function<void(const EpochStats&)> on_epoch;  // every evaluation, interim ones included
  // With TrainerOptions::resume, called once before the first step with the global step
  // training resumes from: the checkpoint's, or 0 when there was none to resume from yet.
  std::function<void(int64_t step)> on_resumed;
  // Polled between steps; returning true stops the run with Cancelled.
  std::function<bool()> should_stop;
  // When set, called before every step with its global step number; returns the batch size of
  // every rank for that step (every rank must get the same answer for the same step: the
  // coordinator guarantees it). The trainer switches its slice of the global batch accordingly.
  std::function<absl::StatusOr<std::vector<int>>(int64_t step)> allocation_for_step;

  // Elastic jobs (TrainerOptions::elastic). The membership epoch and allocation in force at every
  // step, in place of allocation_for_step: a step of a new epoch begins a change there.
  std::function<absl::StatusOr<MembershipEpoch>(int64_t step)> membership_for_step;
  // Releases the communicators of the epoch being left (the trainer holds no reference to them any
  // more) and connects those of `target`; after a loss (`after_loss`) the newest epoch, which
  // may be newer than `target`.
  std::function<absl::StatusOr<EpochGroup>(const MembershipEpoch& target, bool after_loss)>
      regroup;
  // Polled between steps: a newer epoch began with a loss, so the step's peers may be gone.
  std::function<bool()> membership_lost;
  std::function<void(const MembershipChangeStats&)> on_membership_change;
};

struct TrainerOptions {
  int rank = 0;
  std::vector<int> allocation;  // batch size of every rank
  bool resume = false;          // continue from spec.checkpoint.path when it exists
  // Workers of the job sharing this host's CPUs, among which spec.threads 0 divides them: all of
  // them in a local run (hptrain run), 1 in a Kubernetes pod.
  int workers_on_host = 1;
  ps::PsConnection* ps = nullptr;  // the job's parameter server (strategies ps, hps), if any
  // The device this worker trains on, as libtorch names it: "cpu", or "cuda:N" for GPU N of
  // those visible to the process (the worker resolves spec.device and its local rank to it).
  std::string device = "cpu";
  // The job's device communicator (NCCL) when spec.communicator.backend resolved to nccl; null
  // otherwise. Its strategy then exchanges gradient buckets in device memory. Outlives the trainer.
  comm::Communicator* device_comm = nullptr;
  // Trains through the GPU code path (flat device buffers, gradients staged to the host for the
  // exchange, the optimizer on the device buffers: its host route there) with CPU tensors:
  // spec.testing.devicePath, so that machines without a GPU test that path. Ignored on "cuda".
  bool device_path_on_cpu = false;
  // spec.elastic: membership changes at step boundaries (the membership callbacks), and a failed
  // step is a loss to recover from rather than the run's end.
  bool elastic = false;
  int64_t membership_epoch = 0;  // the epoch the communicators above belong to
  // The worker's slot (its --rank), which picks its spec.testing.slowdown factor; -1 = rank.
  int slot = -1;
  // A worker joining a running job: the epoch it joins. Its communicators are connected by the
  // first regroup, and its state comes from the members then (comm is null until then).
  std::optional<MembershipEpoch> joining;
};

class Trainer {
 public:
  // Loads the data sets, builds the model and the strategy. `comm` must outlive the trainer.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const job::JobSpec& spec,
                                                         const TrainerOptions& options,
                                                         comm::Communicator* comm,
                                                         TrainerCallbacks callbacks);
  ~Trainer();

  // Runs to the end of the last epoch (or spec.maxSteps), or until this worker leaves an elastic
  // job (left()).
  absl::Status Run();
  // The worker was removed from an elastic job and left it.
  bool left() const;
  // The rank of the communicators in use now (elastic jobs: of the current epoch).
  int rank() const;

  int64_t num_parameters() const;
  // The libtorch threads this worker trains with, and why.
  const ThreadChoice& threads() const;

  class Impl;

 private:
  explicit Trainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_TRAINER_H_
