// hierarchical: node-based communication, eDNNcomm (docs/algorithms.md §2b).
//
// Every step the replicas of one node all-reduce their gradients inside the node
// (node_communicator: the bytes never leave the node) and take the same optimizer step, so a
// node's replicas stay identical. Every K′ steps (`interval`; −1 = once per epoch), at the end
// of every epoch and before every evaluation and checkpoint (Synchronize), the parameters of all
// replicas are averaged, each replica weighted 1/N (§2b (iii)), over the hierarchical all-reduce
// (§2b (iv)): only the node leaders use the network. The trainer averages the BatchNorm buffers
// at those syncs (Average returns true, and every evaluation); the optimizer state stays local
// unless spec.strategy.averageOptimizerState (StrategyTraits::averages_optimizer_state: the
// trainer then averages it at the same points).
//
// K′ ramp-up (§2e, as post-local SGD starts its local steps after a first phase of global ones):
// the first W global steps (`warmupSteps`) are ssgd's: the gradients are all-reduced over all
// replicas (the hierarchical all-reduce), so every replica takes the same step and no parameter
// average is needed. The K′ schedule counts from the end of the warm-up: the global syncs follow
// steps W + K′, W + 2K′, ..., so a run of T steps has W gradient all-reduces and
// floor((T − W)/K′) syncs across the network, plus the epoch-end syncs. Without `warmupSteps`,
// W is the steps of max(spec.optimizer.schedule.warmupEpochs, 1/2) epochs: the LR warm-up, and at
// least half an epoch (the demo job, 2 epochs with K′ = −1 and the cosine schedule, ends 0.6–2.3
// points below ssgd without it, 0.4–0.5 with it; docs/algorithms.md §2g).
//
// The reducer scales the node's summed gradient by B / B_m (B_m: the samples of the node's replicas
// this step), so that after the division by B (SummingReducer) the optimizer sees the node's mean
// gradient. With one node (B_m = B) nothing is scaled and no global average runs: the run is
// ssgd's, bit for bit (§2d). With K′ = 1 it equals ssgd up to rounding (momentum and weight decay
// are linear; §2d).
//
// Bytes per worker (§2c): per step 2(R−1)/R · 4P inside the node; per global sync about
// 2(M−1)/M · 4P per node over the network, sent by its leader only.
#include "runtime/sync/hierarchical.h"

#include <algorithm>
#include <cmath>
#include <optional>

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

// The least default warm-up, in epochs (docs/algorithms.md §2g).
constexpr double kDefaultWarmupEpochs = 0.5;

class Hierarchical : public Strategy, public SummingReducer, public ModelAverager {
 public:
  // `interval`: K′ > 0, or −1 for once per epoch (the epoch-end Synchronize). `warmup`: W, the
  // global steps that all-reduce the gradients over all replicas first, or −1 for the steps of
  // `warmup_epochs` epochs (known from the first step's epoch clock).
  Hierarchical(comm::Communicator* comm, comm::Communicator* node, int interval, int64_t warmup,
               double warmup_epochs, bool average_optimizer_state)
      : comm_(comm),
        node_(node),
        interval_(interval),
        warmup_(warmup),
        warmup_epochs_(warmup_epochs),
        one_node_(node->size() == comm->size()) {
    traits_ = DeclaredTraits(name());
    traits_.averages_optimizer_state = average_optimizer_state;
  }

  std::string name() const override { return "hierarchical"; }
  GradientReducer* reducer() override { return this; }
  ModelAverager* averager() override { return this; }

  absl::Status ReduceSum(const StepInfo& step, int bucket, absl::Span<float> gradients) override {
    if (one_node_) return node_->AllReduceSum(gradients.data(), gradients.size());
    if (bucket == 0) warmup_step_ = InWarmup(step);
    if (warmup_step_) {
      // ssgd's step: the division by B gives the global mean gradient.
      HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSum(gradients.data(), gradients.size()),
                              "K′ ramp-up gradient all-reduce at step ", step.step + 1);
      return absl::OkStatus();
    }
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

  absl::StatusOr<bool> Average(const StepInfo& step, const ModelView& model) override {
    if (one_node_) return false;
    if (warmup_step_) {
      steps_since_sync_ = 0;  // every replica took the same step
      return false;
    }
    ++steps_since_sync_;
    if (interval_ <= 0 || (step.step + 1 - warmup_) % interval_ != 0) return false;
    HPTRAIN_RETURN_IF_ERROR(GlobalAverage(model.parameters));
    return true;
  }

  absl::Status Synchronize(int64_t, absl::Span<float> parameters) override {
    if (one_node_ || steps_since_sync_ == 0) return absl::OkStatus();
    return GlobalAverage(parameters);
  }

  StrategyStats stats() const override {
    StrategyStats s;
    s.interval = warmup_step_      ? 1
                 : interval_ > 0 ? interval_
                                 : std::max<int64_t>(1, last_round_steps_);
    return s;
  }

 private:
  // Whether `step` is one of the first W; resolves the default W once the epoch's length is known
  // (the epoch clock is epoch + step_in_epoch / steps_per_epoch, so steps_per_epoch is
  // step / epoch_clock, the same on every rank).
  bool InWarmup(const StepInfo& step) {
    if (warmup_ < 0 && step.epoch_clock > 0) {
      const double steps_per_epoch = std::round(static_cast<double>(step.step) / step.epoch_clock);
      warmup_ = static_cast<int64_t>(std::ceil(warmup_epochs_ * steps_per_epoch - 1e-9));
    }
    return warmup_ < 0 || step.step < warmup_;  // unresolved only at step 0
  }

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
  int64_t warmup_;             // W: global steps with ssgd's gradient all-reduce; −1 = not yet
                               // resolved from warmup_epochs_
  const double warmup_epochs_;  // the default W in epochs
  const bool one_node_;        // M = 1: the global step is a no-op and is skipped (§2d)
  float scale_ = 1.0f;         // B / B_m of the current step
  bool warmup_step_ = false;   // the current (or last) step is one of the first W
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
      // hierarchical's parameters (strategy_descriptors.cc): interval (-1: once per epoch) and
      // warmupSteps (left out: -1, the schedule's warm-up).
      const StrategyOptions& options = *context.options;
      const int interval = static_cast<int>(options.Int("interval"));
      const int warmup =
          options.Has("warmupSteps") ? static_cast<int>(options.Int("warmupSteps")) : -1;
      return std::make_unique<Hierarchical>(
          context.comm, node, interval, warmup,
          std::max(context.lr_warmup_epochs, kDefaultWarmupEpochs),
          options.Bool("averageOptimizerState"));
    });

}  // namespace hptrain::sync
