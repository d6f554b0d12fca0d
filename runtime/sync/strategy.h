// Strategy: how workers keep their models in agreement. The trainer calls two hooks every step:
//
//   1. ReduceGradients, once per gradient bucket, on the communicator thread while backward is
//      still running (buckets in a fixed order, the same on every rank). The bucket holds this
//      worker's SUMMED gradient (Σ over its b_i samples of ∂loss/∂θ); on return it must hold what
//      the trainer divides by the global batch B before the optimizer step. SSGD all-reduces it,
//      giving Σ_i b_i·g_i / B after the division: weighted aggregation, so any allocation computes
//      the same update as one process with batch B.
//   2. AfterOptimizerStep, on the trainer thread, with the flat parameters after the local update
//      (local SGD, gossip and parameter-server strategies act here).
// A strategy that owns_parameters() (the parameter-server strategies) replaces the local update:
// the trainer runs no optimizer, and the strategy sets the parameters in AfterOptimizerStep. Such
// a strategy also takes part in checkpoints (SaveState, and the restored sections in Start) and
// is asked to Synchronize before every evaluation and checkpoint.
//
// Strategies see flat float buffers only, never libtorch. They are created by name through the
// registry (registry.h) from the job's strategy block.
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

namespace hptrain::sync {

// Where each parameter's gradient sits in the flat gradient buffer, and the reducer's buckets.
struct GradientLayout {
  struct Range {
    size_t begin = 0;  // element offset in the flat buffer
    size_t end = 0;
  };
  std::vector<Range> tensors;  // in registration order
  std::vector<Range> buckets;  // bucket k covers tensors entirely
};

// Times of one epoch as this worker measured them, handed to OnEpochEnd.
struct EpochTiming {
  int epoch = 0;
  double compute_seconds = 0;        // data + forward + backward, emulated slowdown included
  double comm_seconds = 0;           // time inside ReduceGradients (overlapped or not)
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

struct StepInfo {
  int64_t step = 0;        // global step, 0-based
  int epoch = 0;
  double epoch_clock = 0;  // epoch + fraction of it done before this step (for schedules)
  int local_batch = 0;     // b_i of this worker in this step
  int global_batch = 0;    // B
  double lr = 0;           // the learning rate of this step (the same on every worker)
};

// Checkpoint sections by name (runtime/train/checkpoint.h).
using CheckpointSections = std::map<std::string, std::vector<float>>;

class Strategy {
 public:
  virtual ~Strategy() = default;

  virtual std::string name() const = 0;

  // Called once before the first step with the gradient layout. The default does nothing.
  virtual absl::Status Init(const GradientLayout& layout) {
    (void)layout;
    return absl::OkStatus();
  }

  // Hook 1 (see above). `bucket` indexes the reducer's buckets; called for every bucket of every
  // step, in bucket order. An error fails the step.
  virtual absl::Status ReduceGradients(const StepInfo& step, int bucket,
                                       absl::Span<float> gradients) = 0;
  // Hook 1, issued asynchronously: the same reduction of `gradients` (host memory, or device
  // memory when reduces_on_device(), with the stream that consumes it), returning its Work
  // (runtime/comm/work.h) while the collective may still be in flight; the bucketed reducer
  // issues the next bucket meanwhile and waits for every Work at the end of the step. The
  // default runs ReduceGradients and returns a completed Work; a strategy whose reduction is one
  // collective returns the communicator's Work instead.
  virtual std::shared_ptr<comm::Work> ReduceGradientsAsync(const StepInfo& step, int bucket,
                                                           const comm::BufferRef& gradients) {
    return comm::Work::Done(
        ReduceGradients(step, bucket, absl::MakeSpan(gradients.floats(), gradients.count)));
  }

  // Hook 2 (see above). The default does nothing.
  virtual absl::Status AfterOptimizerStep(const StepInfo& step, absl::Span<float> parameters) {
    (void)step;
    (void)parameters;
    return absl::OkStatus();
  }

  // Called on every rank at the end of each epoch, on the trainer thread (collectives allowed:
  // strategies that adapt use them to agree on one decision). The default does nothing.
  virtual absl::Status OnEpochEnd(const EpochTiming& timing) {
    (void)timing;
    return absl::OkStatus();
  }

  // True when the strategy applies momentum itself (DGC's momentum correction): the optimizer
  // then runs without momentum.
  virtual bool applies_momentum() const { return false; }

  // True when the parameters come from elsewhere (a parameter server): no local optimizer step.
  virtual bool owns_parameters() const { return false; }

  // True when AfterOptimizerStep may read or write the parameters it is given (model averaging,
  // delayed updates, a parameter server, gossip). A worker training on a GPU keeps the model in
  // device memory and hands the strategy a host copy: it copies the model to the host before
  // AfterOptimizerStep and back after it only when this is true. Strategies that only reduce
  // gradients return false. The default is true, which is always correct, only slower.
  virtual bool exchanges_parameters() const { return true; }

  // True when ReduceGradients takes DEVICE buffers (pointers into the GPU's flat gradient buffer)
  // and exchanges them over the job's device communicator (StrategyContext::device_comm, NCCL),
  // with no copy to the host. Only strategies created with a device communicator can; the others
  // get host buffers, staged from the GPU by the trainer.
  virtual bool reduces_on_device() const { return false; }

  // True when the AfterOptimizerStep just called ended a round of local steps by giving every
  // worker the same parameters (localsgd's and multistep's synchronisations, every mp2 round):
  // the trainer then averages the BatchNorm buffers over the workers as well (docs/algorithms.md §3b,
  // §1b), so that the models agree in full, not only in their parameters. Every rank must give
  // the same answer for the same step. The default: false (the buffers are averaged at every
  // evaluation, for every strategy).
  virtual bool synchronized_models() const { return false; }

  // True when every worker trains a model of its own between evaluations (gossip), so that the
  // workers' models differ until Synchronize averages them: the trainer then also evaluates each
  // worker's own model before Synchronize and reports the spread of their accuracies
  // (docs/algorithms.md §4e). False for the strategies whose workers hold one model, or whose
  // models differ only briefly between synchronisations (no extra evaluation).
  virtual bool models_diverge() const { return false; }

  // True when the strategy exchanges whole models between workers during training (gossip):
  // the trainer then hands it the model's buffers (BatchNorm running statistics), flattened,
  // with set_buffers before every AfterOptimizerStep, and writes them back into the model after
  // it, so that the buffers travel and are averaged with the parameters (docs/algorithms.md §4e).
  virtual bool exchanges_buffers() const { return false; }
  virtual void set_buffers(absl::Span<float> buffers) { (void)buffers; }

  // Called once after Init (and after a checkpoint was restored), before the first step, on
  // every rank: the flat parameters (initial, or the checkpoint's), the global step training
  // starts at, and the restored checkpoint's sections (empty when not resuming).
  virtual absl::Status Start(absl::Span<float> parameters, int64_t step,
                             const CheckpointSections& restored) {
    (void)parameters;
    (void)step;
    (void)restored;
    return absl::OkStatus();
  }

  // Called on every rank before each evaluation and each checkpoint, after `steps_done` steps:
  // the parameters must then be the model after exactly that many steps.
  virtual absl::Status Synchronize(int64_t steps_done, absl::Span<float> parameters) {
    (void)steps_done;
    (void)parameters;
    return absl::OkStatus();
  }

  // On rank 0, adds the strategy's own state to the checkpoint written after `steps_done` steps.
  virtual absl::Status SaveState(int64_t steps_done, CheckpointSections* sections) {
    (void)steps_done;
    (void)sections;
    return absl::OkStatus();
  }

  virtual StrategyStats stats() const { return StrategyStats(); }

  // The sub-tensor priority scheduler (spec.scheduler.type: priority;
  // runtime/comm/priority_scheduler.h) replaces hooks 1 and 2 for strategies that support it: the
  // step is planned on the trainer thread, then each layer is prepared as backward produces it
  // and finished (updated) as soon as its exchange completes, on the scheduler thread, while the
  // next step's forward already runs on the layers finished before. Every range below is one
  // layer's [begin, end) of the flat buffers; the calls of one step come in no fixed layer
  // order, and never concurrently.
  virtual bool supports_scheduler() const { return false; }

  // Trainer thread, before the step's backward (the previous step is done): the buffer the step
  // all-reduces in place, in the gradients' layout, or null for a step without an exchange.
  // `gradients` is the trainer's flat gradient buffer. Strategies that do not own the
  // parameters all-reduce the gradients themselves; the trainer then divides each finished
  // layer by B and runs its optimizer on it.
  virtual float* PlanScheduledStep(const StepInfo& step, float* gradients) {
    (void)step;
    return gradients;
  }
  // Scheduler thread, when backward has produced the layer's summed gradients.
  virtual absl::Status PrepareRange(const StepInfo& step, size_t begin, size_t end,
                                    const float* gradients) {
    (void)step;
    (void)begin;
    (void)end;
    (void)gradients;
    return absl::OkStatus();
  }
  // Scheduler thread, strategies that own the parameters: the layer's update, after its
  // exchange (at once in a step without one). `parameters` is the whole flat model.
  virtual absl::Status FinishRange(const StepInfo& step, size_t begin, size_t end,
                                   const float* gradients, absl::Span<float> parameters) {
    (void)step;
    (void)begin;
    (void)end;
    (void)gradients;
    (void)parameters;
    return absl::OkStatus();
  }
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_STRATEGY_H_
