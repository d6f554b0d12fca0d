// StepInfo: what every strategy component is told about the step it works on; StepTiming: the
// times the client measured for a step; GradientLayout:
// where each parameter's gradient sits in the flat gradient buffer, and the reducer's buckets.
#ifndef HPTRAIN_RUNTIME_SYNC_STEP_INFO_H_
#define HPTRAIN_RUNTIME_SYNC_STEP_INFO_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hptrain::sync {

struct StepInfo {
  int64_t step = 0;  // global step, 0-based
  int epoch = 0;
  double epoch_clock = 0;  // epoch + fraction of it done before this step (for schedules)
  int local_batch = 0;     // b_i of this worker in this step
  int global_batch = 0;    // B
  double lr = 0;           // the learning rate of this step (the same on every worker)
};

// Times of one step as the client measured them, handed to Strategy::OnStepTiming.
struct StepTiming {
  int64_t step = 0;                 // the global step, 0-based
  double compute_seconds = 0;       // data + forward + backward (emulated slowdown included)
  double comm_seconds = 0;          // time in the gradient exchange, overlapped or not
  double exposed_comm_seconds = 0;  // time the step waited for the exchange after backward
};

struct GradientLayout {
  struct Range {
    size_t begin = 0;  // element offset in the flat buffer
    size_t end = 0;
  };
  std::vector<Range> tensors;  // in registration order
  std::vector<Range> buckets;  // bucket k covers tensors entirely
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_STEP_INFO_H_
