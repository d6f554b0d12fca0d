// hierarchical: node-based communication, eDNNcomm (docs/algorithms.md §2b).
//
// Every step the replicas of one node all-reduce their gradients inside the node
// (node_communicator: the bytes never leave the node) and take the same optimizer step, so a
// node's replicas stay identical. Every K′ steps (`interval`; −1 = once per epoch), at the end
// of every epoch and before every evaluation and checkpoint (Synchronize), the parameters of all
// replicas are averaged, each replica weighted 1/N (§2b (iii)), over the hierarchical all-reduce
// (§2b (iv)): only the node leaders use the network. The trainer averages the BatchNorm buffers
// at those syncs (synchronized_models, and every evaluation); the optimizer state stays local
// unless spec.strategy.averageOptimizerState (the trainer then averages it at the same points).
//
// ReduceGradients scales the node's summed gradient by B / B_m (B_m: the samples of the node's
// replicas this step), so that after the trainer's division by B the optimizer sees the node's
// mean gradient. With one node (B_m = B) nothing is scaled and no global average runs: the run
// is ssgd's, bit for bit (§2d). With K′ = 1 it equals ssgd up to rounding (momentum and weight
// decay are linear; §2d).
//
// Bytes per worker (§2c): per step 2(R−1)/R · 4P inside the node; per global sync about
// 2(M−1)/M · 4P per node over the network, sent by its leader only.
#include "runtime/sync/hierarchical.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/update/update.h"
#include "runtime/base/status.h"
#include "runtime/comm/hierarchical_communicator.h"
#include "runtime/sync/registry.h"

namespace hptrain::sync {

bool NeedsTopology(const job::JobSpec& spec) {
  return spec.communicator.hierarchical || spec.strategy.type == "hierarchical";
}

absl::StatusOr<std::optional<comm::Topology>> JobTopology(
    const job::JobSpec& spec, int world, const std::optional<comm::Topology>& named) {
  if (spec.topology.set()) {
    HPTRAIN_ASSIGN_OR_RETURN(
        comm::Topology topology,
        comm::Topology::FromNodeSizes(spec.topology.NodeSizes(world), world, spec.topology.path()));
    return std::optional<comm::Topology>(std::move(topology));
  }
  if (named.has_value() && named->world() != world) {
    return absl::InvalidArgumentError(
        absl::StrCat("the node names cover ", named->world(), " workers, but the job has ", world));
  }
  return named;
}

absl::StatusOr<std::unique_ptr<comm::Communicator>> MakeJobCommunicator(
    const job::JobSpec& spec, std::unique_ptr<comm::Transport> transport,
    const std::optional<comm::Topology>& named) {
  HPTRAIN_ASSIGN_OR_RETURN(std::optional<comm::Topology> topology,
                           JobTopology(spec, transport->size(), named));
  if (!topology.has_value()) {
    if (NeedsTopology(spec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          spec.strategy.type == "hierarchical" ? "spec.strategy.type: strategy hierarchical"
                                               : "spec.communicator.hierarchical",
          " needs the workers' nodes: set spec.topology (workersPerNode or nodes), or "
          "$HPTRAIN_NODE_NAME in every worker"));
    }
    return std::unique_ptr<comm::Communicator>(
        std::make_unique<comm::TransportCommunicator>(std::move(transport)));
  }
  comm::HierarchicalCommunicator::Options options;
  options.hierarchical = NeedsTopology(spec);
  options.compress_inter_node_only = spec.communicator.compress_inter_node_only;
  return std::unique_ptr<comm::Communicator>(std::make_unique<comm::HierarchicalCommunicator>(
      std::move(transport), *std::move(topology), options));
}

namespace {

class Hierarchical : public Strategy {
 public:
  // `interval`: K′ > 0, or −1 for once per epoch (the epoch-end Synchronize).
  Hierarchical(comm::Communicator* comm, comm::Communicator* node, int interval)
      : comm_(comm), node_(node), interval_(interval), one_node_(node->size() == comm->size()) {}

  std::string name() const override { return "hierarchical"; }

  absl::Status ReduceGradients(const StepInfo& step, int bucket,
                               absl::Span<float> gradients) override {
    if (one_node_) return node_->AllReduceSum(gradients.data(), gradients.size());
    if (bucket == 0) {
      // B_m, the node's samples this step (allocations may differ between ranks and steps).
      float node_batch = static_cast<float>(step.local_batch);
      HPTRAIN_RETURN_IF_ERROR(node_->AllReduceSum(&node_batch, 1), "the node's batch size");
      scale_ = node_batch > 0 ? static_cast<float>(step.global_batch) / node_batch : 0.0f;
    }
    HPTRAIN_RETURN_IF_ERROR(node_->AllReduceSum(gradients.data(), gradients.size()),
                            "intra-node gradient all-reduce");
    kernels::Scale(gradients.data(), gradients.size(), scale_);
    return absl::OkStatus();
  }

  absl::Status AfterOptimizerStep(const StepInfo& step, absl::Span<float> parameters) override {
    synchronized_ = false;
    ++steps_since_sync_;
    if (one_node_ || interval_ <= 0 || (step.step + 1) % interval_ != 0) {
      return absl::OkStatus();
    }
    synchronized_ = true;
    return GlobalAverage(parameters);
  }

  bool synchronized_models() const override { return synchronized_; }

  absl::Status Synchronize(int64_t, absl::Span<float> parameters) override {
    if (one_node_ || steps_since_sync_ == 0) return absl::OkStatus();
    return GlobalAverage(parameters);
  }

  StrategyStats stats() const override {
    StrategyStats s;
    s.interval = interval_ > 0 ? interval_ : std::max<int64_t>(1, last_round_steps_);
    return s;
  }

 private:
  absl::Status GlobalAverage(absl::Span<float> parameters) {
    kernels::Scale(parameters.data(), parameters.size(), 1.0f / static_cast<float>(comm_->size()));
    HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSum(parameters.data(), parameters.size()),
                            "inter-node parameter averaging after ", steps_since_sync_, " steps");
    last_round_steps_ = steps_since_sync_;
    steps_since_sync_ = 0;
    return absl::OkStatus();
  }

  comm::Communicator* comm_;
  comm::Communicator* node_;
  const int interval_;
  const bool one_node_;        // M = 1: the global step is a no-op and is skipped (§2d)
  float scale_ = 1.0f;         // B / B_m of the current step
  bool synchronized_ = false;  // the last AfterOptimizerStep averaged the models
  int64_t steps_since_sync_ = 0;
  int64_t last_round_steps_ = 0;
};

}  // namespace

bool hierarchical_registered = RegisterStrategy(
    "hierarchical",
    [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      comm::Communicator* node = context.comm->node_communicator();
      if (node == nullptr) {
        return absl::FailedPreconditionError(
            "spec.strategy.type: strategy hierarchical needs the workers' nodes: set "
            "spec.topology (workersPerNode or nodes), or $HPTRAIN_NODE_NAME in every worker");
      }
      const int interval = context.job->strategy.interval;
      return std::make_unique<Hierarchical>(context.comm, node, interval != 0 ? interval : -1);
    });

}  // namespace hptrain::sync
