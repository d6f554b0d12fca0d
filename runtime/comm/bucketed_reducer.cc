#include "runtime/comm/bucketed_reducer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace hptrain::comm {
namespace {
double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

BucketedReducer::BucketedReducer(std::vector<size_t> tensor_sizes, size_t bucket_bytes,
                                 ReduceFn reduce)
    : BucketedReducer(std::move(tensor_sizes), bucket_bytes,
                      AsyncReduceFn([reduce = std::move(reduce)](int k, float* data,
                                                                 size_t count) {
                        return Work::Done(reduce(k, data, count));
                      })) {}

BucketedReducer::BucketedReducer(std::vector<size_t> tensor_sizes, size_t bucket_bytes,
                                 AsyncReduceFn reduce)
    : sizes_(std::move(tensor_sizes)), reduce_(std::move(reduce)) {
  const int n = static_cast<int>(sizes_.size());
  offsets_.resize(n);
  size_t total = 0;
  for (int t = 0; t < n; ++t) {
    offsets_[t] = total;
    total += sizes_[t];
  }
  flat_.assign(total, 0.0f);
  bucket_of_.assign(n, 0);
  ready_.assign(n, false);
  const size_t cap = std::max<size_t>(1, bucket_bytes / sizeof(float));
  const size_t first_cap = std::min(cap, kFirstBucketBytes / sizeof(float));
  int t = n - 1;
  while (t >= 0) {
    Bucket bucket;
    bucket.end = offsets_[t] + sizes_[t];
    const size_t limit = buckets_.empty() ? first_cap : cap;
    size_t elements = 0;
    while (t >= 0 && elements < limit) {
      elements += sizes_[t];
      bucket_of_[t] = static_cast<int>(buckets_.size());
      ++bucket.pending;
      --t;
    }
    bucket.begin = bucket.end - elements;
    buckets_.push_back(bucket);
  }
  works_.resize(buckets_.size());
  thread_ = std::thread([this] { CommLoop(); });
}

BucketedReducer::~BucketedReducer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  // A step left unfinished (its backward failed) may still have collectives in flight on the
  // buffer: they must be done with it before it goes.
  for (const std::shared_ptr<Work>& work : works_) {
    if (work != nullptr && !work->IsCompleted()) work->Wait().IgnoreError();
  }
}

void BucketedReducer::BeginStep() {
  std::lock_guard<std::mutex> lock(mu_);
  std::fill(ready_.begin(), ready_.end(), false);
  for (Bucket& b : buckets_) b.pending = 0;
  for (size_t t = 0; t < sizes_.size(); ++t) ++buckets_[bucket_of_[t]].pending;
  next_bucket_ = 0;
  step_failed_ = false;
  std::fill(works_.begin(), works_.end(), nullptr);
  comm_seconds_acc_ = 0;
  step_active_ = true;
  ++step_;
}

void BucketedReducer::MarkReady(int tensor) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!step_active_ || ready_[tensor]) return;
    ready_[tensor] = true;
    --buckets_[bucket_of_[tensor]].pending;
  }
  cv_.notify_all();
}

void BucketedReducer::CommLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] {
      return stop_ || (step_active_ && next_bucket_ < num_buckets() &&
                       buckets_[next_bucket_].pending == 0);
    });
    if (stop_) return;
    const int k = next_bucket_;
    const Bucket bucket = buckets_[k];
    const bool skip = step_failed_;  // after a failure, let the step drain
    lock.unlock();
    std::shared_ptr<Work> work;
    bool failed = false;
    auto start = std::chrono::steady_clock::now();
    if (!skip) {
      work = reduce_(k, flat_.data() + bucket.begin, bucket.end - bucket.begin);
      // A reduction that has already failed (a blocking one, or one refused at issue) stops the
      // step; one still in flight is waited for in FinishStep.
      failed = work->IsCompleted() && !work->Wait().ok();
    }
    double spent = SecondsSince(start);
    lock.lock();
    comm_seconds_acc_ += spent;
    works_[k] = std::move(work);
    if (failed) step_failed_ = true;
    ++next_bucket_;
    cv_.notify_all();
  }
}

absl::Status BucketedReducer::FinishStep() {
  auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  for (size_t t = 0; t < sizes_.size(); ++t) {
    if (!ready_[t]) {
      std::memset(flat_.data() + offsets_[t], 0, sizes_[t] * sizeof(float));
      ready_[t] = true;
      --buckets_[bucket_of_[t]].pending;
    }
  }
  cv_.notify_all();
  cv_.wait(lock, [&] { return next_bucket_ == num_buckets(); });
  // Every bucket is issued and the communication thread idle until the next BeginStep.
  lock.unlock();
  absl::Status first_error;
  double work_seconds = 0;
  for (int k = 0; k < num_buckets(); ++k) {
    if (works_[k] == nullptr) continue;  // skipped after a failure
    absl::Status status = works_[k]->Wait();
    work_seconds += works_[k]->seconds();
    if (!status.ok() && first_error.ok()) {
      first_error = absl::Status(status.code(), absl::StrCat("gradient bucket ", k, " of ",
                                                             num_buckets(), ": ",
                                                             status.message()));
    }
  }
  lock.lock();
  step_active_ = false;
  last_comm_seconds_ = comm_seconds_acc_ + work_seconds;
  last_exposed_seconds_ = SecondsSince(start);
  return first_error;
}

}  // namespace hptrain::comm
