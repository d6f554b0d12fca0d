// StrategyTraits: what a strategy declares about itself, for the launcher and the documentation,
// and for the trainer (or any other client of the exchange library) that drives it. A strategy's
// descriptor (strategy_descriptor.h) declares the traits every instance has; the instance adds
// those that follow from its options or its communicators at creation (Strategy::traits()).
// Everything else a client needs follows from which components the strategy has (strategy.h).
#ifndef HPTRAIN_RUNTIME_SYNC_STRATEGY_TRAITS_H_
#define HPTRAIN_RUNTIME_SYNC_STRATEGY_TRAITS_H_

namespace hptrain::sync {

struct StrategyTraits {
  // Runs a parameter server in the job's ps processes (ps, hps, mp2).
  bool uses_parameter_server = false;
  // The reducer applies momentum itself (DGC's momentum correction): the client's optimizer then
  // runs without momentum.
  bool applies_momentum = false;
  // The reducer takes DEVICE buckets (pointers into the GPU's flat gradient buffer) and exchanges
  // them over the job's device communicator (NCCL), with no copy to the host. Only a strategy
  // created with a device communicator (StrategyContext::device_comm) says so; the others get host
  // buckets, staged from the GPU by the client.
  bool reduces_on_device = false;
  // Every worker trains a model of its own between evaluations (gossip), so the workers' models
  // differ until Synchronize averages them: the client then also evaluates each worker's own
  // model before Synchronize (docs/algorithms.md §4e).
  bool models_diverge = false;
  // The averager exchanges whole models, BatchNorm running statistics included (gossip): the
  // client hands it the model's buffers, flattened, in ModelView::buffers and writes them back
  // after (docs/algorithms.md §4e). Otherwise ModelView::buffers is empty.
  bool exchanges_buffers = false;
  // The optimizer state is averaged over the workers wherever the models were synchronized
  // (hierarchical's averageOptimizerState, docs/algorithms.md §2b (ii)); otherwise it stays
  // local.
  bool averages_optimizer_state = false;
  // The sub-tensor priority scheduler (spec.scheduler.type: priority) can drive the strategy:
  // a reducer whose exchange is the plain all-reduce of the summed gradients (ssgd), which the
  // scheduler then runs layer by layer, or an updater that implements Updater's scheduled
  // hooks.
  bool supports_scheduler = false;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_STRATEGY_TRAITS_H_
