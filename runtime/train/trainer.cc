#include "runtime/train/trainer.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/update/update.h"
#include "runtime/base/status.h"
#include "runtime/comm/bucketed_reducer.h"
#include "runtime/comm/priority_scheduler.h"
#include "runtime/job/optimizer_options.h"
#include "runtime/optim/device_optimizer.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/optim/optimizer.h"
#include "runtime/ps/mp2/dataset.h"
#include "runtime/ps/mp2/job_options.h"
#include "runtime/sync/registry.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/data/dataset.h"
#include "runtime/train/data/sampler.h"
#include "runtime/train/cuda_stream.h"
#include "runtime/train/evaluator.h"
#include "runtime/train/model_buffers.h"
#include "runtime/train/models/model.h"
#include "runtime/train/slowdown.h"
#include "runtime/train/torch_call.h"

namespace hptrain::train {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What a job on `device` ("cpu", "cuda" or "cuda:N") needs of this process and this build.
absl::Status CheckDevice(const job::JobSpec& spec, const std::string& device) {
  if (device == "cpu") return absl::OkStatus();
  if (device.rfind("cuda", 0) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("unknown device \"", device, "\""));
  }
  const int visible = VisibleCudaDevices();
  if (visible == 0) {
    const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
    return absl::FailedPreconditionError(absl::StrCat(
        "spec.device: cuda, but this process sees no GPU (",
        env == nullptr ? std::string("no CUDA device or driver")
                       : absl::StrCat("CUDA_VISIBLE_DEVICES=\"", env, "\""),
        "; a libtorch built with CUDA is needed too)"));
  }
  if (spec.scheduler.type == "priority") {
    return absl::InvalidArgumentError(
        "spec.scheduler.type: priority is not supported on cuda yet (use none)");
  }
  return absl::OkStatus();
}

ModelShape ShapeOf(const Dataset& data) {
  ModelShape shape;
  shape.channels = data.shape().channels;
  shape.height = data.shape().height;
  shape.width = data.shape().width;
  shape.num_classes = data.num_classes();
  return shape;
}

}  // namespace

int VisibleCudaDevices() {
  try {
    return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

class Trainer::Impl {
 public:
  Impl(const job::JobSpec& spec, const TrainerOptions& options, comm::Communicator* comm,
       TrainerCallbacks callbacks)
      : spec_(spec),
        options_(options),
        comm_(comm),
        callbacks_(std::move(callbacks)),
        slowdown_(spec.testing.slowdown, spec.testing.slowdown_file, comm->rank(),
                  spec.testing.slowdown_window) {}

  absl::Status Init();
  absl::Status Run();
  int64_t num_parameters() const { return static_cast<int64_t>(flat_params_.numel()); }
  const ThreadChoice& threads() const { return threads_; }

 private:
  absl::Status FlattenParameters();
  absl::Status TrainStep(const std::vector<int64_t>& perm, int epoch, int64_t step_in_epoch,
                         int64_t steps_per_epoch, StepStats* stats);
  // Evaluates the model after `steps_done` steps of `epoch` and reports it; at the epoch's end
  // (not `interim`) the strategy's epoch hook runs too.
  absl::Status Evaluation(int epoch, int64_t steps_done, int64_t steps_per_epoch, bool interim,
                          double loss_sum, double loss_count);
  // The strategy's AfterOptimizerStep, with the model's buffers when it exchanges them
  // (Strategy::exchanges_buffers).
  absl::Status AfterOptimizerStep();
  // spec.strategy.averageOptimizerState (hierarchical, docs/algorithms.md §2b (ii)): the
  // optimizer state averaged over the workers at every global sync; otherwise nothing.
  absl::Status AverageOptimizerStateIfAsked();
  absl::Status SaveCheckpointIfDue(bool force, int epoch, int64_t next_step_in_epoch);
  // The flat parameters the strategies and checkpoints work on: host memory always (on a GPU,
  // the host copy that ParamsToHost refreshes and ParamsToDevice writes back).
  absl::Span<float> FlatParameters() {
    return absl::MakeSpan(host_params_.data_ptr<float>(),
                          static_cast<size_t>(host_params_.numel()));
  }
  // On the device path: the device model into its host copy, and back. No-ops on the host path,
  // where the two are one buffer.
  void ParamsToHost();
  void ParamsToDevice();
  // Device path: the batch's tensors on the device (from pinned memory, asynchronously on a GPU).
  torch::Tensor ToDevice(const torch::Tensor& host) const;
  // This worker's batch of a step: gathered and (device path) on its way to the device.
  absl::StatusOr<Batch> LoadBatch(const std::vector<int64_t>& indices);
  // Device path, while the GPU still runs this step's backward: the next step's batch, one
  // ahead, for the same allocation. Best effort: an error leaves it to the next step to load.
  void PrefetchNext(const std::vector<int64_t>& perm, int64_t next_step_in_epoch);
  // Device path, in the autograd hook of tensor `index`: its gradient into the reducer's host
  // buffer (staged) or into device_grads_ with an event behind it (device route).
  void StoreDeviceGradient(int index, const torch::Tensor& grad);
  // Device route, before backward: zeroes device_grads_, so that a parameter that gets no
  // gradient this step (unused by the forward) contributes zeros, as on the host, where the
  // reducer zero-fills it.
  void ClearDeviceGradients();
  // Device route, on the reducer's thread once bucket k's gradients are marked ready: orders the
  // device communicator's stream after the clearing and backward's copies of them, all queued on
  // the default stream (cudaStreamWaitEvent; the host does not wait).
  absl::Status WaitForBucket();
  // The device's default stream, as a cudaStream_t: null.
  static constexpr void* kDefaultStream = nullptr;
  // After the reducer: the reduced gradients (on the device), divided by B, into the optimizer:
  // its device route on a GPU, its host route on device buffers in host memory (devicePath).
  absl::Status DeviceOptimizerStep(double lr);
  // On a GPU: the device optimizer's state into optimizer_'s vectors (checkpoints, averaging),
  // and back; nothing otherwise, where optimizer_ holds the state itself.
  absl::Status OptimizerStateToHost();
  absl::Status OptimizerStateToDevice();
  absl::Status RestoreCheckpoint();
  // spec.scheduler priority: the scheduler over the reducer's buffer, and the forward gate.
  absl::Status CreateScheduler();
  // Before a backward under the scheduler: waits for the previous step's exchange and updates,
  // plans this step and starts it.
  absl::Status BeginScheduledStep();
  // Waits until the scheduler has finished every step begun (before any collective of the
  // trainer's own and anything that reads the whole model).
  absl::Status Drain();

  job::JobSpec spec_;
  TrainerOptions options_;
  comm::Communicator* comm_;
  TrainerCallbacks callbacks_;
  ThreadChoice threads_;

  std::unique_ptr<Dataset> train_data_;
  std::unique_ptr<Dataset> test_data_;
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<Model> model_;
  std::vector<torch::Tensor> params_;
  torch::Tensor flat_params_;  // every parameter is a view into this buffer
  // The device the model trains on; on_device_: the device path (also on a CPU device for
  // spec.testing.devicePath); reduce_on_device_: the strategy exchanges device buckets (NCCL).
  torch::Device device_{torch::kCPU};
  bool on_device_ = false;
  bool reduce_on_device_ = false;
  torch::Tensor host_params_;   // flat_params_ itself on the host path; its host copy otherwise
  torch::Tensor device_grads_;  // device path: the flat gradients on the device
  // Device path, per tensor: its slot, shaped as the parameter: in device_grads_ on the device
  // route, in the reducer's host buffer when staged.
  std::vector<torch::Tensor> gradient_slots_;
  std::unique_ptr<optim::DeviceOptimizer> device_optimizer_;  // on a GPU: the optimizer's state
  // Device path: the batch loaded one step ahead, for the step and the indices it was loaded for.
  struct Prefetched {
    int64_t step = -1;
    std::vector<int64_t> indices;
    Batch batch;
  };
  Prefetched prefetched_;
  std::vector<float> flat_buffers_;  // the buffers handed to the strategy (exchanges_buffers)
  std::unique_ptr<comm::BucketedReducer> reducer_;
  std::unique_ptr<sync::Strategy> strategy_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  optim::LrScheduleOptions lr_schedule_;
  sync::StepInfo step_info_;
  // spec.scheduler priority (null otherwise). Declared after what its hooks use, so that it is
  // destroyed (its thread joined) first. scheduled_info_ is the step it works on: written only
  // while it is idle, as step_info_ already describes the next step while it runs.
  std::unique_ptr<comm::PriorityScheduler> scheduler_;
  sync::StepInfo scheduled_info_;
  sync::EpochTiming epoch_timing_;
  Slowdown slowdown_;

  // spec.collect on rank 0: the MP² snapshot dataset being recorded.
  std::unique_ptr<ps::mp2::SnapshotRecorder> recorder_;

  sync::CheckpointSections restored_;  // the sections of the checkpoint resumed from
  int64_t global_step_ = 0;
  int start_epoch_ = 0;
  int64_t start_step_in_epoch_ = 0;
  Clock::time_point run_start_;
};

absl::Status Trainer::Impl::Init() {
  HPTRAIN_RETURN_IF_ERROR(CheckDevice(spec_, options_.device));
  if (options_.rank < 0 || options_.rank >= static_cast<int>(options_.allocation.size())) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options_.rank, " out of range"));
  }
  HPTRAIN_RETURN_IF_ERROR(TorchCall("choosing the device", [&] {
    device_ = torch::Device(options_.device);
  }));
  on_device_ = device_.is_cuda() || options_.device_path_on_cpu;
  if (device_.is_cuda()) {
    if (const int visible = VisibleCudaDevices(); device_.index() >= visible) {
      return absl::InvalidArgumentError(
          absl::StrCat("device ", options_.device, ": only ", visible, " GPU(s) visible"));
    }
    // This thread's current device (allocations, cuDNN, the autograd thread it starts), whether
    // convolutions use cuDNN (spec.testing.cudnn), and cuDNN's algorithm choice: deterministic,
    // untuned and in full fp32 (no TF32, which rounds convolution inputs to 10 mantissa bits), or
    // autotuned per input shape with PyTorch's default TF32 convolutions.
    HPTRAIN_RETURN_IF_ERROR(TorchCall("selecting the GPU", [&] {
      c10::impl::getDeviceGuardImpl(device_.type())->setDevice(device_);
      at::globalContext().setUserEnabledCuDNN(spec_.testing.cudnn);
      at::globalContext().setDeterministicCuDNN(spec_.deterministic);
      at::globalContext().setBenchmarkCuDNN(!spec_.deterministic);
      if (spec_.deterministic) {
        at::globalContext().setAllowTF32CuDNN(false);
        at::globalContext().setAllowTF32CuBLAS(false);
      }
    }));
  }
  // By default each worker gets its share of the CPU quota (or cores) of its host (threads.h).
  threads_ = ChooseThreads(spec_.threads, options_.workers_on_host);
  torch::set_num_threads(threads_.threads);
  HPTRAIN_ASSIGN_OR_RETURN(train_data_, OpenDataset(spec_.dataset, Split::kTrain, spec_.seed));
  HPTRAIN_ASSIGN_OR_RETURN(test_data_, OpenDataset(spec_.dataset, Split::kTest, spec_.seed));
  HPTRAIN_ASSIGN_OR_RETURN(model_, CreateModel(spec_.model, ShapeOf(*train_data_), spec_.seed));
  // Built on the CPU from the seed (the same weights on every device), then moved.
  if (on_device_) HPTRAIN_RETURN_IF_ERROR(model_->to(device_));
  HPTRAIN_RETURN_IF_ERROR(FlattenParameters());
  // ToDevice is the identity off a GPU.
  evaluator_ = std::make_unique<Evaluator>(test_data_.get(), model_.get(), comm_, options_.rank,
                                           [this](const torch::Tensor& t) { return ToDevice(t); });

  std::vector<size_t> sizes;
  for (const auto& p : params_) sizes.push_back(static_cast<size_t>(p.numel()));
  sync::StrategyContext context{&spec_, comm_, options_.ps};
  if (device_.is_cuda()) context.device_comm = options_.device_comm;
  HPTRAIN_ASSIGN_OR_RETURN(strategy_, sync::CreateStrategy(context));
  reduce_on_device_ = context.device_comm != nullptr && strategy_->reduces_on_device();
  if (context.device_comm != nullptr && !reduce_on_device_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.communicator.backend: nccl, but strategy ", strategy_->name(),
        " exchanges through host memory (use gloo or auto)"));
  }
  // Each bucket's reduction is issued asynchronously: bucket k+1's can be in flight with k's.
  reducer_ = std::make_unique<comm::BucketedReducer>(
      sizes, static_cast<size_t>(spec_.bucket_mib) << 20,
      comm::BucketedReducer::AsyncReduceFn([this](int bucket, float* data, size_t count) {
        if (!reduce_on_device_) {
          return strategy_->ReduceGradientsAsync(step_info_, bucket,
                                                 comm::BufferRef::Host(data, count));
        }
        if (absl::Status ordered = WaitForBucket(); !ordered.ok()) {
          return comm::Work::Done(ordered);
        }
        float* device = device_grads_.data_ptr<float>() + (data - reducer_->data());
        return strategy_->ReduceGradientsAsync(
            step_info_, bucket, comm::BufferRef::Device(device, count, kDefaultStream));
      }));
  sync::GradientLayout layout;
  for (int t = 0; t < reducer_->num_tensors(); ++t) {
    layout.tensors.push_back({reducer_->offset(t), reducer_->offset(t) + reducer_->tensor_size(t)});
  }
  for (int k = 0; k < reducer_->num_buckets(); ++k) {
    auto [begin, end] = reducer_->bucket_range(k);
    layout.buckets.push_back({begin, end});
  }
  HPTRAIN_RETURN_IF_ERROR(strategy_->Init(layout), "strategy ", strategy_->name());
  optim::OptimizerOptions optimizer_options = job::OptimizerOptionsFor(spec_.optimizer);
  if (strategy_->applies_momentum()) optimizer_options.momentum = 0.0;
  optimizer_ = std::make_unique<optim::Optimizer>(optimizer_options, reducer_->size());
  lr_schedule_ = job::LrScheduleFor(spec_.optimizer, spec_.epochs);
  if (device_.is_cuda()) {
    absl::StatusOr<std::unique_ptr<optim::DeviceOptimizer>> device_optimizer =
        optim::DeviceOptimizer::Create(optimizer_options, reducer_->size(),
                                       device_.has_index() ? device_.index() : -1);
    HPTRAIN_RETURN_IF_ERROR(device_optimizer.status());
    device_optimizer_ = *std::move(device_optimizer);
  }
  if (on_device_) {
    HPTRAIN_RETURN_IF_ERROR(TorchCall("allocating the device buffers", [&] {
      const int64_t n = static_cast<int64_t>(reducer_->size());
      device_grads_ =
          torch::zeros({n}, torch::TensorOptions().dtype(torch::kFloat32).device(device_));
      // Each gradient's slot, shaped as its parameter, made once: the hooks copy straight in.
      for (int t = 0; t < reducer_->num_tensors(); ++t) {
        const int64_t offset = static_cast<int64_t>(reducer_->offset(t));
        const int64_t size = static_cast<int64_t>(reducer_->tensor_size(t));
        gradient_slots_.push_back(
            reduce_on_device_
                ? device_grads_.narrow(0, offset, size).view(params_[t].sizes())
                : torch::from_blob(reducer_->data_for(t), params_[t].sizes(), torch::kFloat32));
      }
    }));
  }
  if (reduce_on_device_) {
    // Backward, the gradient copies and the optimizer run on the device's default stream (the
    // trainer sets no other), which the device communicator's collectives are ordered against.
    const c10::impl::DeviceGuardImplInterface* guard =
        c10::impl::getDeviceGuardImpl(device_.type());
    if (guard->getStream(device_) != guard->getDefaultStream(device_)) {
      return absl::FailedPreconditionError(
          "the device route needs the trainer on the device's default stream");
    }
  }

  if (spec_.scheduler.type == "priority") HPTRAIN_RETURN_IF_ERROR(CreateScheduler());
  // Autograd hooks: copy each finished gradient into its slot and mark it ready. The returned
  // undefined tensor leaves the gradient itself unchanged.
  for (size_t t = 0; t < params_.size(); ++t) {
    const int index = static_cast<int>(t);
    params_[t].register_hook([this, index](torch::Tensor grad) {
      if (on_device_) {
        StoreDeviceGradient(index, grad);
      } else {
        torch::Tensor g = grad.contiguous();
        std::memcpy(reducer_->data_for(index), g.data_ptr<float>(), g.numel() * sizeof(float));
      }
      if (scheduler_) {
        scheduler_->MarkReady(index);
      } else {
        reducer_->MarkReady(index);
      }
    });
  }
  if (options_.resume && !spec_.checkpoint.path.empty()) {
    HPTRAIN_RETURN_IF_ERROR(RestoreCheckpoint());
    if (callbacks_.on_resumed) callbacks_.on_resumed(global_step_);
  }
  ParamsToHost();
  HPTRAIN_RETURN_IF_ERROR(strategy_->Start(FlatParameters(), global_step_, restored_),
                          "strategy ", strategy_->name());
  ParamsToDevice();
  restored_.clear();
  if (options_.rank == 0 && !spec_.collect.path.empty()) {
    ps::mp2::RecorderOptions recorder;
    recorder.path = spec_.collect.path;
    recorder.model = spec_.model.name.empty() ? spec_.model.torchscript : spec_.model.name;
    recorder.dataset = spec_.dataset.name;
    recorder.seed = spec_.seed;
    recorder.every = spec_.collect.every;
    recorder.samples = spec_.collect.samples;
    recorder.window_every = spec_.collect.window_every;
    recorder.window_length = spec_.collect.window_length;
    std::vector<int64_t> tensor_sizes;
    for (const auto& p : params_) tensor_sizes.push_back(p.numel());
    recorder_ = std::make_unique<ps::mp2::SnapshotRecorder>(recorder, tensor_sizes);
  }
  return absl::OkStatus();
}

absl::Status Trainer::Impl::CreateScheduler() {
  if (!strategy_->supports_scheduler()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.scheduler.type: strategy ", strategy_->name(),
        " does not support the priority scheduler (ssgd and multistep do)"));
  }
  std::vector<std::pair<size_t, size_t>> ranges;
  for (int t = 0; t < reducer_->num_tensors(); ++t) {
    ranges.push_back({reducer_->offset(t), reducer_->offset(t) + reducer_->tensor_size(t)});
  }
  comm::PriorityScheduler::Options options;
  options.partition_elements = spec_.scheduler.partition();
  options.credit_elements = spec_.scheduler.credit();
  comm::PriorityScheduler::Hooks hooks;
  hooks.prepare = [this](int, size_t begin, size_t end) {
    return strategy_->PrepareRange(scheduled_info_, begin, end, reducer_->data());
  };
  hooks.finish = [this](int, size_t begin, size_t end) -> absl::Status {
    if (strategy_->owns_parameters()) {
      return strategy_->FinishRange(scheduled_info_, begin, end, reducer_->data(),
                                    FlatParameters());
    }
    float* grads = reducer_->data();
    kernels::Scale(grads + begin, end - begin,
                   1.0f / static_cast<float>(spec_.global_batch_size));
    optimizer_->StepRange(flat_params_.data_ptr<float>(), grads, begin, end, scheduled_info_.lr);
    return absl::OkStatus();
  };
  scheduler_ = std::make_unique<comm::PriorityScheduler>(
      comm_, std::move(ranges), model_->parameter_layers(), reducer_->data(), options, hooks);
  // The next forward of layer l waits only for layer l's update.
  if (model_->gates_forward()) {
    model_->set_forward_gate([this](int layer) { scheduler_->WaitLayer(layer); });
  }
  return absl::OkStatus();
}

absl::Status Trainer::Impl::BeginScheduledStep() {
  HPTRAIN_RETURN_IF_ERROR(scheduler_->WaitIdle(), "step ", global_step_ - 1);
  scheduled_info_ = step_info_;
  if (!strategy_->owns_parameters()) optimizer_->BeginStep();
  return scheduler_->BeginStep(strategy_->PlanScheduledStep(scheduled_info_, reducer_->data()));
}

absl::Status Trainer::Impl::Drain() {
  if (!scheduler_) return absl::OkStatus();
  return Annotate(scheduler_->WaitIdle(), absl::StrCat("step ", global_step_ - 1));
}

absl::Status Trainer::Impl::FlattenParameters() {
  params_ = model_->parameters();
  int64_t total = 0;
  for (const auto& p : params_) {
    if (p.scalar_type() != torch::kFloat32) {
      return absl::InvalidArgumentError("only float32 parameters are supported");
    }
    total += p.numel();
  }
  return TorchCall("flattening parameters", [&] {
    torch::NoGradGuard no_grad;
    flat_params_ =
        torch::empty({total}, torch::TensorOptions().dtype(torch::kFloat32).device(device_));
    int64_t offset = 0;
    for (auto& p : params_) {
      torch::Tensor view = flat_params_.narrow(0, offset, p.numel()).view(p.sizes());
      view.copy_(p);
      p.set_data(view);
      offset += p.numel();
    }
    if (!on_device_) {
      host_params_ = flat_params_;
      return;
    }
    // Pinned on a GPU, so that the copies to and from it run at full speed.
    host_params_ = torch::empty(
        {total}, torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(device_.is_cuda()));
    host_params_.copy_(flat_params_);
  });
}

void Trainer::Impl::ParamsToHost() {
  if (!on_device_) return;
  torch::NoGradGuard no_grad;
  host_params_.copy_(flat_params_);
}

void Trainer::Impl::ParamsToDevice() {
  if (!on_device_) return;
  torch::NoGradGuard no_grad;
  flat_params_.copy_(host_params_);
}

torch::Tensor Trainer::Impl::ToDevice(const torch::Tensor& host) const {
  if (!device_.is_cuda()) return host;
  return host.pin_memory().to(device_, /*non_blocking=*/true);
}

absl::StatusOr<Batch> Trainer::Impl::LoadBatch(const std::vector<int64_t>& indices) {
  if (prefetched_.step == global_step_ && prefetched_.indices == indices) {
    prefetched_.step = -1;
    return std::move(prefetched_.batch);
  }
  prefetched_.step = -1;  // loaded for another allocation: dropped
  HPTRAIN_ASSIGN_OR_RETURN(Batch batch, train_data_->Gather(indices));
  if (on_device_) {
    batch.inputs = ToDevice(batch.inputs);
    batch.targets = ToDevice(batch.targets);
  }
  return batch;
}

void Trainer::Impl::PrefetchNext(const std::vector<int64_t>& perm, int64_t next_step_in_epoch) {
  std::vector<int64_t> indices = WorkerSlice(perm, next_step_in_epoch, spec_.global_batch_size,
                                             options_.allocation, options_.rank);
  absl::StatusOr<Batch> batch = train_data_->Gather(indices);
  if (!batch.ok()) return;
  batch->inputs = ToDevice(batch->inputs);
  batch->targets = ToDevice(batch->targets);
  prefetched_.step = global_step_ + 1;
  prefetched_.indices = std::move(indices);
  prefetched_.batch = *std::move(batch);
}

void Trainer::Impl::StoreDeviceGradient(int index, const torch::Tensor& grad) {
  torch::NoGradGuard no_grad;
  // Staged: a synchronous copy into the reducer's host slot, ready for the strategy. Device
  // route: a copy on the GPU into device_grads_, on backward's stream (the default stream),
  // queued before the hook marks the tensor ready.
  gradient_slots_[index].copy_(grad);
}

void Trainer::Impl::ClearDeviceGradients() {
  torch::NoGradGuard no_grad;
  device_grads_.zero_();
}

absl::Status Trainer::Impl::WaitForBucket() {
  return options_.device_comm->WaitForStream(kDefaultStream);
}

absl::Status Trainer::Impl::DeviceOptimizerStep(double lr) {
  HPTRAIN_RETURN_IF_ERROR(TorchCall("optimizer step", [&] {
    torch::NoGradGuard no_grad;
    if (!reduce_on_device_) {
      // The host buffer the strategy reduced, back to the device in one copy.
      const int64_t n = static_cast<int64_t>(reducer_->size());
      device_grads_.copy_(torch::from_blob(reducer_->data(), {n}, torch::kFloat32));
    }
    device_grads_.mul_(1.0 / static_cast<double>(spec_.global_batch_size));
  }));
  if (!device_optimizer_) {  // devicePath: the "device" buffers are in host memory
    optimizer_->Step(flat_params_.data_ptr<float>(), device_grads_.data_ptr<float>(), lr);
    return absl::OkStatus();
  }
  // On the stream libtorch's work on this device runs on, after the division above.
  return device_optimizer_->Step(flat_params_.data_ptr<float>(), device_grads_.data_ptr<float>(),
                                 lr, CurrentCudaStream(device_));
}

absl::Status Trainer::Impl::OptimizerStateToHost() {
  if (!device_optimizer_) return absl::OkStatus();
  return device_optimizer_->CopyStateTo(*optimizer_, CurrentCudaStream(device_));
}

absl::Status Trainer::Impl::OptimizerStateToDevice() {
  if (!device_optimizer_) return absl::OkStatus();
  return device_optimizer_->CopyStateFrom(*optimizer_, CurrentCudaStream(device_));
}

absl::Status Trainer::Impl::TrainStep(const std::vector<int64_t>& perm, int epoch,
                                      int64_t step_in_epoch, int64_t steps_per_epoch,
                                      StepStats* stats) {
  const int rank = options_.rank;
  if (callbacks_.allocation_for_step) {
    absl::StatusOr<std::vector<int>> fetched = callbacks_.allocation_for_step(global_step_);
    HPTRAIN_RETURN_IF_ERROR(fetched.status(), "allocation for step ", global_step_);
    std::vector<int> allocation = *std::move(fetched);
    if (allocation.size() != options_.allocation.size()) {
      return absl::InternalError(absl::StrCat("allocation for step ", global_step_, " has ",
                                              allocation.size(), " ranks, expected ",
                                              options_.allocation.size()));
    }
    options_.allocation = std::move(allocation);
  }
  const auto step_start = Clock::now();  // compute time excludes asking for the allocation
  const double cpu_start = Slowdown::ThreadCpuSeconds();
  const int local_batch = options_.allocation[rank];
  step_info_.step = global_step_;
  step_info_.epoch = epoch;
  step_info_.epoch_clock = epoch + static_cast<double>(step_in_epoch) / steps_per_epoch;
  step_info_.local_batch = local_batch;
  step_info_.global_batch = spec_.global_batch_size;
  const double lr = optim::LearningRate(lr_schedule_, epoch, step_in_epoch, steps_per_epoch);
  step_info_.lr = lr;
  // Dropout and other random layers draw from a generator keyed by step and rank, so a resumed
  // run repeats them exactly.
  torch::manual_seed(spec_.seed * 1000003ULL + global_step_ * 131ULL + rank);

  std::vector<int64_t> indices = WorkerSlice(perm, step_in_epoch, spec_.global_batch_size,
                                             options_.allocation, rank);
  HPTRAIN_ASSIGN_OR_RETURN(Batch batch, LoadBatch(indices));
  // Under the scheduler the previous step's exchange may still run: a model whose forward
  // waits layer by layer starts at once, any other waits for the whole update first.
  if (scheduler_ == nullptr) {
    reducer_->BeginStep();
  } else if (!model_->gates_forward()) {
    HPTRAIN_RETURN_IF_ERROR(Drain());
  }
  double loss_value = 0;
  absl::Status scheduled;
  HPTRAIN_RETURN_IF_ERROR(TorchCall("forward/backward", [&] {
    for (auto& p : params_) p.mutable_grad() = torch::Tensor();
    if (reduce_on_device_) ClearDeviceGradients();
    auto logits = model_->Forward(batch.inputs);
    if (!logits.ok()) throw std::runtime_error(std::string(logits.status().message()));
    torch::Tensor loss = torch::nn::functional::cross_entropy(
        *logits, batch.targets,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    if (scheduler_ && !(scheduled = BeginScheduledStep()).ok()) return;
    loss.backward();
    // On a GPU backward has only been queued: the next batch is gathered meanwhile.
    if (on_device_ && step_in_epoch + 1 < steps_per_epoch) PrefetchNext(perm, step_in_epoch + 1);
    loss_value = loss.item<double>();
  }));
  HPTRAIN_RETURN_IF_ERROR(scheduled);
  double compute = Since(step_start);
  const double compute_cpu = Slowdown::ThreadCpuSeconds() - cpu_start;
  double comm_seconds = 0, exposed_seconds = 0;
  if (scheduler_) {
    // The layers are updated as their exchange completes, during the next forward.
    scheduler_->EndBackward();
    // The forward's and BeginScheduledStep's waits are exposed communication, not compute.
    scheduler_->TakeSeconds(&comm_seconds, &exposed_seconds);
    compute = std::max(0.0, compute - exposed_seconds);
    if (strategy_->synchronized_models() || recorder_) {
      HPTRAIN_RETURN_IF_ERROR(Drain());
      double more_comm = 0, more_exposed = 0;
      scheduler_->TakeSeconds(&more_comm, &more_exposed);
      comm_seconds += more_comm;
      exposed_seconds += more_exposed;
    }
  } else {
    HPTRAIN_RETURN_IF_ERROR(reducer_->FinishStep(), "step ", global_step_);
    comm_seconds = reducer_->last_comm_seconds();
    exposed_seconds = reducer_->last_exposed_seconds();
    if (on_device_) {
      if (!strategy_->owns_parameters()) HPTRAIN_RETURN_IF_ERROR(DeviceOptimizerStep(lr));
    } else if (!strategy_->owns_parameters()) {
      float* grads = reducer_->data();
      kernels::Scale(grads, reducer_->size(), 1.0f / static_cast<float>(spec_.global_batch_size));
      optimizer_->Step(flat_params_.data_ptr<float>(), grads, lr);
    }
    // The strategies that exchange models after the step (localsgd, multistep, hierarchical,
    // gossip) wait for it with nothing to overlap: communication, all of it exposed.
    const auto after_start = Clock::now();
    HPTRAIN_RETURN_IF_ERROR(AfterOptimizerStep());
    const double after_seconds = Since(after_start);
    comm_seconds += after_seconds;
    exposed_seconds += after_seconds;
  }
  if (strategy_->synchronized_models()) {
    HPTRAIN_RETURN_IF_ERROR(AverageBuffers(*model_, *comm_), "step ", global_step_);
    HPTRAIN_RETURN_IF_ERROR(AverageOptimizerStateIfAsked(), "step ", global_step_);
  }

  // The compute time reported is what the worker really spent: the stretch as slept, since a
  // sleep may end late on a busy machine.
  double compute_seconds = compute;
  const double emulated = Slowdown::EmulatedSeconds(
      slowdown_.Factor(), compute, slowdown_.ChargedCpuSeconds(local_batch, compute_cpu));
  if (emulated > compute) {
    const auto sleep_start = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(emulated - compute));
    compute_seconds += Since(sleep_start);
  }
  ++global_step_;
  if (recorder_) {
    ParamsToHost();
    recorder_->Record(global_step_, host_params_.data_ptr<float>());
  }
  stats->step = global_step_;
  stats->epoch = epoch;
  stats->batch_size = local_batch;
  stats->train_loss = local_batch > 0 ? loss_value / local_batch : 0.0;
  stats->compute_seconds = compute_seconds;
  stats->comm_seconds = comm_seconds;
  stats->exposed_comm_seconds = exposed_seconds;
  stats->step_seconds = Since(step_start);
  stats->lr = lr;
  const sync::StrategyStats strategy_stats = strategy_->stats();
  stats->compression_ratio = strategy_stats.compression_ratio;
  stats->bits = strategy_stats.bits;
  stats->staleness = strategy_stats.staleness;
  stats->interval = strategy_stats.interval;
  stats->exchanges = strategy_stats.exchanges;
  epoch_timing_.compute_seconds += compute_seconds;  // as emulated, like the step stats
  epoch_timing_.comm_seconds += stats->comm_seconds;
  epoch_timing_.exposed_comm_seconds += stats->exposed_comm_seconds;
  return absl::OkStatus();
}

absl::Status Trainer::Impl::AfterOptimizerStep() {
  const bool buffers = strategy_->exchanges_buffers() && !model_->buffers().empty();
  if (buffers) {
    FlattenBuffers(*model_, &flat_buffers_);
    strategy_->set_buffers(absl::MakeSpan(flat_buffers_));
  }
  // On a GPU the strategy works on the host copy of the model, when it works on the model at all.
  const bool mirror = strategy_->exchanges_parameters();
  if (mirror) ParamsToHost();
  HPTRAIN_RETURN_IF_ERROR(strategy_->AfterOptimizerStep(step_info_, FlatParameters()));
  if (mirror) ParamsToDevice();
  return buffers ? RestoreBuffers(*model_, flat_buffers_, 1.0f) : absl::OkStatus();
}

absl::Status Trainer::Impl::AverageOptimizerStateIfAsked() {
  if (!spec_.strategy.Bool("averageOptimizerState") || comm_->size() == 1) {
    return absl::OkStatus();
  }
  const float inv = 1.0f / static_cast<float>(comm_->size());
  HPTRAIN_RETURN_IF_ERROR(OptimizerStateToHost());
  for (auto& [name, state] : optimizer_->state()) {
    HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSum(state->data(), state->size()),
                            "averaging optimizer state ", name);
    kernels::Scale(state->data(), state->size(), inv);
  }
  HPTRAIN_RETURN_IF_ERROR(OptimizerStateToDevice());
  return absl::OkStatus();
}

absl::Status Trainer::Impl::Evaluation(int epoch, int64_t steps_done, int64_t steps_per_epoch,
                                       bool interim, double loss_sum, double loss_count) {
  HPTRAIN_RETURN_IF_ERROR(Drain());
  // Each worker's own model, before Synchronize replaces it by the average.
  // Only where the workers' models differ (Strategy::models_diverge) and there are several.
  const bool own_models = strategy_->models_diverge() && comm_->size() > 1;
  double own_accuracy = 0;
  if (own_models) HPTRAIN_RETURN_IF_ERROR(evaluator_->EvaluateOwnModel(&own_accuracy));
  ParamsToHost();
  HPTRAIN_RETURN_IF_ERROR(strategy_->Synchronize(global_step_, FlatParameters()),
                          "strategy ", strategy_->name(), " before evaluation");
  ParamsToDevice();
  std::vector<double> worker_accuracies;
  if (own_models) {
    HPTRAIN_RETURN_IF_ERROR(evaluator_->GatherAccuracies(own_accuracy, &worker_accuracies));
  }
  HPTRAIN_RETURN_IF_ERROR(AverageOptimizerStateIfAsked(), "before evaluation");
  float train[2] = {static_cast<float>(loss_sum), static_cast<float>(loss_count)};
  HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSum(train, 2), "epoch loss all-reduce");
  HPTRAIN_RETURN_IF_ERROR(AverageBuffers(*model_, *comm_));
  EpochStats stats;
  stats.epoch = epoch;
  stats.step = global_step_;
  stats.epochs_done = epoch + static_cast<double>(steps_done) / steps_per_epoch;
  stats.interim = interim;
  stats.train_loss = train[1] > 0 ? train[0] / train[1] : 0.0;
  HPTRAIN_RETURN_IF_ERROR(evaluator_->Evaluate(&stats.test_accuracy, &stats.test_loss));
  stats.worker_test_accuracy = std::move(worker_accuracies);
  stats.rank = options_.rank;
  if (!interim) {
    epoch_timing_.epoch = epoch;
    epoch_timing_.train_loss = stats.train_loss;
    HPTRAIN_RETURN_IF_ERROR(strategy_->OnEpochEnd(epoch_timing_), "strategy ", strategy_->name(),
                            " at the end of epoch ", epoch);
    epoch_timing_ = sync::EpochTiming();
  }
  stats.wall_seconds = Since(run_start_);
  if (callbacks_.on_epoch) callbacks_.on_epoch(stats);
  return absl::OkStatus();
}

absl::Status Trainer::Impl::SaveCheckpointIfDue(bool force, int epoch,
                                                int64_t next_step_in_epoch) {
  if (spec_.checkpoint.path.empty()) return absl::OkStatus();
  const int interval = spec_.checkpoint.interval_steps;
  if (!force && (interval <= 0 || global_step_ % interval != 0)) return absl::OkStatus();
  // Every rank, so that all continue from the same model.
  HPTRAIN_RETURN_IF_ERROR(Drain());
  ParamsToHost();
  HPTRAIN_RETURN_IF_ERROR(strategy_->Synchronize(global_step_, FlatParameters()),
                          "strategy ", strategy_->name(), " before a checkpoint");
  ParamsToDevice();
  HPTRAIN_RETURN_IF_ERROR(AverageOptimizerStateIfAsked(), "before a checkpoint");
  if (options_.rank != 0) return absl::OkStatus();
  Checkpoint checkpoint;
  checkpoint.job = spec_.name;
  checkpoint.step = global_step_;
  checkpoint.epoch = epoch;
  checkpoint.step_in_epoch = next_step_in_epoch;
  HPTRAIN_RETURN_IF_ERROR(OptimizerStateToHost());
  checkpoint.optimizer_steps = optimizer_->steps();
  const absl::Span<float> p = FlatParameters();
  checkpoint.sections["params"].assign(p.begin(), p.end());
  FlattenBuffers(*model_, &checkpoint.sections["buffers"]);
  for (const auto& [name, state] : optimizer_->state()) checkpoint.sections[name] = *state;
  HPTRAIN_RETURN_IF_ERROR(strategy_->SaveState(global_step_, &checkpoint.sections),
                          "strategy ", strategy_->name());
  return SaveCheckpoint(spec_.checkpoint.path, checkpoint);
}

absl::Status Trainer::Impl::RestoreCheckpoint() {
  absl::StatusOr<Checkpoint> loaded = LoadCheckpoint(spec_.checkpoint.path);
  if (absl::IsNotFound(loaded.status())) return absl::OkStatus();  // nothing to resume yet
  HPTRAIN_RETURN_IF_ERROR(loaded.status());
  Checkpoint& c = *loaded;
  auto check = [&](const std::string& name, size_t expected) -> absl::Status {
    auto it = c.sections.find(name);
    if (it == c.sections.end() || it->second.size() != expected) {
      return absl::FailedPreconditionError(absl::StrCat(
          spec_.checkpoint.path, ": section ", name, " does not match this model (expected ",
          expected, " values)"));
    }
    return absl::OkStatus();
  };
  HPTRAIN_RETURN_IF_ERROR(check("params", static_cast<size_t>(flat_params_.numel())));
  std::memcpy(host_params_.data_ptr<float>(), c.sections["params"].data(),
              host_params_.numel() * sizeof(float));
  ParamsToDevice();
  HPTRAIN_RETURN_IF_ERROR(check("buffers", BufferElements(*model_)));
  HPTRAIN_RETURN_IF_ERROR(RestoreBuffers(*model_, c.sections["buffers"], 1.0f));
  for (auto& [name, state] : optimizer_->state()) {
    HPTRAIN_RETURN_IF_ERROR(check(name, state->size()));
    *state = c.sections[name];
  }
  optimizer_->set_steps(c.optimizer_steps);
  HPTRAIN_RETURN_IF_ERROR(OptimizerStateToDevice());
  // Every section the trainer did not write itself is the strategy's, whatever its name.
  const std::map<std::string, std::vector<float>*> optimizer_state = optimizer_->state();
  for (auto& [name, values] : c.sections) {
    if (name == "params" || name == "buffers" || optimizer_state.count(name) > 0) continue;
    restored_[name] = std::move(values);
  }
  global_step_ = c.step;
  start_epoch_ = c.epoch;
  start_step_in_epoch_ = c.step_in_epoch;
  return absl::OkStatus();
}

absl::Status Trainer::Impl::Run() {
  run_start_ = Clock::now();
  model_->train(true);
  const int64_t steps_per_epoch =
      StepsPerEpoch(train_data_->size(), spec_.global_batch_size);
  if (steps_per_epoch <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the training set has ", train_data_->size(), " samples, fewer than the global batch ",
        spec_.global_batch_size));
  }
  int64_t total_steps = steps_per_epoch * spec_.epochs;
  if (spec_.max_steps > 0) total_steps = std::min<int64_t>(total_steps, spec_.max_steps);
  for (int epoch = start_epoch_; epoch < spec_.epochs && global_step_ < total_steps; ++epoch) {
    const std::vector<int64_t> perm = EpochPermutation(train_data_->size(), spec_.seed, epoch);
    double loss_sum = 0, loss_count = 0;
    int64_t s = epoch == start_epoch_ ? start_step_in_epoch_ : 0;
    for (; s < steps_per_epoch && global_step_ < total_steps; ++s) {
      if (callbacks_.should_stop && callbacks_.should_stop()) {
        return absl::CancelledError("stopped by the coordinator");
      }
      StepStats stats;
      stats.steps_per_epoch = steps_per_epoch;
      stats.total_steps = total_steps;
      HPTRAIN_RETURN_IF_ERROR(TrainStep(perm, epoch, s, steps_per_epoch, &stats));
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
    }
  }
  // The final state; its position says "nothing left" for a later --resume.
  return Annotate(SaveCheckpointIfDue(true, spec_.epochs, 0), "writing final checkpoint");
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
int64_t Trainer::num_parameters() const { return impl_->num_parameters(); }
const ThreadChoice& Trainer::threads() const { return impl_->threads(); }

absl::Status Preflight(const job::JobSpec& spec) {
  HPTRAIN_RETURN_IF_ERROR(
      CheckDevice(spec, job::ResolveDevice(spec, VisibleCudaDevices() > 0)));
  const std::vector<std::string> strategies = sync::RegisteredStrategies();
  if (std::find(strategies.begin(), strategies.end(), spec.strategy.type) == strategies.end()) {
    return absl::UnimplementedError(absl::StrCat(
        "spec.strategy.type: strategy \"", spec.strategy.type,
        "\" is not available in this build (available: ", absl::StrJoin(strategies, ", "), ")"));
  }
  HPTRAIN_ASSIGN_OR_RETURN(auto train, OpenDataset(spec.dataset, Split::kTrain, spec.seed));
  HPTRAIN_ASSIGN_OR_RETURN(auto test, OpenDataset(spec.dataset, Split::kTest, spec.seed));
  if (StepsPerEpoch(train->size(), spec.global_batch_size) <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.globalBatchSize: ", spec.global_batch_size, " is larger than the ",
                     train->size(), " training samples"));
  }
  HPTRAIN_ASSIGN_OR_RETURN(auto model, CreateModel(spec.model, ShapeOf(*train), spec.seed));
  (void)test;
  (void)model;
  if (spec.strategy.type == "mp2") {
    // The ps (and, in mode B, every worker) loads it at start: refuse a missing or foreign file
    // before any process starts.
    HPTRAIN_ASSIGN_OR_RETURN(auto predictor, ps::mp2::OpenPredictor(spec));
    (void)predictor;
  }
  return absl::OkStatus();
}

}  // namespace hptrain::train
