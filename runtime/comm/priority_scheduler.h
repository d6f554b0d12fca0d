// PriorityScheduler: the sub-tensor priority scheduler (ByteScheduler; docs/algorithms.md §3b) that
// orders one step's gradient exchange by layer depth, so that the next forward can start on the
// input-side layers while the output-side layers are still being exchanged.
//
// The model's parameter tensors are grouped into layers in forward order (layer 0 is the input
// side; a layer's tensors are consecutive in the flat buffer). Each layer is split into chunks of
// at most `partition_elements`; a chunk's priority is its index: layer depth first, then position,
// so the smallest index is the most urgent. One step:
//   1. BeginStep(exchange) on the trainer thread, once the previous step is done (WaitIdle):
//      the buffer the step all-reduces in place (the gradients' layout), or null for a step
//      without an exchange (a local step of multistep).
//   2. During backward, MarkReady(tensor) as each gradient lands (any thread). When every tensor
//      of layer l is ready, the scheduler thread runs hooks.prepare(l) (e.g. a strategy adds the
//      gradients to its accumulator) and the layer's chunks become ready.
//   3. Launches (steps with an exchange): the scheduler thread takes the most urgent ready chunks
//      in priority order while their elements stay within `credit_elements`, and all-reduces
//      them as one collective. The communicator runs one collective at a time, so the credit is
//      what one launch may carry: a small partition lets an urgent chunk overtake a large layer,
//      a large credit saves start-ups.
//   4. When every chunk of layer l has been reduced (at once in a step without an exchange), the
//      scheduler thread runs hooks.finish(l) (the layer's update) and layer l's ready event
//      fires: WaitLayer(l), called by the next forward before layer l, returns.
//   5. EndBackward() zero-fills tensors that got no gradient (unused parameters) and marks them
//      ready.
//
// Agreement: every rank must issue the same collectives in the same order, but backward reaches
// each layer at a different time on each rank. So a rank only launches chunks that are ready on
// EVERY rank, and learns which those are from the collectives themselves: each launch carries,
// behind its chunks, a vector with one float per chunk (1 when ready here); after the all-reduce
// a chunk whose entry sums to the world size is ready everywhere. The sums are identical on all
// ranks, so every rank derives the same next launch. When no known-ready chunk is left, the ranks
// run a launch of the readiness vector alone (a negotiation, as Horovod's coordinator does); a
// rank enters it once it has something new to report, or when it has nothing more to wait for.
//
// Bit-identical results: the ring all-reduce (ring_allreduce.cc) sums each of its N segments in a
// different rank order, so which elements share a segment decides the rounding. A launch is
// therefore staged so that piece p of every chunk (chunk split into N pieces by ChunkRange) lands
// in ring segment p, zero-padded to equal segments: an element's summation order then depends on
// its chunk and position only, never on how the chunks were grouped into launches, and a run's
// result does not depend on timing.
//
// Bytes: the chunks' 4 bytes per element as in an unscheduled all-reduce, plus per launch the
// readiness vector (4 bytes per chunk) and at most (N−1)·(chunks in the launch + 1) padding
// elements, each sent 2(N−1)/N times; negotiations carry the readiness vector only.
//
// Errors: a failed collective or hook fails the step; every ready event fires (so no forward
// waits forever) and WaitIdle and the next BeginStep return the error.
//
// Thread-safety: MarkReady from any thread; the rest from the trainer thread.
#ifndef HPTRAIN_RUNTIME_COMM_PRIORITY_SCHEDULER_H_
#define HPTRAIN_RUNTIME_COMM_PRIORITY_SCHEDULER_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "runtime/comm/communicator.h"

namespace hptrain::comm {

class PriorityScheduler {
 public:
  struct Options {
    int64_t partition_elements = int64_t{8} << 20;  // δ
    int64_t credit_elements = int64_t{16} << 20;    // at least partition_elements
    // Testing: seconds added to every launch per chunk it carries (the timeline check).
    double chunk_delay_seconds = 0;
    // Keep a Launch record of every launch (tests).
    bool record = false;
  };

  // Hooks run on the scheduler thread with the layer's element range [begin, end) of the flat
  // buffers. An error fails the step.
  struct Hooks {
    std::function<absl::Status(int layer, size_t begin, size_t end)> prepare;
    std::function<absl::Status(int layer, size_t begin, size_t end)> finish;
  };

  struct Chunk {
    int layer = 0;
    size_t begin = 0;  // element range in the flat buffers
    size_t end = 0;
  };

  // One launch, as recorded with Options::record.
  struct Launch {
    int64_t step = 0;             // 1-based count of BeginStep calls
    std::vector<int> chunks;      // in launch order; empty for a negotiation
    std::vector<int> candidates;  // the chunks known ready everywhere, not yet launched
    int64_t elements = 0;         // elements of the chunks
    double start = 0;             // seconds since construction
    double end = 0;
  };

  // `tensor_ranges`: each parameter tensor's element range in the flat gradient buffer, in
  // registration order; `tensor_layers`: each tensor's layer (non-decreasing, from 0).
  // `gradients`: the flat gradient buffer, for zero-filling unused tensors.
  PriorityScheduler(Communicator* comm, std::vector<std::pair<size_t, size_t>> tensor_ranges,
                    std::vector<int> tensor_layers, float* gradients, Options options,
                    Hooks hooks);
  ~PriorityScheduler();
  PriorityScheduler(const PriorityScheduler&) = delete;
  PriorityScheduler& operator=(const PriorityScheduler&) = delete;

  int num_layers() const { return static_cast<int>(layer_ranges_.size()); }
  const std::vector<Chunk>& chunks() const { return chunks_; }

  // Starts a step; the previous one must be done (WaitIdle). Returns the error of a failed
  // previous step. `exchange`: the buffer to all-reduce, or null.
  absl::Status BeginStep(float* exchange);
  void MarkReady(int tensor);
  void EndBackward();

  // Blocks until layer `layer` of the last step begun has been finished (or the step failed);
  // returns at once before the first step. The time spent waiting counts as exposed.
  void WaitLayer(int layer);
  // Blocks until the last step begun is done; its status. The time spent counts as exposed.
  absl::Status WaitIdle();

  // Seconds inside collectives, and seconds WaitLayer/WaitIdle blocked, since the last call.
  void TakeSeconds(double* comm_seconds, double* exposed_seconds);

  // Options::record: the launches so far.
  std::vector<Launch> launches() const;

 private:
  void Loop();
  // Work of the current step, with mu_ held on entry and exit (released around collectives and
  // hooks). Returns false when there is nothing to do until something changes.
  bool Advance(std::unique_lock<std::mutex>& lock);
  absl::Status RunLaunch(const std::vector<int>& chunks, std::vector<float>* ready_sums);
  void FinishLayer(int layer, std::unique_lock<std::mutex>& lock);
  void Fail(absl::Status status);  // mu_ held
  double Now() const;

  Communicator* comm_;
  float* gradients_;
  Options options_;
  Hooks hooks_;
  std::vector<std::pair<size_t, size_t>> tensor_ranges_;
  std::vector<int> tensor_layers_;
  std::vector<std::pair<size_t, size_t>> layer_ranges_;
  std::vector<int> layer_tensors_;              // tensors per layer
  std::vector<Chunk> chunks_;
  std::vector<int> first_chunk_;                // per layer; first_chunk_[L] = chunks_.size()
  std::chrono::steady_clock::time_point origin_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  bool stop_ = false;

  // The current step (guarded by mu_).
  int64_t step_ = 0;
  bool active_ = false;                 // begun and not yet done
  float* exchange_ = nullptr;
  absl::Status status_;
  std::vector<bool> tensor_ready_;
  std::vector<int> pending_tensors_;    // per layer: tensors not yet ready
  std::vector<bool> layer_prepared_;    // prepare ran: its chunks are ready here
  std::vector<int> pending_chunks_;     // per layer: chunks not yet reduced
  std::vector<int64_t> finished_step_;  // per layer: the last step it was finished in
  int layers_finished_ = 0;
  // Scheduler thread only.
  std::vector<bool> known_ready_;       // ready on every rank
  std::vector<bool> launched_;
  int reported_ready_ = 0;              // chunks ready here when the last vector was sent
  std::vector<float> staging_;

  double comm_seconds_ = 0;
  double exposed_seconds_ = 0;
  std::vector<Launch> launches_;
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_PRIORITY_SCHEDULER_H_
