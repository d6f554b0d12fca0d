#include "runtime/train/scheduled_exchange.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"

namespace hptrain::train {

absl::StatusOr<std::unique_ptr<ScheduledExchange>> ScheduledExchange::Create(
    const job::ExchangeSchedulerSpec& spec, sync::Strategy* strategy, comm::Communicator* comm,
    comm::BucketedReducer* layout, FlatModel* flat, LocalOptimizer* optimizer, Model* model) {
  if (!strategy->traits().supports_scheduler) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.scheduler.type: strategy ", strategy->name(),
                     " does not support the priority scheduler (ssgd and multistep do)"));
  }
  std::unique_ptr<ScheduledExchange> exchange(
      new ScheduledExchange(strategy, layout, flat, optimizer));
  ScheduledExchange* self = exchange.get();
  std::vector<std::pair<size_t, size_t>> ranges;
  for (int t = 0; t < layout->num_tensors(); ++t) {
    ranges.push_back({layout->offset(t), layout->offset(t) + layout->tensor_size(t)});
  }
  comm::PriorityScheduler::Options options;
  options.partition_elements = spec.partition();
  options.credit_elements = spec.credit();
  comm::PriorityScheduler::Hooks hooks;
  sync::Updater* updater = strategy->updater();
  hooks.prepare = [self, updater](int, size_t begin, size_t end) {
    if (updater == nullptr) return absl::OkStatus();
    return updater->PrepareRange(self->step_, begin, end, self->layout_->data());
  };
  hooks.finish = [self, updater](int, size_t begin, size_t end) -> absl::Status {
    float* grads = self->layout_->data();
    if (updater != nullptr) {
      return updater->FinishRange(self->step_, begin, end, grads, self->flat_->host());
    }
    HPTRAIN_RETURN_IF_ERROR(
        sync::DivideByGlobalBatch(self->step_, comm::BufferRef::Host(grads + begin, end - begin)));
    self->optimizer_->StepRange(self->flat_->data(), grads, begin, end, self->step_.lr);
    return absl::OkStatus();
  };
  exchange->scheduler_ = std::make_unique<comm::PriorityScheduler>(
      comm, std::move(ranges), model->parameter_layers(), layout->data(), options, hooks);
  // The next forward of layer l waits only for layer l's update.
  if (model->gates_forward()) {
    model->set_forward_gate([self](int layer) { self->scheduler_->WaitLayer(layer); });
  }
  return exchange;
}

absl::Status ScheduledExchange::Begin(const sync::StepInfo& step) {
  HPTRAIN_RETURN_IF_ERROR(scheduler_->WaitIdle(), "step ", step.step - 1);
  step_ = step;
  sync::ScheduledStep plan;
  if (sync::Updater* updater = strategy_->updater(); updater != nullptr) {
    plan = updater->PlanScheduledStep(step_, layout_->data());
  } else {
    // A reducer's step: the plain all-reduce of the trainer's gradients, then the local step.
    optimizer_->BeginStep();
    plan.exchange = layout_->data();
  }
  synchronizes_ = plan.synchronizes;
  return scheduler_->BeginStep(plan.exchange);
}

absl::Status ScheduledExchange::Drain(int64_t last_step) {
  return Annotate(scheduler_->WaitIdle(), absl::StrCat("step ", last_step));
}

}  // namespace hptrain::train
