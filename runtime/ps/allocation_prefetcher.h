// AllocationPrefetcher: a worker's per-step allocation, asked for one step ahead.
//
// With rebalancing on, a worker needs the allocation in force at every step before it starts the
// step (GetAllocation with at_step). Asking synchronously puts a coordinator round trip on every
// step's critical path. The prefetcher answers For(s) from a request for s started in the
// background when For(s - 1) returned, so the round trip overlaps step s - 1's compute and
// exchange. That is as safe as asking late: the coordinator never changes the allocation of a step
// somebody has asked for, so asking early only moves the next change one step later. A failed or
// missing prefetch is asked again synchronously, so a transient error costs what it did before.
//
// Thread-safety: For() from one thread.
#ifndef HPTRAIN_RUNTIME_PS_ALLOCATION_PREFETCHER_H_
#define HPTRAIN_RUNTIME_PS_ALLOCATION_PREFETCHER_H_

#include <cstdint>
#include <functional>
#include <future>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace hptrain::ps {

// T: what the coordinator answers for a step: the batch sizes (AllocationPrefetcher), or the
// whole allocation with its membership epoch (elastic jobs).
template <typename T>
class StepPrefetcher {
 public:
  // `fetch(step)`: the allocation in force at `step` (a coordinator round trip).
  using Fetch = std::function<absl::StatusOr<T>(int64_t step)>;

  explicit StepPrefetcher(Fetch fetch) : fetch_(std::move(fetch)) {}
  ~StepPrefetcher() {  // waits for a request still in flight
    if (pending_.valid()) pending_.wait();
  }
  StepPrefetcher(const StepPrefetcher&) = delete;
  StepPrefetcher& operator=(const StepPrefetcher&) = delete;

  // The allocation in force at `step`; then starts asking for step + 1.
  absl::StatusOr<T> For(int64_t step) {
    absl::StatusOr<T> result = absl::UnknownError("not asked");
    bool answered = false;
    if (pending_.valid()) {
      absl::StatusOr<T> prefetched = pending_.get();
      if (pending_step_ == step && prefetched.ok()) {
        result = std::move(prefetched);
        answered = true;
        ++hits_;
      }
    }
    if (!answered) result = fetch_(step);
    if (result.ok()) {
      pending_step_ = step + 1;
      pending_ = std::async(std::launch::async, fetch_, step + 1);
    }
    return result;
  }

  // How many For() calls were answered by a prefetch (for tests and diagnostics).
  int64_t prefetch_hits() const { return hits_; }

 private:
  Fetch fetch_;
  std::future<absl::StatusOr<T>> pending_;
  int64_t pending_step_ = -1;
  int64_t hits_ = 0;
};

using AllocationPrefetcher = StepPrefetcher<std::vector<int>>;

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_ALLOCATION_PREFETCHER_H_
