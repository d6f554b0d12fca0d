// Strategy registry: strategies register a factory under their `spec.strategy.type` name, and the
// worker creates one by name. Adding a strategy is a new file with a registration, not an edit to a
// dispatch chain.
#ifndef HPTRAIN_RUNTIME_SYNC_REGISTRY_H_
#define HPTRAIN_RUNTIME_SYNC_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/job/job_spec.h"
#include "runtime/optim/optimizer_options.h"
#include "runtime/sync/strategy.h"
#include "runtime/sync/strategy_options.h"

namespace hptrain::ps {
class PsConnection;
}

namespace hptrain::sync {

// What a strategy's factory gets: its own options, the few settings of the job it depends on
// besides them, and its communicators. Never the whole job spec: StrategyContextFor makes one from
// a job.
struct StrategyContext {
  // spec.strategy: the type and the values the job gave, read through the strategy's descriptor
  // (StrategyOptions::Int and the others give the default of a value left out), as validated.
  // Owned by the caller, outlives the strategy.
  const StrategyOptions* options = nullptr;
  uint64_t seed = 0;                   // spec.seed: stochastic rounding, sampling, gossip peers
  optim::OptimizerOptions optimizer;   // spec.optimizer (momentum correction, delayed steps)
  double lr_warmup_epochs = 0;         // spec.optimizer.schedule.warmupEpochs
  comm::Communicator* comm = nullptr;  // owned by the caller, outlives the strategy
  // The job's parameter-server shards (strategies ps, hps, mp2); null for the others. Owned by
  // the caller, outlives the strategy.
  ps::PsConnection* ps = nullptr;
  // The job's device communicator (NCCL, device buffers) when the worker trains on a GPU with
  // spec.communicator.backend nccl; null otherwise. Owned by the caller, outlives the strategy.
  // Strategies that use it for their gradients say so in StrategyTraits::reduces_on_device.
  comm::Communicator* device_comm = nullptr;
};

using StrategyFactory =
    std::function<absl::StatusOr<std::unique_ptr<Strategy>>(const StrategyContext&)>;

// Registers `factory` under `name`; returns true (for use in a static initialiser).
bool RegisterStrategy(const std::string& name, StrategyFactory factory);

// The context of `spec`'s strategy over `comm` (and the job's parameter server `ps`, if any);
// device_comm is left null.
StrategyContext StrategyContextFor(const job::JobSpec& spec, comm::Communicator* comm,
                                   ps::PsConnection* ps = nullptr);

// Creates the strategy named by context.options->type; Unimplemented naming the strategies this
// build has otherwise.
absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(const StrategyContext& context);

std::vector<std::string> RegisteredStrategies();

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_REGISTRY_H_
