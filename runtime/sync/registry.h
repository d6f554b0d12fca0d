// Strategy registry: strategies register a factory under their `spec.strategy.type` name, and the
// worker creates one by name. Adding a strategy is a new file with a registration, not an edit to a
// dispatch chain.
#ifndef HPTRAIN_RUNTIME_SYNC_REGISTRY_H_
#define HPTRAIN_RUNTIME_SYNC_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/job/job_spec.h"
#include "runtime/sync/strategy.h"

namespace hptrain::ps {
class PsConnection;
}

namespace hptrain::sync {

struct StrategyContext {
  const job::JobSpec* job = nullptr;
  comm::Communicator* comm = nullptr;  // owned by the caller, outlives the strategy
  // The job's parameter-server shards (strategies ps, hps); null for the others. Owned by the
  // caller, outlives the strategy.
  ps::PsConnection* ps = nullptr;
  // The job's device communicator (NCCL, device buffers) when the worker trains on a GPU with
  // spec.communicator.backend nccl; null otherwise. Owned by the caller, outlives the strategy.
  // Strategies that use it for their gradients say so with Strategy::reduces_on_device.
  comm::Communicator* device_comm = nullptr;
};

using StrategyFactory =
    std::function<absl::StatusOr<std::unique_ptr<Strategy>>(const StrategyContext&)>;

// Registers `factory` under `name`; returns true (for use in a static initialiser).
bool RegisterStrategy(const std::string& name, StrategyFactory factory);

// Creates the strategy named by job.strategy.type; NotFound naming the known strategies otherwise.
absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(const StrategyContext& context);

std::vector<std::string> RegisteredStrategies();

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_REGISTRY_H_
