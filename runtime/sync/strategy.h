// Strategy: how workers keep their models in agreement, made of the components of the exchange
// library (docs/adding-a-strategy.md):
//
//   a gradient reducer (gradient_reducer.h): each bucket of summed gradients -> the gradient the
//                        optimizer steps on: ssgd, fp16, quantized, topk, dgc;
//   a model averager   (model_averager.h): after the local optimizer step: localsgd,
//                        hierarchical, gossip, mp2 (each with a reducer);
//   an updater         (updater.h): replaces the optimizer: ps, hps, multistep.
//
// A strategy is a reducer, a reducer + averager pair, or an updater; it declares its traits once
// (strategy_traits.h), and takes part in the run's lifecycle through the methods below: Init with
// the gradient layout, Start with the initial (or restored) model, Synchronize before every
// evaluation and checkpoint, SaveState into checkpoints under section names of its own (the
// client hands every section it did not write itself back to Start), OnStepTiming, OnEpochEnd,
// and stats.
//
// One step, as a client (runtime/train/trainer.cc) drives it:
//   backward -> reducer()->Reduce or updater()->Accumulate per bucket -> wait for the Works ->
//   the optimizer step on the reduced gradients, then averager()->Average; or updater()->Update.
//
// Strategies see flat float buffers only, never libtorch. They are created by name through the
// registry (registry.h) from the job's strategy block, their options read through their
// descriptor (strategy_descriptor.h).
#ifndef HPTRAIN_RUNTIME_SYNC_STRATEGY_H_
#define HPTRAIN_RUNTIME_SYNC_STRATEGY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/comm/work.h"
#include "runtime/sync/gradient_reducer.h"
#include "runtime/sync/model_averager.h"
#include "runtime/sync/step_info.h"
#include "runtime/sync/strategy_descriptor.h"
#include "runtime/sync/strategy_traits.h"
#include "runtime/sync/updater.h"

namespace hptrain::sync {

// Times of one epoch as this worker measured them, handed to OnEpochEnd.
struct EpochTiming {
  int epoch = 0;
  double compute_seconds = 0;        // data + forward + backward, emulated slowdown included
  double comm_seconds = 0;           // time in the gradient exchange (overlapped or not)
  double exposed_comm_seconds = 0;   // time the trainer waited for communication after backward
  double train_loss = 0;             // the epoch's mean training loss over all ranks (the same
                                     // on every rank)
};

// What the strategy reports for the metrics hptrain_compression_ratio and hptrain_quant_bit_width
// (promtool rejects the name hptrain_quant_bits: a "_bits" suffix reads as a non-base unit).
struct StrategyStats {
  double compression_ratio = 1.0;  // uncompressed gradient bytes / bytes put on the wire
  int bits = 32;                   // current bits per gradient element (32 = uncompressed)
  // Parameter-server strategies: model versions the copy the next step computes on lags behind
  // that step (0 when synchronous; never above the staleness bound), and the most seen so far.
  int64_t staleness = 0;
  int64_t max_staleness = 0;
  // Local steps between two synchronisations of the workers (localsgd, multistep); 1 for the
  // strategies that synchronise every step. Reported as hptrain_sync_interval.
  int interval = 1;
  // gossip: model exchanges this worker took part in so far (hptrain_gossip_exchanges_total).
  int64_t exchanges = 0;
  // gossip: the threshold θ in force, calibrated or set; 0 with a fixed period and while the
  // calibration window runs (the run summary's ranks[].threshold).
  double gossip_threshold = 0;
  // Strategies that decide whether to compress from measured times (auto, quantized with bits
  // dynamic or denseFallback, compression_gate.h): what they picked and the figures why, for the
  // run summary; empty for the others.
  std::string decision;
};

// Running totals behind StrategyStats::compression_ratio.
struct CompressionTally {
  double raw_bytes = 0;   // what the gradients would have been in fp32
  double wire_bytes = 0;  // what this worker's encoding of them took
  void Add(double raw, double wire) {
    raw_bytes += raw;
    wire_bytes += wire;
  }
  double ratio() const { return wire_bytes > 0 ? raw_bytes / wire_bytes : 1.0; }
};

// Error feedback owed back: x[i] += residual[i], then residual is zeroed. An empty residual (error
// feedback off) leaves x alone; otherwise it has x's size.
inline void FoldResidual(std::vector<float>& residual, absl::Span<float> x) {
  for (size_t i = 0; i < residual.size(); ++i) {
    x[i] += residual[i];
    residual[i] = 0.0f;
  }
}

// Checkpoint sections by name (runtime/train/checkpoint.h).
using CheckpointSections = std::map<std::string, std::vector<float>>;

class Strategy {
 public:
  virtual ~Strategy() = default;

  virtual std::string name() const = 0;
  const StrategyTraits& traits() const { return traits_; }

  // The components (see above): exactly one of reducer() and updater() is set, and averager()
  // only with a reducer. Each points into the strategy and lives as long as it.
  virtual GradientReducer* reducer() { return nullptr; }
  virtual ModelAverager* averager() { return nullptr; }
  virtual Updater* updater() { return nullptr; }

  // Called once before the first step with the gradient layout. The default does nothing.
  virtual absl::Status Init(const GradientLayout& layout) {
    (void)layout;
    return absl::OkStatus();
  }

  // Called once after Init (and after a checkpoint was restored), before the first step, on
  // every rank: the flat parameters (initial, or the checkpoint's), the global step training
  // starts at, and the restored checkpoint's sections that the client did not write itself
  // (empty when not resuming).
  virtual absl::Status Start(absl::Span<float> parameters, int64_t step,
                             const CheckpointSections& restored) {
    (void)parameters;
    (void)step;
    (void)restored;
    return absl::OkStatus();
  }

  // Called on every rank before each evaluation and each checkpoint, after `steps_done` steps:
  // the parameters must then be the model after exactly that many steps, the same on every rank.
  virtual absl::Status Synchronize(int64_t steps_done, absl::Span<float> parameters) {
    (void)steps_done;
    (void)parameters;
    return absl::OkStatus();
  }

  // On rank 0, adds the strategy's own state to the checkpoint written after `steps_done` steps,
  // under section names of its own ("<strategy>.<what>").
  virtual absl::Status SaveState(int64_t steps_done, CheckpointSections* sections) {
    (void)steps_done;
    (void)sections;
    return absl::OkStatus();
  }

  // Called on every rank at the end of each epoch, on the client's thread (collectives allowed:
  // strategies that adapt use them to agree on one decision). The default does nothing.
  virtual absl::Status OnEpochEnd(const EpochTiming& timing) {
    (void)timing;
    return absl::OkStatus();
  }

  // Called on every rank after each step with the times the client measured for it, on the
  // client's thread, while the exchange's thread may still work: no collectives here (a strategy
  // that decides from these times agrees inside its exchange, as CompressionGate does). The
  // default does nothing.
  virtual void OnStepTiming(const StepTiming& timing) { (void)timing; }

  virtual StrategyStats stats() const { return StrategyStats(); }

  // Values of this worker's state that SaveState does not hold (error-feedback residuals, a
  // calibration in progress): what a membership change drops (docs/elastic.md). Default 0.
  virtual int64_t UnsavedStateValues() const { return 0; }

 protected:
  // Set by each strategy's constructor, once: its descriptor's (DeclaredTraits(name())), and what
  // follows from its options and communicators.
  StrategyTraits traits_;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_STRATEGY_H_
