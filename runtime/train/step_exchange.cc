#include "runtime/train/step_exchange.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/job/optimizer_options.h"
#include "runtime/sync/registry.h"
#include "runtime/train/model_buffers.h"

namespace hptrain::train {
namespace {

// The device's default stream, as a cudaStream_t: null.
constexpr void* kDefaultStream = nullptr;

}  // namespace

absl::StatusOr<std::unique_ptr<StepExchange>> StepExchange::Create(const job::JobSpec& spec,
                                                                   const Peers& peers,
                                                                   FlatModel* flat, Model* model) {
  std::unique_ptr<StepExchange> exchange(new StepExchange(peers.comm, flat, model));
  sync::StrategyContext context = sync::StrategyContextFor(spec, peers.comm, peers.ps);
  if (flat->device().is_cuda()) context.device_comm = peers.device_comm;
  HPTRAIN_ASSIGN_OR_RETURN(exchange->strategy_, sync::CreateStrategy(context));
  HPTRAIN_RETURN_IF_ERROR(exchange->CreateReducer(spec, context.device_comm));
  optim::OptimizerOptions options = job::OptimizerOptionsFor(spec.optimizer);
  if (exchange->strategy_->traits().applies_momentum) options.momentum = 0.0;
  HPTRAIN_ASSIGN_OR_RETURN(exchange->optimizer_,
                           LocalOptimizer::Create(options, exchange->reducer_->size(), *flat));
  return exchange;
}

absl::Status StepExchange::CreateReducer(const job::JobSpec& spec,
                                         comm::Communicator* device_comm) {
  const bool reduce_on_device = device_comm != nullptr && strategy_->traits().reduces_on_device;
  if (device_comm != nullptr && !reduce_on_device) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.communicator.backend: nccl, but strategy ", strategy_->name(),
                     " exchanges through host memory (use gloo or auto)"));
  }
  std::vector<size_t> sizes;
  for (const auto& p : flat_->parameters()) sizes.push_back(static_cast<size_t>(p.numel()));
  // Each bucket is issued asynchronously: bucket k+1's exchange can be in flight with k's. On
  // the device route the bucket is the device buffer at the same offset, and the device
  // communicator's stream is first ordered after backward's copies into it, all queued on the
  // default stream (cudaStreamWaitEvent; the host does not wait).
  sync::GradientReducer* reducer = strategy_->reducer();
  sync::Updater* updater = strategy_->updater();
  reducer_ = std::make_unique<comm::BucketedReducer>(
      sizes, static_cast<size_t>(spec.bucket_mib) << 20,
      comm::BucketedReducer::AsyncReduceFn([this, reducer, updater, device_comm, reduce_on_device](
                                               int bucket, float* data, size_t count) {
        comm::BufferRef buffer = comm::BufferRef::Host(data, count);
        if (reduce_on_device) {
          absl::Status ordered = device_comm->WaitForStream(kDefaultStream);
          if (!ordered.ok()) return comm::Work::Done(ordered);
          buffer = comm::BufferRef::Device(flat_->device_gradients() + (data - reducer_->data()),
                                           count, kDefaultStream);
        }
        return updater != nullptr ? updater->Accumulate(step_, bucket, buffer)
                                  : reducer->Reduce(step_, bucket, buffer);
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
  HPTRAIN_RETURN_IF_ERROR(flat_->AttachGradients(reducer_.get(), reduce_on_device));
  if (reduce_on_device) {
    // Backward, the gradient copies and the optimizer run on the device's default stream (the
    // trainer sets no other), which the device communicator's collectives are ordered against.
    const torch::Device& device = flat_->device();
    const c10::impl::DeviceGuardImplInterface* guard = c10::impl::getDeviceGuardImpl(device.type());
    if (guard->getStream(device) != guard->getDefaultStream(device)) {
      return absl::FailedPreconditionError(
          "the device route needs the trainer on the device's default stream");
    }
  }
  return absl::OkStatus();
}

void StepExchange::BeginStep(const sync::StepInfo& step) {
  step_ = step;
  reducer_->BeginStep();
}

absl::Status StepExchange::FinishStep(ExchangeTimes* times) {
  HPTRAIN_RETURN_IF_ERROR(WaitForExchange(times));
  if (strategy_->updater() == nullptr) {
    HPTRAIN_ASSIGN_OR_RETURN(float* grads, ReducedGradients());
    HPTRAIN_RETURN_IF_ERROR(optimizer_->Step(flat_->data(), grads, step_.lr), "optimizer step");
  }
  return AfterLocalStep(times);
}

absl::Status StepExchange::WaitForExchange(ExchangeTimes* times) {
  HPTRAIN_RETURN_IF_ERROR(reducer_->FinishStep(), "step ", step_.step);
  times->comm = reducer_->last_comm_seconds();
  times->exposed = reducer_->last_exposed_seconds();
  return absl::OkStatus();
}

absl::StatusOr<float*> StepExchange::ReducedGradients() {
  // The reduced gradients are the ones to step on (gradient_reducer.h): on the device path
  // they are (staged: brought back) in device memory.
  if (flat_->on_device()) return flat_->GradientsForStep();
  return reducer_->data();
}

absl::Status StepExchange::AfterLocalStep(ExchangeTimes* times) {
  // The strategies that work on the model after the step (averagers, updaters) wait for their
  // exchange with nothing to overlap: communication, all of it exposed.
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<bool> synchronized = false;
  if (strategy_->updater() != nullptr) {
    synchronized = UpdateModel();
  } else if (strategy_->averager() != nullptr) {
    synchronized = AverageModels();
  }
  HPTRAIN_RETURN_IF_ERROR(synchronized.status());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  times->comm += seconds;
  times->exposed += seconds;
  if (!*synchronized) return absl::OkStatus();
  return Annotate(AfterSynchronization(), absl::StrCat("step ", step_.step));
}

absl::StatusOr<bool> StepExchange::AverageModels() {
  sync::ModelView view;
  const bool buffers = strategy_->traits().exchanges_buffers && !model_->buffers().empty();
  if (buffers) {
    FlattenBuffers(*model_, &flat_buffers_);
    view.buffers = absl::MakeSpan(flat_buffers_);
  }
  flat_->ToHost();
  view.parameters = flat_->host();
  absl::StatusOr<bool> synchronized = strategy_->averager()->Average(step_, view);
  HPTRAIN_RETURN_IF_ERROR(synchronized.status());
  flat_->ToDevice();
  if (buffers) HPTRAIN_RETURN_IF_ERROR(RestoreBuffers(*model_, flat_buffers_, 1.0f));
  return synchronized;
}

absl::StatusOr<bool> StepExchange::UpdateModel() {
  flat_->ToHost();
  absl::StatusOr<bool> synchronized = strategy_->updater()->Update(step_, flat_->host());
  HPTRAIN_RETURN_IF_ERROR(synchronized.status());
  flat_->ToDevice();
  return synchronized;
}

absl::Status StepExchange::AfterSynchronization() {
  HPTRAIN_RETURN_IF_ERROR(AverageBuffers(*model_, *comm_));
  if (!strategy_->traits().averages_optimizer_state) return absl::OkStatus();
  return optimizer_->AverageState(*comm_);
}

absl::Status StepExchange::Synchronize(int64_t steps_done, const char* before) {
  flat_->ToHost();
  HPTRAIN_RETURN_IF_ERROR(strategy_->Synchronize(steps_done, flat_->host()), "strategy ",
                          strategy_->name(), " before ", before);
  flat_->ToDevice();
  if (!strategy_->traits().averages_optimizer_state) return absl::OkStatus();
  return Annotate(optimizer_->AverageState(*comm_), absl::StrCat("before ", before));
}

}  // namespace hptrain::train
