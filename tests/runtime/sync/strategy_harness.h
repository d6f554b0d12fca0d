// A libtorch-free training simulation for strategy tests: N ranks as threads over the loopback
// transport, each with a flat parameter vector, synthetic per-rank gradients and the real
// BucketedReducer + Strategy + Optimizer path of the trainer (summed gradients into the reducer or
// the updater; the optimizer on the reduced mean, then the averager; or the updater), including
// the lifecycle hooks (Start, Synchronize after the last step).
#ifndef HPTRAIN_TESTS_RUNTIME_SYNC_STRATEGY_HARNESS_H_
#define HPTRAIN_TESTS_RUNTIME_SYNC_STRATEGY_HARNESS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/job/job_spec.h"
#include "runtime/ps/mp2/predictor.h"
#include "runtime/ps/param_store.h"
#include "runtime/ps/ps_connection.h"
#include "runtime/sync/strategy.h"

namespace hptrain::sync::testing {

struct SimOptions {
  int world = 4;
  int steps = 20;
  std::vector<size_t> tensor_sizes = {150, 6, 2400, 16, 48000, 120, 10080, 84, 840, 10};
  size_t bucket_bytes = 25u << 20;
  int global_batch = 64;
  // Summed gradient of `rank` at `step` for element i (before the strategy); default: a smooth
  // deterministic function of (rank, step, i).
  std::function<float(int rank, int step, size_t i)> gradient;
  int steps_per_epoch = 0;  // > 0: call OnEpochEnd every this many steps
  // When set, each rank hands these times to OnStepTiming after every step (as the trainer does
  // with the measured ones); `step` in the result is overwritten with the global step.
  std::function<StepTiming(int rank, int step)> step_timing;
  // Times handed to OnEpochEnd (default: compute 1 s, the reducer's measured communication).
  std::function<EpochTiming(int epoch)> epoch_timing;
  // Parameter-server strategies: each rank's connection to the shards (index = rank).
  std::vector<ps::PsConnection*> ps;
  // Per-rank batch sizes b_i (default B / world each); they must add up to global_batch.
  std::vector<int> local_batches;
  // Called on each rank after every step's update (and averaging) with that rank's parameters.
  std::function<void(int rank, int step, const std::vector<float>& params)> after_step;
  // Collect every rank's SaveState sections after the final Synchronize (SimResult::sections).
  bool save_state = false;
  // Call Synchronize at every epoch end (before OnEpochEnd), as the trainer's end-of-epoch
  // evaluation does, then after_synchronize with the rank's parameters.
  bool synchronize_at_epoch_end = false;
  std::function<void(int rank, int step, const std::vector<float>& params)> after_synchronize;
  // Call Synchronize after the last step (as the trainer does before its final evaluation);
  // false keeps every rank's own model and bytes of the steps alone.
  bool synchronize_at_end = true;
};

struct SimResult {
  std::vector<std::vector<float>> params;  // per rank, after the last step
  std::vector<int64_t> bytes_sent;         // per rank
  std::vector<int64_t> inter_node_bytes_sent;  // per rank, to ranks on other nodes (spec.topology)
  std::vector<int> bits;                   // rank 0's StrategyStats::bits after each epoch
  std::vector<int64_t> max_staleness;      // per rank, StrategyStats::max_staleness at the end
  std::vector<int> intervals;              // rank 0's StrategyStats::interval after each epoch
  std::vector<int> synchronized_steps;     // rank 0's steps that synchronized the models
  std::vector<CheckpointSections> sections;  // per rank, with SimOptions::save_state
  std::vector<std::string> decisions;        // per rank, StrategyStats::decision at the end
  std::vector<int> final_bits;               // per rank, StrategyStats::bits at the end
  bool ok = true;
  std::string error;
};

SimResult Simulate(const job::JobSpec& spec, const SimOptions& options);

// P: the parameters of the simulated model (the sum of options.tensor_sizes).
inline size_t Parameters(const SimOptions& options) {
  size_t p = 0;
  for (size_t s : options.tensor_sizes) p += s;
  return p;
}

// The job's parameter-server shards in this process (configured as `hptrain ps` configures them
// for the job's strategy: hps's staleness bound, mp2's prediction and predictor) and one
// connection per rank.
struct LocalPs {
  LocalPs(const job::JobSpec& spec, int world, int shards);
  std::vector<ps::PsConnection*> for_ranks();

  std::shared_ptr<const ps::mp2::PredictorRunner> predictor;  // mp2; null: the zero change
  std::vector<std::unique_ptr<ps::ParamStore>> stores;
  std::vector<std::unique_ptr<ps::LocalPsConnection>> connections;
};

// Simulate with `shards` LocalPs shards for the job (kept in *keep when given, for its counters
// and stores).
SimResult RunPs(const job::JobSpec& spec, SimOptions options, int shards,
                std::unique_ptr<LocalPs>* keep = nullptr);

// A job spec with the given strategy block for the harness (SGD lr 0.1, momentum 0.9, wd 1e-4).
job::JobSpec HarnessJob(const std::string& strategy);

}  // namespace hptrain::sync::testing

#endif  // HPTRAIN_TESTS_RUNTIME_SYNC_STRATEGY_HARNESS_H_
