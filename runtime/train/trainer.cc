#include "runtime/train/trainer.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/job/optimizer_options.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/ps/mp2/dataset.h"
#include "runtime/ps/ps_connection.h"
#include "runtime/ps/mp2/job_options.h"
#include "runtime/train/batch_loader.h"
#include "runtime/train/data/dataset.h"
#include "runtime/train/data/sampler.h"
#include "runtime/train/evaluator.h"
#include "runtime/train/flat_model.h"
#include "runtime/train/local_optimizer.h"
#include "runtime/train/model_buffers.h"
#include "runtime/train/models/model.h"
#include "runtime/train/precision.h"
#include "runtime/train/preflight.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/run_checkpoint.h"
#include "runtime/train/scheduled_exchange.h"
#include "runtime/train/slowdown.h"
#include "runtime/train/step_exchange.h"
#include "runtime/train/task.h"
#include "runtime/train/torch_call.h"

namespace hptrain::train {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// FNV-1a over the bytes of `values`: equal parameters on every rank give equal hashes.
uint64_t Fnv1a(absl::Span<const float> values) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) {
    hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

class Trainer::Impl {
 public:
  Impl(const job::JobSpec& spec, const TrainerOptions& options, comm::Communicator* comm,
       TrainerCallbacks callbacks)
      : spec_(spec),
        options_(options),
        comm_(comm),
        callbacks_(std::move(callbacks)),
        slowdown_(spec.testing.slowdown, spec.testing.slowdown_file,
                  options.slot >= 0 ? options.slot : options.rank,
                  spec.testing.slowdown_window) {}

  absl::Status Init();
  absl::Status Run();
  int64_t num_parameters() const { return flat_->size(); }
  const ThreadChoice& threads() const { return threads_; }
  bool left() const { return left_; }
  int rank() const { return options_.rank; }

 private:
  // What needs the communicators: the evaluator, the step exchange (strategy and local optimizer)
  // and the scheduler; built at Init and again at every membership change.
  absl::Status BuildExchange();
  // The epochs from the current position to the end (or to an elastic job's next change).
  absl::Status TrainEpochs();
  // Elastic jobs (docs/elastic.md): the change to `target` (planned: at this step boundary;
  // otherwise after a failed step, or as a joiner).
  absl::Status ChangeMembership(const MembershipEpoch& target, bool planned, bool after_loss);
  // ChangeMembership, done again while a member is lost during it.
  absl::Status ChangeMembershipUntilDone(const MembershipEpoch& target, bool planned,
                                         bool after_loss);
  // What a vanished peer does to a step or a change (collectives, parameter-server calls, the
  // rendezvous): recovered from in an elastic job, not the run's end.
  bool PeerFailure(const absl::Status& status);
  // The torch device of options_.device, made current, with the job's cuDNN settings.
  absl::StatusOr<torch::Device> SelectDevice();
  // Autograd hooks: each finished gradient into its slot, then marked ready.
  void RegisterHooks();
  absl::Status TrainStep(const std::vector<int64_t>& perm, int epoch, int64_t step_in_epoch,
                         int64_t steps_per_epoch, StepStats* stats);
  // callbacks_.allocation_for_step's allocation for the next step, when there is the callback.
  absl::Status FollowAllocation();
  absl::Status ForwardBackward(const Batch& batch, const std::vector<int64_t>& perm,
                               int64_t step_in_epoch, int64_t steps_per_epoch, double* loss);
  // Under loss scaling, after backward: the exchange started once every worker's gradients are
  // finite and awaited, or the step skipped by all (precision.h).
  absl::Status FinishScaledStep(ExchangeTimes* times);
  // Under the scheduler, after backward: the step's exchange times; the models' agreement
  // awaited where the step synchronizes them (or the recorder reads them).
  absl::Status FinishScheduledStep(double* compute, ExchangeTimes* times);
  void FillStats(int epoch, int local_batch, double loss, double compute,
                 const ExchangeTimes& times, Clock::time_point step_start, StepStats* stats);
  // Every rank, before an evaluation or a checkpoint: the exchange drained and the strategy's
  // Synchronize, so that the model is the one of exactly the steps done, the same everywhere.
  absl::Status SynchronizeModels(const char* before);
  // Evaluates the model after `steps_done` steps of `epoch` and reports it; at the epoch's end
  // (not `interim`) the strategy's epoch hook runs too.
  absl::Status Evaluation(int epoch, int64_t steps_done, int64_t steps_per_epoch, bool interim,
                          double loss_sum, double loss_count);
  absl::Status SaveCheckpointIfDue(bool force, int epoch, int64_t next_step_in_epoch);
  RunState RunParts() {
    return {flat_.get(), model_.get(), &exchange_->optimizer(), &exchange_->strategy()};
  }
  // Waits until the scheduler (if any) has finished every step begun.
  absl::Status Drain() {
    return scheduled_ ? scheduled_->Drain(global_step_ - 1) : absl::OkStatus();
  }

  job::JobSpec spec_;
  TrainerOptions options_;
  comm::Communicator* comm_;
  TrainerCallbacks callbacks_;
  ThreadChoice threads_;

  std::unique_ptr<Dataset> train_data_;
  std::unique_ptr<Dataset> test_data_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<FlatModel> flat_;
  std::unique_ptr<Task> task_;  // spec.task: the loss and the metrics
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<BatchLoader> loader_;
  std::unique_ptr<StepExchange> exchange_;
  // spec.precision: autocast, and under loss scaling (fp16) the check before the exchange.
  std::unique_ptr<MixedPrecision> precision_;
  std::vector<char> stored_;  // under loss scaling: the tensors backward stored this step
  optim::LrScheduleOptions lr_schedule_;
  sync::StepInfo step_info_;
  // spec.scheduler priority (null otherwise). Declared after what its hooks use, so that it is
  // destroyed (its thread joined) first.
  std::unique_ptr<ScheduledExchange> scheduled_;
  sync::EpochTiming epoch_timing_;
  Slowdown slowdown_;
  // spec.collect on rank 0: the MP² snapshot dataset being recorded.
  std::unique_ptr<ps::mp2::SnapshotRecorder> recorder_;

  int64_t global_step_ = 0;
  int start_epoch_ = 0;
  int64_t start_step_in_epoch_ = 0;
  // The position of the step being trained (or the next one): what a membership change resumes.
  int position_epoch_ = 0;
  int64_t position_step_in_epoch_ = 0;
  Clock::time_point run_start_;
  // Elastic jobs: the epoch of the communicators in use, the change the next step begins, and
  // whether this worker left.
  int64_t membership_epoch_ = 0;
  std::optional<MembershipEpoch> pending_change_;
  bool left_ = false;
  // The run state captured for a change that has not completed (what rank 0 sends).
  std::optional<Checkpoint> held_state_;
};

absl::StatusOr<torch::Device> Trainer::Impl::SelectDevice() {
  torch::Device device(torch::kCPU);
  HPTRAIN_RETURN_IF_ERROR(
      TorchCall("choosing the device", [&] { device = torch::Device(options_.device); }));
  if (!device.is_cuda()) return device;
  if (const int visible = VisibleCudaDevices(); device.index() >= visible) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", options_.device, ": only ", visible, " GPU(s) visible"));
  }
  // This thread's current device (allocations, cuDNN, the autograd thread it starts), whether
  // convolutions use cuDNN (spec.testing.cudnn), and cuDNN's algorithm choice: deterministic,
  // untuned and in full fp32 (no TF32, which rounds convolution inputs to 10 mantissa bits), or
  // autotuned per input shape with PyTorch's default TF32 convolutions.
  HPTRAIN_RETURN_IF_ERROR(TorchCall("selecting the GPU", [&] {
    c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
    at::globalContext().setUserEnabledCuDNN(spec_.testing.cudnn);
    at::globalContext().setDeterministicCuDNN(spec_.deterministic);
    at::globalContext().setBenchmarkCuDNN(!spec_.deterministic);
    if (spec_.deterministic) {
      at::globalContext().setAllowTF32CuDNN(false);
      at::globalContext().setAllowTF32CuBLAS(false);
    }
  }));
  return device;
}

absl::Status Trainer::Impl::Init() {
  HPTRAIN_RETURN_IF_ERROR(CheckDevice(spec_, options_.device));
  if (options_.rank < 0 || options_.rank >= static_cast<int>(options_.allocation.size())) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options_.rank, " out of range"));
  }
  HPTRAIN_ASSIGN_OR_RETURN(torch::Device device, SelectDevice());
  HPTRAIN_ASSIGN_OR_RETURN(precision_, MixedPrecision::Create(spec_, device, options_.rank));
  const bool on_device = device.is_cuda() || options_.device_path_on_cpu;
  // By default each worker gets its share of the CPU quota (or cores) of its host (threads.h).
  threads_ = ChooseThreads(spec_.threads, options_.workers_on_host);
  torch::set_num_threads(threads_.threads);
  HPTRAIN_ASSIGN_OR_RETURN(train_data_, OpenDataset(spec_.dataset, Split::kTrain, spec_.seed));
  HPTRAIN_ASSIGN_OR_RETURN(test_data_, OpenDataset(spec_.dataset, Split::kTest, spec_.seed));
  HPTRAIN_ASSIGN_OR_RETURN(model_,
                           CreateModel(spec_.model, ModelShapeFor(*train_data_), spec_.seed));
  // Built on the CPU from the seed (the same weights on every device), then moved.
  if (on_device) HPTRAIN_RETURN_IF_ERROR(model_->to(device));
  HPTRAIN_ASSIGN_OR_RETURN(flat_, FlatModel::Create(model_.get(), device, on_device));
  HPTRAIN_ASSIGN_OR_RETURN(task_,
                           CreateTask(spec_.task, train_data_->targets(), model_.get()));
  loader_ = std::make_unique<BatchLoader>(train_data_.get(), flat_.get());
  lr_schedule_ = job::LrScheduleFor(spec_.optimizer, spec_.epochs);
  membership_epoch_ = options_.membership_epoch;
  if (options_.ps != nullptr) options_.ps->set_membership_epoch(membership_epoch_);
  RegisterHooks();
  // A joiner has no communicators yet: its exchange is built, and its state loaded, by the change
  // that lets it in (Run).
  if (options_.joining.has_value()) return absl::OkStatus();
  HPTRAIN_RETURN_IF_ERROR(BuildExchange());
  sync::CheckpointSections restored;
  if (options_.resume && !spec_.checkpoint.path.empty()) {
    HPTRAIN_ASSIGN_OR_RETURN(std::optional<ResumedRun> resumed,
                             ReadRunCheckpoint(spec_.checkpoint.path, RunParts()));
    if (resumed.has_value()) {
      global_step_ = resumed->position.step;
      start_epoch_ = resumed->position.epoch;
      start_step_in_epoch_ = resumed->position.step_in_epoch;
      restored = std::move(resumed->strategy_sections);
    }
    if (callbacks_.on_resumed) callbacks_.on_resumed(global_step_);
  }
  flat_->ToHost();
  sync::Strategy& strategy = exchange_->strategy();
  HPTRAIN_RETURN_IF_ERROR(strategy.Start(flat_->host(), global_step_, restored), "strategy ",
                          strategy.name());
  flat_->ToDevice();
  if (options_.rank == 0 && !spec_.collect.path.empty()) {
    std::vector<int64_t> tensor_sizes;
    for (const auto& p : flat_->parameters()) tensor_sizes.push_back(p.numel());
    recorder_ = std::make_unique<ps::mp2::SnapshotRecorder>(ps::mp2::RecorderOptionsFor(spec_),
                                                            tensor_sizes);
  }
  return absl::OkStatus();
}

void Trainer::Impl::RegisterHooks() {
  // The returned undefined tensor leaves the gradient itself unchanged.
  std::vector<torch::Tensor>& params = flat_->parameters();
  stored_.assign(params.size(), 0);
  for (size_t t = 0; t < params.size(); ++t) {
    const int index = static_cast<int>(t);
    params[t].register_hook([this, index](torch::Tensor grad) {
      if (precision_->scales_loss()) {  // unscaled as stored; the exchange starts after the check
        flat_->StoreGradient(index, grad, precision_->gradient_scale());
        stored_[index] = 1;
        return;
      }
      flat_->StoreGradient(index, grad);
      if (scheduled_) {
        scheduled_->MarkReady(index);
      } else {
        exchange_->MarkReady(index);
      }
    });
  }
}

absl::Status Trainer::Impl::BuildExchange() {
  evaluator_ =
      std::make_unique<Evaluator>(test_data_.get(), model_.get(), task_.get(), comm_,
                                  options_.rank,
                                  [this](const torch::Tensor& t) { return flat_->Load(t); });
  HPTRAIN_ASSIGN_OR_RETURN(exchange_,
                           StepExchange::Create(spec_, {comm_, options_.ps, options_.device_comm},
                                                flat_.get(), model_.get()));
  if (spec_.scheduler.type == "priority") {
    HPTRAIN_ASSIGN_OR_RETURN(
        scheduled_, ScheduledExchange::Create(spec_.scheduler, &exchange_->strategy(), comm_,
                                              &exchange_->reducer(), flat_.get(),
                                              &exchange_->optimizer(), model_.get()));
  }
  return absl::OkStatus();
}

absl::Status Trainer::Impl::FollowAllocation() {
  if (callbacks_.membership_for_step) {
    absl::StatusOr<MembershipEpoch> membership = callbacks_.membership_for_step(global_step_);
    HPTRAIN_RETURN_IF_ERROR(membership.status(), "membership for step ", global_step_);
    if (membership->epoch != membership_epoch_) {
      pending_change_ = *std::move(membership);
      return absl::AbortedError(absl::StrCat("membership epoch ", pending_change_->epoch,
                                             " begins at step ", global_step_));
    }
    options_.allocation = std::move(membership->batch_sizes);
    return absl::OkStatus();
  }
  if (!callbacks_.allocation_for_step) return absl::OkStatus();
  absl::StatusOr<std::vector<int>> fetched = callbacks_.allocation_for_step(global_step_);
  HPTRAIN_RETURN_IF_ERROR(fetched.status(), "allocation for step ", global_step_);
  if (fetched->size() != options_.allocation.size()) {
    return absl::InternalError(absl::StrCat("allocation for step ", global_step_, " has ",
                                            fetched->size(), " ranks, expected ",
                                            options_.allocation.size()));
  }
  options_.allocation = *std::move(fetched);
  return absl::OkStatus();
}

absl::Status Trainer::Impl::TrainStep(const std::vector<int64_t>& perm, int epoch,
                                      int64_t step_in_epoch, int64_t steps_per_epoch,
                                      StepStats* stats) {
  HPTRAIN_RETURN_IF_ERROR(FollowAllocation());
  const auto step_start = Clock::now();  // compute time excludes asking for the allocation
  const double cpu_start = Slowdown::ThreadCpuSeconds();
  const int rank = options_.rank;
  const int local_batch = options_.allocation[rank];
  step_info_.step = global_step_;
  step_info_.epoch = epoch;
  step_info_.epoch_clock = epoch + static_cast<double>(step_in_epoch) / steps_per_epoch;
  step_info_.local_batch = local_batch;
  step_info_.global_batch = spec_.global_batch_size;
  step_info_.lr = optim::LearningRate(lr_schedule_, epoch, step_in_epoch, steps_per_epoch);
  // Dropout and other random layers draw from a generator keyed by step and rank, so a resumed
  // run repeats them exactly.
  torch::manual_seed(spec_.seed * 1000003ULL + global_step_ * 131ULL + rank);

  // 1. This worker's slice of the global batch; the next step's is announced to the data set,
  // whose source may decode it meanwhile (the allocation may still change: only a hint).
  HPTRAIN_ASSIGN_OR_RETURN(
      Batch batch, loader_->Load(global_step_, epoch,
                                 WorkerSlice(perm, step_in_epoch, spec_.global_batch_size,
                                             options_.allocation, rank)));
  if (step_in_epoch + 1 < steps_per_epoch) {
    loader_->Hint(WorkerSlice(perm, step_in_epoch + 1, spec_.global_batch_size,
                              options_.allocation, rank));
  }
  // 2. Forward and backward; the hooks feed the exchange as gradients are produced.
  double loss = 0;
  HPTRAIN_RETURN_IF_ERROR(ForwardBackward(batch, perm, step_in_epoch, steps_per_epoch, &loss));
  double compute = Since(step_start);
  const double compute_cpu = Slowdown::ThreadCpuSeconds() - cpu_start;
  // 3. The exchange completes; the optimizer, averager or updater moves the model.
  ExchangeTimes times;
  if (scheduled_) {
    HPTRAIN_RETURN_IF_ERROR(FinishScheduledStep(&compute, &times));
  } else if (precision_->scales_loss()) {
    HPTRAIN_RETURN_IF_ERROR(FinishScaledStep(&times));
  } else {
    HPTRAIN_RETURN_IF_ERROR(exchange_->FinishStep(&times));
  }

  // The compute time reported is what the worker really spent: the stretch as slept, since a
  // sleep may end late on a busy machine.
  compute = slowdown_.Stretch(local_batch, compute, compute_cpu);
  ++global_step_;
  if (recorder_) {
    flat_->ToHost();
    recorder_->Record(global_step_, flat_->host().data());
  }
  FillStats(epoch, local_batch, loss, compute, times, step_start, stats);
  return absl::OkStatus();
}

absl::Status Trainer::Impl::FinishScaledStep(ExchangeTimes* times) {
  HPTRAIN_ASSIGN_OR_RETURN(
      bool applied, precision_->CheckGradients(global_step_, *flat_, exchange_->reducer(), stored_,
                                               *comm_));
  if (!applied) {
    // Every worker skips it: the model, the optimizer and the strategy stay as they were.
    if (options_.rank == 0) {
      std::fprintf(stderr,
                   "hptrain worker: step %lld skipped: a gradient has an inf or nan (loss scale "
                   "now %g)\n",
                   static_cast<long long>(global_step_), precision_->loss_scale());
    }
    return absl::OkStatus();
  }
  exchange_->BeginStep(step_info_);
  for (size_t t = 0; t < stored_.size(); ++t) {
    if (stored_[t]) exchange_->MarkReady(static_cast<int>(t));
  }
  return exchange_->FinishStep(times);
}

absl::Status Trainer::Impl::FinishScheduledStep(double* compute, ExchangeTimes* times) {
  // The layers are updated as their exchange completes, during the next forward; the forward's
  // and Begin's waits are exposed communication, not compute.
  scheduled_->EndBackward();
  scheduled_->TakeSeconds(&times->comm, &times->exposed);
  *compute = std::max(0.0, *compute - times->exposed);
  if (!scheduled_->synchronizes() && !recorder_) return absl::OkStatus();
  HPTRAIN_RETURN_IF_ERROR(Drain());
  ExchangeTimes more;
  scheduled_->TakeSeconds(&more.comm, &more.exposed);
  times->comm += more.comm;
  times->exposed += more.exposed;
  if (!scheduled_->synchronizes()) return absl::OkStatus();
  return Annotate(exchange_->AfterSynchronization(), absl::StrCat("step ", global_step_));
}

absl::Status Trainer::Impl::ForwardBackward(const Batch& batch, const std::vector<int64_t>& perm,
                                            int64_t step_in_epoch, int64_t steps_per_epoch,
                                            double* loss_value) {
  // Under the scheduler the previous step's exchange may still run: a model whose forward
  // waits layer by layer starts at once, any other waits for the whole update first. Under loss
  // scaling the exchange begins after backward (FinishScaledStep).
  if (!scheduled_) {
    if (!precision_->scales_loss()) exchange_->BeginStep(step_info_);
  } else if (!model_->gates_forward()) {
    HPTRAIN_RETURN_IF_ERROR(Drain());
  }
  absl::Status scheduled;
  HPTRAIN_RETURN_IF_ERROR(TorchCall("forward/backward", [&] {
    for (auto& p : flat_->parameters()) p.mutable_grad() = torch::Tensor();
    flat_->ClearGradients();
    std::fill(stored_.begin(), stored_.end(), 0);
    std::unique_ptr<AutocastGuard> autocast = precision_->Autocast();
    auto logits = model_->Forward(batch.inputs);
    if (!logits.ok()) throw std::runtime_error(std::string(logits.status().message()));
    absl::StatusOr<torch::Tensor> task_loss = task_->Loss(*logits, batch.targets);
    if (!task_loss.ok()) throw std::runtime_error(std::string(task_loss.status().message()));
    torch::Tensor loss = *std::move(task_loss);  // the sum over this worker's slice
    if (scheduled_ && !(scheduled = scheduled_->Begin(step_info_)).ok()) return;
    autocast.reset();
    precision_->ScaleLoss(loss).backward();
    // On a GPU backward has only been queued: the next batch is gathered meanwhile.
    if (flat_->on_device() && step_in_epoch + 1 < steps_per_epoch) {
      loader_->Prefetch(global_step_ + 1, step_info_.epoch,
                        WorkerSlice(perm, step_in_epoch + 1, spec_.global_batch_size,
                                    options_.allocation, options_.rank));
    }
    *loss_value = loss.item<double>();
  }));
  return scheduled;
}

void Trainer::Impl::FillStats(int epoch, int local_batch, double loss, double compute,
                              const ExchangeTimes& times, Clock::time_point step_start,
                              StepStats* stats) {
  stats->step = global_step_;
  stats->epoch = epoch;
  stats->batch_size = local_batch;
  stats->train_loss = local_batch > 0 ? loss / local_batch : 0.0;
  stats->compute_seconds = compute;
  stats->comm_seconds = times.comm;
  stats->exposed_comm_seconds = times.exposed;
  stats->step_seconds = Since(step_start);
  stats->lr = step_info_.lr;
  const sync::StrategyStats strategy_stats = exchange_->strategy().stats();
  stats->compression_ratio = strategy_stats.compression_ratio;
  stats->bits = strategy_stats.bits;
  stats->staleness = strategy_stats.staleness;
  stats->interval = strategy_stats.interval;
  stats->exchanges = strategy_stats.exchanges;
  stats->gossip_threshold = strategy_stats.gossip_threshold;
  stats->strategy_decision = strategy_stats.decision;
  stats->corrupt_samples = train_data_->corrupt_samples() + test_data_->corrupt_samples();
  stats->amp_skipped_steps = precision_->skipped_steps();
  stats->loss_scale = precision_->loss_scale();
  epoch_timing_.compute_seconds += compute;  // as emulated, like the step stats
  epoch_timing_.comm_seconds += times.comm;
  epoch_timing_.exposed_comm_seconds += times.exposed;
  exchange_->strategy().OnStepTiming({global_step_ - 1, compute, times.comm, times.exposed});
}

absl::Status Trainer::Impl::SynchronizeModels(const char* before) {
  HPTRAIN_RETURN_IF_ERROR(Drain());
  return exchange_->Synchronize(global_step_, before);
}

absl::Status Trainer::Impl::Evaluation(int epoch, int64_t steps_done, int64_t steps_per_epoch,
                                       bool interim, double loss_sum, double loss_count) {
  HPTRAIN_RETURN_IF_ERROR(Drain());
  // Each worker's own model, before Synchronize replaces it by the average: only where the
  // workers' models differ (StrategyTraits::models_diverge) and there are several.
  sync::Strategy& strategy = exchange_->strategy();
  const bool own_models = strategy.traits().models_diverge && comm_->size() > 1;
  double own_accuracy = 0;  // the task's primary metric
  if (own_models) HPTRAIN_RETURN_IF_ERROR(evaluator_->EvaluateOwnModel(&own_accuracy));
  HPTRAIN_RETURN_IF_ERROR(SynchronizeModels("evaluation"));
  std::vector<double> worker_accuracies;
  if (own_models) {
    HPTRAIN_RETURN_IF_ERROR(evaluator_->GatherAccuracies(own_accuracy, &worker_accuracies));
  }
  float train[2] = {static_cast<float>(loss_sum), static_cast<float>(loss_count)};
  HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSum(train, 2), "epoch loss all-reduce");
  HPTRAIN_RETURN_IF_ERROR(AverageBuffers(*model_, *comm_));
  EpochStats stats;
  stats.epoch = epoch;
  stats.step = global_step_;
  stats.epochs_done = epoch + static_cast<double>(steps_done) / steps_per_epoch;
  stats.interim = interim;
  stats.train_loss = train[1] > 0 ? train[0] / train[1] : 0.0;
  EvaluationResult evaluation;
  HPTRAIN_RETURN_IF_ERROR(evaluator_->Evaluate(&evaluation));
  stats.test_loss = evaluation.loss;
  stats.test_accuracy = evaluation.value("accuracy");  // classification's; 0 for other tasks
  stats.metric = task_->primary_metric();
  stats.metrics = std::move(evaluation.metrics);
  stats.worker_test_accuracy = std::move(worker_accuracies);
  stats.rank = options_.rank;
  if (!interim) {
    epoch_timing_.epoch = epoch;
    epoch_timing_.train_loss = stats.train_loss;
    HPTRAIN_RETURN_IF_ERROR(strategy.OnEpochEnd(epoch_timing_), "strategy ", strategy.name(),
                            " at the end of epoch ", epoch);
    epoch_timing_ = sync::EpochTiming();
  }
  stats.wall_seconds = Since(run_start_);
  if (callbacks_.on_epoch) callbacks_.on_epoch(stats);
  return absl::OkStatus();
}

absl::Status Trainer::Impl::SaveCheckpointIfDue(bool force, int epoch, int64_t next_step_in_epoch) {
  if (spec_.checkpoint.path.empty()) return absl::OkStatus();
  const int interval = spec_.checkpoint.interval_steps;
  if (!force && (interval <= 0 || global_step_ % interval != 0)) return absl::OkStatus();
  // Every rank, so that all continue from the same model.
  HPTRAIN_RETURN_IF_ERROR(SynchronizeModels("a checkpoint"));
  if (options_.rank != 0) return absl::OkStatus();
  return WriteRunCheckpoint(spec_.checkpoint.path, spec_.name,
                            {global_step_, epoch, next_step_in_epoch}, RunParts());
}

absl::Status Trainer::Impl::Run() {
  run_start_ = Clock::now();
  model_->train(true);
  if (options_.joining.has_value()) {
    HPTRAIN_RETURN_IF_ERROR(ChangeMembershipUntilDone(*options_.joining, false, false),
                            "joining the job");
  }
  while (!left_) {
    absl::Status status = TrainEpochs();
    if (status.ok() || !options_.elastic) return status;
    const bool pending = pending_change_.has_value();
    const bool lost = callbacks_.membership_lost && callbacks_.membership_lost();
    // A stop request, bad data or a broken job file end the run as before; what a vanished peer
    // breaks (collectives, parameter-server calls) is recovered from.
    if (!pending && !lost && !PeerFailure(status)) return status;
    MembershipEpoch target;
    bool planned = false;
    if (pending) {
      target = *std::move(pending_change_);
      pending_change_.reset();
      // An epoch that began with a loss has nobody to synchronize with.
      planned = !target.lost;
    } else {
      std::fprintf(stderr, "hptrain worker: step %lld did not complete (%s); regrouping\n",
                   static_cast<long long>(global_step_ + 1),
                   std::string(status.message()).c_str());
    }
    HPTRAIN_RETURN_IF_ERROR(ChangeMembershipUntilDone(target, planned, !planned));
  }
  return absl::OkStatus();
}

bool Trainer::Impl::PeerFailure(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsInternal(status) || absl::IsAborted(status) || absl::IsUnknown(status) ||
         (absl::IsCancelled(status) && callbacks_.membership_lost &&
          callbacks_.membership_lost());
}

absl::Status Trainer::Impl::ChangeMembershipUntilDone(const MembershipEpoch& target, bool planned,
                                                      bool after_loss) {
  absl::Status changed = ChangeMembership(target, planned, after_loss);
  // A member lost during the change itself (its rendezvous, the state's broadcast): a member that
  // holds the state does the change again with the epoch that drops it. Bounded: each attempt
  // waits for a new epoch for at most spec.elastic.joinTimeoutSeconds. A joiner that failed exits
  // instead: started again, it registers anew and joins the epoch that has it.
  for (int attempt = 1; !changed.ok() && !left_ && held_state_.has_value() &&
                        PeerFailure(changed) && attempt <= 8;
       ++attempt) {
    std::fprintf(stderr, "hptrain worker: the membership change did not complete (%s); "
                         "regrouping\n",
                 std::string(changed.message()).c_str());
    changed = ChangeMembership(MembershipEpoch(), false, true);
  }
  return changed;
}

absl::Status Trainer::Impl::ChangeMembership(const MembershipEpoch& target, bool planned,
                                             bool after_loss) {
  const auto start = Clock::now();
  // A worker whose exchange is gone (a change that failed before it completed) still holds the
  // state it captured then; a joiner holds none.
  const bool trained = exchange_ != nullptr;
  const bool joining = !trained && !held_state_.has_value();
  const int64_t dropped = trained ? exchange_->strategy().UnsavedStateValues() : 0;
  // 1. Drain: at an agreed boundary the models are brought to exactly the steps done, as before
  // a checkpoint; if that fails too (a peer vanished meanwhile), the change is a loss after all.
  if (planned && trained) {
    absl::Status synchronized = SynchronizeModels("a membership change");
    if (!synchronized.ok()) {
      std::fprintf(stderr, "hptrain worker: the models could not be synchronized for membership "
                           "epoch %lld (%s); regrouping\n",
                   static_cast<long long>(target.epoch),
                   std::string(synchronized.message()).c_str());
      planned = false;
      after_loss = true;
    }
  }
  // What this worker would send as rank 0 of the new epoch: a checkpoint's contents, the
  // strategy's sections only when the models were synchronized.
  if (trained) {
    flat_->ToHost();
    absl::StatusOr<Checkpoint> captured = CaptureRunState(
        spec_.name, {global_step_, position_epoch_, position_step_in_epoch_}, RunParts(), planned);
    HPTRAIN_RETURN_IF_ERROR(captured.status(), "capturing the state for membership epoch ",
                            target.epoch);
    held_state_ = *std::move(captured);
  }
  // 2. Nothing may hold the old communicators when the session releases them. After a loss the
  // parameter-server calls in flight may wait for a round that never completes: cancelled.
  if (!planned && options_.ps != nullptr) options_.ps->CancelPending();
  scheduled_.reset();
  exchange_.reset();
  evaluator_.reset();
  comm_ = nullptr;
  HPTRAIN_ASSIGN_OR_RETURN(EpochGroup group, callbacks_.regroup(target, after_loss));
  if (group.left) {
    left_ = true;
    std::fprintf(stderr, "hptrain worker: left the job after step %lld (membership epoch %lld)\n",
                 static_cast<long long>(global_step_),
                 static_cast<long long>(group.membership.epoch));
    return absl::OkStatus();
  }
  comm_ = group.comm;
  options_.device_comm = group.device_comm;
  options_.rank = group.rank;
  options_.allocation = group.membership.batch_sizes;
  membership_epoch_ = group.membership.epoch;
  if (joining && group.rank == 0) {
    // Not bad input (exit 2): the launcher or the controller may restart the gang.
    return absl::UnavailableError(
        "no member that held the model is left to join (the job needs a gang restart)");
  }
  // 3. The new rank 0's state to everyone, and everyone (rank 0 too) loads it into the rebuilt
  // exchange, as a resumed run loads a checkpoint.
  std::string bytes = group.rank == 0 ? EncodeCheckpoint(*held_state_) : std::string();
  int64_t size = static_cast<int64_t>(bytes.size());
  HPTRAIN_RETURN_IF_ERROR(comm_->Broadcast(&size, sizeof(size), 0), "membership state size");
  bytes.resize(static_cast<size_t>(size));
  HPTRAIN_RETURN_IF_ERROR(comm_->Broadcast(bytes.data(), bytes.size(), 0), "membership state");
  const std::string origin = absl::StrCat("membership epoch ", membership_epoch_, " state");
  HPTRAIN_ASSIGN_OR_RETURN(Checkpoint received, DecodeCheckpoint(bytes, origin));
  if (options_.ps != nullptr) options_.ps->set_membership_epoch(membership_epoch_);
  HPTRAIN_RETURN_IF_ERROR(BuildExchange());
  HPTRAIN_ASSIGN_OR_RETURN(ResumedRun resumed, RestoreRunState(received, origin, RunParts()));
  global_step_ = resumed.position.step;
  start_epoch_ = resumed.position.epoch;
  start_step_in_epoch_ = resumed.position.step_in_epoch;
  flat_->ToHost();
  sync::Strategy& strategy = exchange_->strategy();
  HPTRAIN_RETURN_IF_ERROR(strategy.Start(flat_->host(), global_step_, resumed.strategy_sections),
                          "strategy ", strategy.name(), " in membership epoch ",
                          membership_epoch_);
  flat_->ToDevice();
  MembershipChangeStats stats;
  stats.epoch = membership_epoch_;
  stats.step = global_step_;
  stats.planned = planned;
  stats.seconds = Since(start);
  stats.dropped_values = dropped;
  stats.rank = options_.rank;
  stats.world = comm_->size();
  flat_->ToHost();
  stats.parameters_hash = Fnv1a(flat_->host());
  held_state_.reset();  // the change is complete: the exchange holds the state again
  if (callbacks_.on_membership_change) callbacks_.on_membership_change(stats);
  return absl::OkStatus();
}

absl::Status Trainer::Impl::TrainEpochs() {
  const int64_t steps_per_epoch = StepsPerEpoch(train_data_->size(), spec_.global_batch_size);
  if (steps_per_epoch <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("the training set has ", train_data_->size(),
                                                   " samples, fewer than the global batch ",
                                                   spec_.global_batch_size));
  }
  int64_t total_steps = steps_per_epoch * spec_.epochs;
  if (spec_.max_steps > 0) total_steps = std::min<int64_t>(total_steps, spec_.max_steps);
  // Where the run stands when it stops early at spec.maxSteps: a later run with more steps
  // continues from there.
  RunPosition end{0, spec_.epochs, 0};
  for (int epoch = start_epoch_; epoch < spec_.epochs && global_step_ < total_steps; ++epoch) {
    const std::vector<int64_t> perm = EpochPermutation(train_data_->size(), spec_.seed, epoch);
    double loss_sum = 0, loss_count = 0;
    int64_t s = epoch == start_epoch_ ? start_step_in_epoch_ : 0;
    position_epoch_ = epoch;
    position_step_in_epoch_ = s;
    for (; s < steps_per_epoch && global_step_ < total_steps; ++s) {
      position_step_in_epoch_ = s;
      if (callbacks_.should_stop && callbacks_.should_stop()) {
        return absl::CancelledError("stopped by the coordinator");
      }
      if (callbacks_.membership_lost && callbacks_.membership_lost()) {
        return absl::AbortedError("a member was lost");
      }
      StepStats stats;
      stats.steps_per_epoch = steps_per_epoch;
      stats.total_steps = total_steps;
      HPTRAIN_RETURN_IF_ERROR(TrainStep(perm, epoch, s, steps_per_epoch, &stats));
      position_step_in_epoch_ = s + 1;
      loss_sum += stats.train_loss * stats.batch_size;
      loss_count += stats.batch_size;
      if (callbacks_.on_step) callbacks_.on_step(stats);
      // The last step of an epoch is checkpointed and evaluated after the epoch's end (buffers
      // averaged); so is the run's last step.
      if (s + 1 < steps_per_epoch) {
        HPTRAIN_RETURN_IF_ERROR(SaveCheckpointIfDue(false, epoch, s + 1), "writing checkpoint");
        if (spec_.eval_every_steps > 0 && global_step_ % spec_.eval_every_steps == 0 &&
            global_step_ < total_steps) {
          HPTRAIN_RETURN_IF_ERROR(
              Evaluation(epoch, s + 1, steps_per_epoch, true, loss_sum, loss_count));
        }
      }
    }
    HPTRAIN_RETURN_IF_ERROR(Evaluation(epoch, s, steps_per_epoch, false, loss_sum, loss_count));
    // What was recorded so far survives a later failure of the run.
    if (recorder_) HPTRAIN_RETURN_IF_ERROR(recorder_->Save(), "spec.collect");
    if (s == steps_per_epoch) {
      HPTRAIN_RETURN_IF_ERROR(SaveCheckpointIfDue(false, epoch + 1, 0), "writing checkpoint");
    } else {
      end = {global_step_, epoch, s};
    }
    // The next epoch starts at its first step (a change within it would say otherwise).
    start_epoch_ = epoch + 1;
    start_step_in_epoch_ = 0;
    position_epoch_ = epoch + 1;
    position_step_in_epoch_ = 0;
  }
  // The final state; its position says "nothing left" for a later --resume, unless spec.maxSteps
  // ended the run within the epochs.
  return Annotate(SaveCheckpointIfDue(true, end.epoch, end.step_in_epoch),
                  "writing final checkpoint");
}

Trainer::Trainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const job::JobSpec& spec,
                                                         const TrainerOptions& options,
                                                         comm::Communicator* comm,
                                                         TrainerCallbacks callbacks) {
  auto impl = std::make_unique<Impl>(spec, options, comm, std::move(callbacks));
  HPTRAIN_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Trainer>(new Trainer(std::move(impl)));
}

absl::Status Trainer::Run() { return impl_->Run(); }
bool Trainer::left() const { return impl_->left(); }
int Trainer::rank() const { return impl_->rank(); }
int64_t Trainer::num_parameters() const { return impl_->num_parameters(); }
const ThreadChoice& Trainer::threads() const { return impl_->threads(); }

}  // namespace hptrain::train
