// CompressionGate: decides, from the times measured during the first steps, whether a compressing
// strategy compresses at all, so that on a fast link it runs as ssgd (exactly its fp32
// all-reduce) and on a slow one as the compressor (docs/algorithms.md §8a).
//
//   1. Probe. For `probe_steps` steps from the run's (or resumed run's) first step the strategy
//      exchanges in fp32, as ssgd does, and the client hands each step's times to Record
//      (Strategy::OnStepTiming): compute, communication, and the communication that computation
//      did not hide (exposed). The window's first step is left out (its one-time costs).
//   2. Agree. At the first bucket of step start + probe_steps, on the exchange's thread, Decide
//      gathers every rank's per-step times with one small all-reduce (3 floats per rank and
//      measured step, each rank filling its own slots), so that every rank takes the same
//      decision from the same figures.
//   3. Decide. A synchronous exchange ends on every rank at about the same time, so a rank that
//      finished its backward early waits for the last one as well as for the wire: its exposed
//      time is partly load imbalance, which compression does not remove. The rank that waited
//      least in a step waited for the wire alone, so the step's cost of communication is the
//      least exposed time over the ranks. Compress when the sum of those over the window exceeds
//      `compress_above` times the window's compute (the mean over ranks); otherwise stay fp32.
//      The figures stay in describe() for the run summary and the log.
//
// A run with fewer steps than the window stays fp32. The decision is kept in checkpoints
// (SaveState / Restore), so that a resumed run does not probe again.
//
// Thread safety: Record is called on the client's thread, Decide and the readers on the exchange's
// thread (or the client's between steps); the state is guarded by a mutex.
#ifndef HPTRAIN_RUNTIME_SYNC_COMPRESSION_GATE_H_
#define HPTRAIN_RUNTIME_SYNC_COMPRESSION_GATE_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/sync/step_info.h"

namespace hptrain::sync {

// Times the ranks agree on (step 3 below): per measured step, the mean compute and communication
// over the ranks and the least exposed communication over the ranks, averaged over the steps.
struct AgreedTimes {
  double compute = 0, comm = 0, exposed = 0;
};

// Every rank's `own` times (one entry per measured step, the same count on every rank) gathered
// with one all-reduce, and agreed as AgreedTimes; every rank gets the same figures.
absl::StatusOr<AgreedTimes> AgreeTimes(comm::Communicator* comm,
                                       const std::vector<StepTiming>& own);

// The gate's parameters (strategy options probeSteps and compressAbove).
struct GateOptions {
  int64_t probe_steps = 20;     // steps measured in fp32 before deciding (at least 2)
  double compress_above = 0.5;  // compress when exposed communication > this × compute
};

class CompressionGate {
 public:
  enum class Choice { kProbing, kDense, kCompressed };

  // `comm` (not owned, outlives the gate) is the host communicator Decide agrees over.
  CompressionGate(const GateOptions& options, comm::Communicator* comm)
      : options_(options), comm_(comm) {}

  // The probe window starts at global step `step` (the run's first step, or the resumed one).
  void Start(int64_t step);

  // Adds one step's times; steps outside the window are ignored.
  void Record(const StepTiming& timing);

  // Called by the strategy at the first bucket of every step, on the exchange's thread, on every
  // rank. At step start + probe_steps it all-reduces the sums and decides (errors: the
  // all-reduce's). Returns the choice for `step`.
  absl::StatusOr<Choice> Decide(int64_t step);

  Choice choice() const;
  bool compressing() const { return choice() == Choice::kCompressed; }

  // The figures the decision was taken from, e.g. "exposed communication 41 % of compute (6.20 of
  // 15.10 ms per step, the least over 2 ranks in each step; communication 7.00 ms; steps 1-19)
  // <= 50 %"; while probing, "probing in fp32 until step 20".
  std::string describe() const;

  // What was picked and why, for the run summary and the log: "picked <compressed><note>: " or
  // "picked fp32 (ssgd's all-reduce)<note>: " before describe(); describe() alone while probing.
  std::string Decision(const std::string& compressed, const std::string& note = "") const;

  // The decision as a checkpoint section's values ({} while probing), and back. Restore with an
  // empty or unknown section leaves the gate probing.
  std::vector<float> Save() const;
  void Restore(const std::vector<float>& saved);

  // The strategy's lifecycle: Start at `step` with the decision of `restored`'s `section` (when
  // the checkpoint has one), and the decision into `section` of a checkpoint (none while probing).
  void Resume(int64_t step, const std::map<std::string, std::vector<float>>& restored,
              const std::string& section);
  void SaveInto(const std::string& section,
                std::map<std::string, std::vector<float>>* sections) const;

 private:
  const GateOptions options_;
  comm::Communicator* comm_;
  mutable std::mutex mu_;
  int64_t start_ = 0;
  Choice choice_ = Choice::kProbing;
  // This rank's times of the window's measured steps (step start + 1 + i at i), {compute,
  // communication, exposed}.
  std::vector<StepTiming> measured_;
  // Once decided: per step, the mean compute and communication over ranks and the least exposed
  // communication over ranks, averaged over the window's steps.
  double compute_ = 0, comm_seconds_ = 0, exposed_ = 0;
  bool restored_ = false;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_COMPRESSION_GATE_H_
