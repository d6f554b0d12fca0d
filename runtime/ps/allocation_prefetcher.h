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
#include <vector>

#include "absl/status/statusor.h"

namespace hptrain::ps {

class AllocationPrefetcher {
 public:
  // `fetch(step)`: the allocation in force at `step` (a coordinator round trip).
  using Fetch = std::function<absl::StatusOr<std::vector<int>>(int64_t step)>;

  explicit AllocationPrefetcher(Fetch fetch);
  ~AllocationPrefetcher();  // waits for a request still in flight
  AllocationPrefetcher(const AllocationPrefetcher&) = delete;
  AllocationPrefetcher& operator=(const AllocationPrefetcher&) = delete;

  // The allocation in force at `step`; then starts asking for step + 1.
  absl::StatusOr<std::vector<int>> For(int64_t step);

  // How many For() calls were answered by a prefetch (for tests and diagnostics).
  int64_t prefetch_hits() const { return hits_; }

 private:
  Fetch fetch_;
  std::future<absl::StatusOr<std::vector<int>>> pending_;
  int64_t pending_step_ = -1;
  int64_t hits_ = 0;
};

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_ALLOCATION_PREFETCHER_H_
