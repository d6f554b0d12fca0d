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
#ifndef HPTRAIN_RUNTIME_TRAIN_SLOWDOWN_H_
#define HPTRAIN_RUNTIME_TRAIN_SLOWDOWN_H_

#include <ctime>
#include <string>
#include <vector>

namespace hptrain::train {

class Slowdown {
 public:
  // `factors` may be empty (all 1); `control_file` may be empty (fixed factors).
  Slowdown(std::vector<double> factors, std::string control_file, int rank);

  // This rank's current factor (>= 1). Costs one stat() when a control file is configured.
  // Not thread-safe: call from the training thread.
  double Factor();

  // The emulated duration of a compute phase that took `wall_seconds` on the wall clock and
  // `cpu_seconds` of the training thread's CPU time, at factor `factor`: the longer of the wall
  // time and factor x the CPU time. The caller sleeps the difference to the wall time.
  static double EmulatedSeconds(double factor, double wall_seconds, double cpu_seconds);

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
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_SLOWDOWN_H_
