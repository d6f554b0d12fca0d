// The job's communicator with its node topology (docs/algorithms.md §2), shared by the worker and
// the strategy tests, and the strategy `hierarchical` (hierarchical.cc).
#ifndef HPTRAIN_RUNTIME_SYNC_HIERARCHICAL_H_
#define HPTRAIN_RUNTIME_SYNC_HIERARCHICAL_H_

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/topology.h"
#include "runtime/comm/transport.h"
#include "runtime/job/job_spec.h"

namespace hptrain::sync {

// True when the job's all-reduces or its strategy need the workers' nodes.
bool NeedsTopology(const job::JobSpec& spec);

// The nodes of the job's `world` ranks: spec.topology when set, else `named` (the workers' node
// names, published through the coordinator), else none.
absl::StatusOr<std::optional<comm::Topology>> JobTopology(
    const job::JobSpec& spec, int world, const std::optional<comm::Topology>& named);

// The communicator a worker of `spec` uses over `transport` (every rank of the job): with a
// topology (JobTopology), a comm::HierarchicalCommunicator, hierarchical when
// spec.communicator.hierarchical or the strategy is `hierarchical`, flat otherwise (its byte
// counters still split intra- and inter-node); without one, a comm::TransportCommunicator.
// FailedPrecondition when NeedsTopology(spec) and no topology is known.
absl::StatusOr<std::unique_ptr<comm::Communicator>> MakeJobCommunicator(
    const job::JobSpec& spec, std::unique_ptr<comm::Transport> transport,
    const std::optional<comm::Topology>& named = std::nullopt);

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_HIERARCHICAL_H_
