// Emulated heterogeneity, for tests and benchmarks only: a worker with slowdown factor f behaves
// like a device f times slower than its own cores. Its step's compute is stretched to f x the CPU
// time the training thread spent on it (the thread's CPU clock, which does not advance while other
// processes hold the cores), by sleeping after the step for whatever of that the wall clock has not
// already covered. So the emulated speeds stay those the factors say even when the workers of a
// local run share fewer cores than they are: CPU contention only delays a worker by more than its
// factor once it exceeds (f - 1) x its compute. A factor of 1 leaves the worker as it is. The
// factors come from the job (spec.testing.slowdown, one per rank) and may be changed
// while the job runs through a control file (spec.testing.slowdownFile): whitespace-separated
// factors, one per rank, e.g. "1 1 2 4". The file is re-read whenever its modification time or
// size changes; until it exists, or while its content is invalid (a warning is printed once per
// bad content), the previous factors stay in force. Writers should replace the file atomically
// (write a temporary file, then rename).
//
// The factor also multiplies the host's step-to-step noise: with four workers on two cores a
// step's CPU time ranged over -30 % to +10 % of its median (10th to 90th percentile), as the
// workers share caches, which a GPU's step time does not. With a window of n steps
// (spec.testing.slowdownWindow) a step is charged the median CPU time of the last n steps run at
// the same batch size, this one included, so the emulated device is steady while drifts of the
// host's speed still reach it within n/2 steps. A window of 1 charges each step its own CPU time.
#ifndef HPTRAIN_RUNTIME_TRAIN_SLOWDOWN_H_
#define HPTRAIN_RUNTIME_TRAIN_SLOWDOWN_H_

#include <ctime>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace hptrain::train {

class Slowdown {
 public:
  // `factors` may be empty (all 1); `control_file` may be empty (fixed factors); `window` >= 1.
  Slowdown(std::vector<double> factors, std::string control_file, int rank, int window = 1);

  // This rank's current factor (>= 1). Costs one stat() when a control file is configured.
  // Not thread-safe: call from the training thread.
  double Factor();

  // The emulated duration of a compute phase that took `wall_seconds` on the wall clock and
  // `cpu_seconds` of the training thread's CPU time, at factor `factor`: the longer of the wall
  // time and factor x the CPU time. The caller sleeps the difference to the wall time.
  static double EmulatedSeconds(double factor, double wall_seconds, double cpu_seconds);

  // The CPU time the emulated device is charged for a step of `batch` samples that used
  // `cpu_seconds`: the median over the window (see above). Records the step.
  double ChargedCpuSeconds(int batch, double cpu_seconds);

  // A step's compute phase stretched to this rank's factor: charges `cpu_seconds` for a step of
  // `batch` samples, sleeps until the emulated duration, and returns the compute time as slept
  // (a sleep may end late on a busy machine). `wall_seconds` when nothing is emulated.
  double Stretch(int batch, double wall_seconds, double cpu_seconds);

  // The calling thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID).
  static double ThreadCpuSeconds();

 private:
  void Reload();

  std::vector<double> factors_;
  std::string control_file_;
  int rank_;
  struct timespec mtime_ = {0, 0};
  long long size_ = -1;
  std::string last_warning_;
  size_t window_;
  std::map<int, std::deque<double>> recent_;  // batch size -> CPU times of its last steps
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_SLOWDOWN_H_
