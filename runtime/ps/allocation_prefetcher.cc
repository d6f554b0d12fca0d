#include "runtime/ps/allocation_prefetcher.h"

#include <utility>

namespace hptrain::ps {

AllocationPrefetcher::AllocationPrefetcher(Fetch fetch) : fetch_(std::move(fetch)) {}

AllocationPrefetcher::~AllocationPrefetcher() {
  if (pending_.valid()) pending_.wait();
}

absl::StatusOr<std::vector<int>> AllocationPrefetcher::For(int64_t step) {
  absl::StatusOr<std::vector<int>> result = absl::UnknownError("not asked");
  bool answered = false;
  if (pending_.valid()) {
    absl::StatusOr<std::vector<int>> prefetched = pending_.get();
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

}  // namespace hptrain::ps
