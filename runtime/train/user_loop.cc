#include "runtime/train/user_loop.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/job/optimizer_options.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/train/data/sampler.h"
#include "runtime/train/flat_model.h"
#include "runtime/train/model_buffers.h"
#include "runtime/train/models/external_model.h"
#include "runtime/train/slowdown.h"
#include "runtime/train/step_exchange.h"
#include "runtime/train/torch_call.h"

namespace hptrain::train {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

// The parts of the loop's state that only this file needs.
struct UserLoop::Private {
  optim::LrScheduleOptions lr_schedule;
  Slowdown slowdown;
  ExchangeTimes times;
  double compute = 0;
  double cpu_start = 0;
  double compute_cpu = 0;
  sync::EpochTiming epoch_timing;
  double epoch_train_loss = 0;  // the last finished epoch's mean loss, all ranks
  torch::Tensor user_grads;     // the user's optimizer's .grad tensors are views into it
};

UserLoop::UserLoop(const job::JobSpec& spec, const TrainerOptions& options,
                   comm::Communicator* comm, TrainerCallbacks callbacks, UserLoopOptions loop)
    : spec_(spec),
      options_(options),
      comm_(comm),
      callbacks_(std::move(callbacks)),
      loop_(std::move(loop)),
      private_(new Private{job::LrScheduleFor(spec.optimizer, spec.epochs),
                           Slowdown(spec.testing.slowdown, spec.testing.slowdown_file,
                                    options.rank, spec.testing.slowdown_window)}) {}

UserLoop::~UserLoop() = default;

absl::StatusOr<std::unique_ptr<UserLoop>> UserLoop::Create(const job::JobSpec& spec,
                                                           const TrainerOptions& options,
                                                           comm::Communicator* comm,
                                                           TrainerCallbacks callbacks,
                                                           UserModel model, UserLoopOptions loop) {
  std::unique_ptr<UserLoop> user_loop(
      new UserLoop(spec, options, comm, std::move(callbacks), std::move(loop)));
  HPTRAIN_RETURN_IF_ERROR(user_loop->Init(std::move(model)));
  return user_loop;
}

absl::Status UserLoop::Init(UserModel model) {
  if (options_.rank < 0 || options_.rank >= static_cast<int>(options_.allocation.size())) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options_.rank, " out of range"));
  }
  if (model.parameters.empty()) {
    return absl::InvalidArgumentError("the model has no parameters that require gradients");
  }
  if (spec_.scheduler.type == "priority") {
    return absl::InvalidArgumentError(
        "spec.scheduler: priority orders the built-in trainer's forward pass; a spec.trainer "
        "program cannot use it");
  }
  steps_per_epoch_ = StepsPerEpoch(loop_.dataset_size, spec_.global_batch_size);
  if (steps_per_epoch_ <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("the training set has ", loop_.dataset_size,
                                                   " samples, fewer than the global batch ",
                                                   spec_.global_batch_size));
  }
  total_steps_ = steps_per_epoch_ * spec_.epochs;
  if (spec_.max_steps > 0) total_steps_ = std::min<int64_t>(total_steps_, spec_.max_steps);

  torch::Device device(torch::kCPU);
  HPTRAIN_RETURN_IF_ERROR(
      TorchCall("choosing the device", [&] { device = torch::Device(options_.device); }));
  for (size_t t = 0; t < model.parameters.size(); ++t) {
    const torch::Tensor& p = model.parameters[t];
    if (p.device() != device) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter ", model.parameter_names[t], " is on ", p.device().str(),
          ", the job trains on ", device.str(), ": move the model to hp.device() first"));
    }
    if (p.scalar_type() != torch::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", model.parameter_names[t], " is ",
                       std::string(c10::toString(p.scalar_type())),
                       ": only float32 parameters are supported"));
    }
  }
  const bool on_device = device.is_cuda() || options_.device_path_on_cpu;
  model_ = std::make_unique<ExternalModel>(std::move(model.parameters),
                                           std::move(model.parameter_names),
                                           std::move(model.buffers), std::move(model.buffer_names));
  HPTRAIN_ASSIGN_OR_RETURN(flat_, FlatModel::Create(model_.get(), device, on_device));
  HPTRAIN_ASSIGN_OR_RETURN(exchange_,
                           StepExchange::Create(spec_, {comm_, options_.ps, options_.device_comm},
                                                flat_.get(), model_.get()));
  sync::Strategy& strategy = exchange_->strategy();
  if (!loop_.own_optimizer && strategy.updater() != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy ", strategy.name(),
        " updates the parameters itself: pass optimizer=None (hptrain's optimizer, "
        "spec.optimizer)"));
  }
  if (!loop_.own_optimizer && strategy.traits().averages_optimizer_state) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy ", strategy.name(),
        " averages the optimizer's state over the workers: pass optimizer=None (hptrain's "
        "optimizer, spec.optimizer)"));
  }
  RegisterHooks();
  run_start_ = Clock::now();
  step_start_ = Clock::now();
  private_->cpu_start = Slowdown::ThreadCpuSeconds();
  return absl::OkStatus();
}

void UserLoop::RegisterHooks() {
  std::vector<torch::Tensor>& params = flat_->parameters();
  for (size_t t = 0; t < params.size(); ++t) {
    const int index = static_cast<int>(t);
    params[t].register_hook([this, index](torch::Tensor grad) {
      {
        std::lock_guard<std::mutex> lock(step_mu_);
        if (!begun_) {
          begun_ = true;
          begin_status_ = BeginStep();
        }
        if (!begin_status_.ok()) return;
      }
      flat_->StoreGradient(index, grad, static_cast<float>(local_batch_));
      exchange_->MarkReady(index);
    });
  }
}

RunState UserLoop::RunParts() {
  return {flat_.get(), model_.get(), &exchange_->optimizer(), &exchange_->strategy()};
}

absl::StatusOr<int64_t> UserLoop::Restore() {
  if (started_) {
    return absl::FailedPreconditionError("restore once, before the first step");
  }
  sync::CheckpointSections restored;
  if (options_.resume && !spec_.checkpoint.path.empty()) {
    HPTRAIN_ASSIGN_OR_RETURN(std::optional<ResumedRun> resumed,
                             ReadRunCheckpoint(spec_.checkpoint.path, RunParts()));
    if (resumed.has_value()) {
      position_ = resumed->position;
      restored = std::move(resumed->strategy_sections);
    }
    if (callbacks_.on_resumed) callbacks_.on_resumed(position_.step);
  }
  flat_->ToHost();
  sync::Strategy& strategy = exchange_->strategy();
  HPTRAIN_RETURN_IF_ERROR(strategy.Start(flat_->host(), position_.step, restored), "strategy ",
                          strategy.name());
  flat_->ToDevice();
  started_ = true;
  return position_.step;
}

absl::StatusOr<std::vector<int>> UserLoop::AllocationFor(int64_t step) {
  std::lock_guard<std::mutex> lock(allocation_mu_);
  if (auto it = allocations_.find(step); it != allocations_.end()) return it->second;
  std::vector<int> allocation = options_.allocation;
  if (callbacks_.allocation_for_step) {
    absl::StatusOr<std::vector<int>> fetched = callbacks_.allocation_for_step(step);
    HPTRAIN_RETURN_IF_ERROR(fetched.status(), "allocation for step ", step);
    allocation = *std::move(fetched);
  }
  if (allocation.size() != options_.allocation.size()) {
    return absl::InternalError(absl::StrCat("allocation for step ", step, " has ",
                                            allocation.size(), " ranks, expected ",
                                            options_.allocation.size()));
  }
  // Steps long done are dropped; the data loader asks a few steps ahead at most.
  while (allocations_.size() > 256) allocations_.erase(allocations_.begin());
  allocations_[step] = allocation;
  return allocation;
}

absl::StatusOr<std::vector<int64_t>> UserLoop::BatchIndices(int64_t step) {
  if (step < 0 || step >= total_steps_) return std::vector<int64_t>();
  const int epoch = static_cast<int>(step / steps_per_epoch_);
  const int64_t step_in_epoch = step % steps_per_epoch_;
  HPTRAIN_ASSIGN_OR_RETURN(std::vector<int> allocation, AllocationFor(step));
  std::lock_guard<std::mutex> lock(perm_mu_);
  if (perm_epoch_ != epoch) {
    perm_ = EpochPermutation(loop_.dataset_size, spec_.seed, epoch);
    perm_epoch_ = epoch;
  }
  return WorkerSlice(perm_, step_in_epoch, spec_.global_batch_size, allocation, options_.rank);
}

absl::Status UserLoop::BeginStep() {
  if (done()) {
    return absl::OutOfRangeError(absl::StrCat("the job's ", total_steps_, " steps are done"));
  }
  if (!started_) HPTRAIN_RETURN_IF_ERROR(Restore().status());
  HPTRAIN_ASSIGN_OR_RETURN(std::vector<int> allocation, AllocationFor(position_.step));
  local_batch_ = allocation[options_.rank];
  sync::StepInfo info;
  info.step = position_.step;
  info.epoch = position_.epoch;
  info.epoch_clock =
      position_.epoch + static_cast<double>(position_.step_in_epoch) / steps_per_epoch_;
  info.local_batch = local_batch_;
  info.global_batch = spec_.global_batch_size;
  info.lr = optim::LearningRate(private_->lr_schedule, position_.epoch, position_.step_in_epoch,
                                steps_per_epoch_);
  lr_ = info.lr;
  HPTRAIN_RETURN_IF_ERROR(TorchCall("clearing the gradients", [&] { flat_->ClearGradients(); }));
  exchange_->BeginStep(info);
  return absl::OkStatus();
}

absl::Status UserLoop::WaitForGradients() {
  {
    std::lock_guard<std::mutex> lock(step_mu_);
    if (!begun_) {
      return absl::FailedPreconditionError(
          "no gradients this step: call loss.backward() before the optimizer's step()");
    }
    HPTRAIN_RETURN_IF_ERROR(begin_status_);
  }
  if (waited_) return absl::OkStatus();
  private_->compute = Since(step_start_);
  private_->compute_cpu = Slowdown::ThreadCpuSeconds() - private_->cpu_start;
  HPTRAIN_RETURN_IF_ERROR(exchange_->WaitForExchange(&private_->times));
  waited_ = true;
  if (loop_.own_optimizer) return absl::OkStatus();
  HPTRAIN_ASSIGN_OR_RETURN(float* grads, exchange_->ReducedGradients());
  return TorchCall("setting the reduced gradients", [&] {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor>& params = flat_->parameters();
    const torch::Device device = flat_->device();
    torch::Tensor reduced = torch::from_blob(
        grads, {flat_->size()}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
    if (!private_->user_grads.defined()) private_->user_grads = torch::empty_like(reduced);
    private_->user_grads.copy_(reduced);
    // The reducer's layout is the parameters' order, packed (bucketed_reducer.h).
    int64_t offset = 0;
    for (auto& p : params) {
      p.mutable_grad() = private_->user_grads.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
    }
  });
}

absl::Status UserLoop::EndStep() {
  HPTRAIN_RETURN_IF_ERROR(WaitForGradients());
  sync::Strategy& strategy = exchange_->strategy();
  if (loop_.own_optimizer && strategy.updater() == nullptr) {
    HPTRAIN_ASSIGN_OR_RETURN(float* grads, exchange_->ReducedGradients());
    HPTRAIN_RETURN_IF_ERROR(exchange_->optimizer().Step(flat_->data(), grads, lr_),
                            "optimizer step");
  }
  ExchangeTimes& times = private_->times;
  HPTRAIN_RETURN_IF_ERROR(exchange_->AfterLocalStep(&times));
  // spec.testing.slowdown: the step stretched as the built-in trainer stretches it.
  const double compute =
      private_->slowdown.Stretch(local_batch_, private_->compute, private_->compute_cpu);
  {
    std::lock_guard<std::mutex> lock(step_mu_);
    begun_ = false;
    waited_ = false;
  }
  ++position_.step;
  ++position_.step_in_epoch;

  StepStats stats;
  stats.step = position_.step;
  stats.epoch = position_.epoch;
  stats.steps_per_epoch = steps_per_epoch_;
  stats.total_steps = total_steps_;
  stats.batch_size = local_batch_;
  stats.compute_seconds = compute;
  stats.comm_seconds = times.comm;
  stats.exposed_comm_seconds = times.exposed;
  stats.step_seconds = Since(step_start_);
  stats.lr = lr_;
  const sync::StrategyStats strategy_stats = strategy.stats();
  stats.compression_ratio = strategy_stats.compression_ratio;
  stats.bits = strategy_stats.bits;
  stats.staleness = strategy_stats.staleness;
  stats.interval = strategy_stats.interval;
  stats.exchanges = strategy_stats.exchanges;
  stats.gossip_threshold = strategy_stats.gossip_threshold;
  stats.strategy_decision = strategy_stats.decision;
  private_->epoch_timing.compute_seconds += compute;
  private_->epoch_timing.comm_seconds += times.comm;
  private_->epoch_timing.exposed_comm_seconds += times.exposed;
  strategy.OnStepTiming({position_.step - 1, compute, times.comm, times.exposed});
  EmitPendingStep();
  pending_ = stats;

  // As the built-in trainer: a step within the epoch may be checkpointed; the epoch's last step
  // (and the run's) is checkpointed after the epoch's end.
  const bool epoch_over = position_.step_in_epoch == steps_per_epoch_;
  if (!epoch_over) HPTRAIN_RETURN_IF_ERROR(SaveCheckpointIfDue(false), "writing checkpoint");
  if (epoch_over || done()) HPTRAIN_RETURN_IF_ERROR(EpochEnd());
  if (epoch_over) {
    ++position_.epoch;
    position_.step_in_epoch = 0;
    HPTRAIN_RETURN_IF_ERROR(SaveCheckpointIfDue(false), "writing checkpoint");
  }
  if (done()) {
    // The final state; its position says "nothing left" for a later resume.
    position_.epoch = spec_.epochs;
    position_.step_in_epoch = 0;
    HPTRAIN_RETURN_IF_ERROR(SaveCheckpointIfDue(true), "writing final checkpoint");
  }
  if (callbacks_.should_stop && callbacks_.should_stop()) {
    return absl::CancelledError("stopped by the coordinator");
  }
  step_start_ = Clock::now();
  private_->cpu_start = Slowdown::ThreadCpuSeconds();
  return absl::OkStatus();
}

void UserLoop::Report(double loss) {
  if (!pending_.has_value()) return;
  pending_->train_loss = loss;
  loss_sum_ += loss * pending_->batch_size;
  loss_count_ += pending_->batch_size;
  EmitPendingStep();
}

void UserLoop::EmitPendingStep() {
  if (!pending_.has_value()) return;
  if (callbacks_.on_step) callbacks_.on_step(*pending_);
  pending_.reset();
}

absl::Status UserLoop::SynchronizeModels(const char* before) {
  return exchange_->Synchronize(position_.step, before);
}

absl::Status UserLoop::EpochEnd() {
  HPTRAIN_RETURN_IF_ERROR(SynchronizeModels("the end of an epoch"));
  HPTRAIN_RETURN_IF_ERROR(AverageBuffers(*model_, *comm_));
  synchronized_step_ = position_.step;
  float train[2] = {static_cast<float>(loss_sum_), static_cast<float>(loss_count_)};
  HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSum(train, 2), "epoch loss all-reduce");
  private_->epoch_train_loss = train[1] > 0 ? train[0] / train[1] : 0.0;
  loss_sum_ = loss_count_ = 0;
  sync::Strategy& strategy = exchange_->strategy();
  private_->epoch_timing.epoch = position_.epoch;
  private_->epoch_timing.train_loss = private_->epoch_train_loss;
  HPTRAIN_RETURN_IF_ERROR(strategy.OnEpochEnd(private_->epoch_timing), "strategy ",
                          strategy.name(), " at the end of epoch ", position_.epoch);
  private_->epoch_timing = sync::EpochTiming();
  return absl::OkStatus();
}

absl::Status UserLoop::SynchronizeForEvaluation() {
  if (!started_) HPTRAIN_RETURN_IF_ERROR(Restore().status());
  if (synchronized_step_ == position_.step) return absl::OkStatus();
  HPTRAIN_RETURN_IF_ERROR(SynchronizeModels("evaluation"));
  HPTRAIN_RETURN_IF_ERROR(AverageBuffers(*model_, *comm_));
  synchronized_step_ = position_.step;
  return absl::OkStatus();
}

absl::Status UserLoop::ReportEvaluation(double accuracy, double loss) {
  EmitPendingStep();
  float values[2] = {static_cast<float>(accuracy), static_cast<float>(loss)};
  HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSum(values, 2), "evaluation all-reduce");
  const int world = comm_->size();
  EpochStats stats;
  // At an epoch's boundary the evaluation is that epoch's; within one, an interim one.
  const bool boundary = position_.step_in_epoch == 0 && position_.step > 0;
  const int finished = std::min(spec_.epochs, position_.epoch);
  stats.epoch = boundary || done() ? std::max(0, finished - 1) : position_.epoch;
  stats.step = position_.step;
  stats.epochs_done =
      boundary || done()
          ? static_cast<double>(position_.step) / steps_per_epoch_
          : position_.epoch + static_cast<double>(position_.step_in_epoch) / steps_per_epoch_;
  stats.interim = !(boundary || done());
  stats.test_accuracy = values[0] / world;
  // The program reports an accuracy: the metric by that name (hptrain_eval_metric, the summary).
  stats.metric = "accuracy";
  stats.metrics = {{"accuracy", stats.test_accuracy}};
  stats.test_loss = values[1] / world;
  stats.train_loss = private_->epoch_train_loss;
  stats.wall_seconds = Since(run_start_);
  stats.rank = options_.rank;
  if (callbacks_.on_epoch) callbacks_.on_epoch(stats);
  return absl::OkStatus();
}

absl::Status UserLoop::SaveCheckpointIfDue(bool force) {
  if (spec_.checkpoint.path.empty()) return absl::OkStatus();
  const int interval = spec_.checkpoint.interval_steps;
  if (!force && (interval <= 0 || position_.step % interval != 0)) return absl::OkStatus();
  return SaveCheckpoint();
}

absl::Status UserLoop::SaveCheckpoint() {
  if (spec_.checkpoint.path.empty()) {
    return absl::FailedPreconditionError("the job has no spec.checkpoint.path");
  }
  // Every rank, so that all continue from the same model.
  HPTRAIN_RETURN_IF_ERROR(SynchronizeModels("a checkpoint"));
  if (options_.rank != 0) return absl::OkStatus();
  if (loop_.before_checkpoint) {
    HPTRAIN_RETURN_IF_ERROR(loop_.before_checkpoint(position_.step), "the program's own state");
  }
  return WriteRunCheckpoint(spec_.checkpoint.path, spec_.name, position_, RunParts());
}

int64_t UserLoop::num_parameters() const { return flat_->size(); }

}  // namespace hptrain::train
