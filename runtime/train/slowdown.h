// Emulated heterogeneity, for tests and benchmarks only: a worker with slowdown factor f sleeps
// (f - 1) x its measured compute time after each step, so it behaves like a device f times
// slower. The factors come from the job (spec.testing.slowdown, one per rank) and may be changed
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
