// DecodePool: decodes a source's next samples ahead of their use, in a few threads, while the
// training step runs.
//
// The decoded sources (imagefolder, filelist, webdataset) own one each. SampleSource::Prefetch
// hands it the indices of the worker's next slice; the pool decodes them into a cache keyed by
// sample index. ReadPixels then takes a sample from the cache (waiting for it if a pool thread
// is decoding it right now) or, when it was never prefetched or has been evicted, decodes it
// inline. A sample's pixels depend only on its index, so whether the pool or the caller decoded
// it never changes what training sees.
//
// The cache holds at most `capacity` samples; prefetching beyond it evicts the oldest entries
// that are not being decoded (a later Read decodes them again). A sample is removed from the
// cache when it is read; reading it twice decodes it twice.
//
// Threads start on the first Prefetch, so a source that is only opened (or read without hints)
// costs none. Thread-safety: every method may be called from several threads at once.
#ifndef HPTRAIN_RUNTIME_TRAIN_DATA_DECODE_POOL_H_
#define HPTRAIN_RUNTIME_TRAIN_DATA_DECODE_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"

namespace hptrain::train {

// The pool size a source uses: SetDefaultDecodeThreads' value if it was called, else
// min(4, max(1, cores / 2)).
int DefaultDecodeThreads();
// Sets the pool size of sources opened from now on (n >= 1; n <= 0 restores the default). The
// trainer may call it with its per-worker thread budget.
void SetDefaultDecodeThreads(int n);

class DecodePool {
 public:
  // Decodes sample `index` into out[0 .. sample_floats); called from the pool's threads and from
  // Read's caller, possibly at once for different indices.
  using DecodeFn = std::function<absl::Status(int64_t index, float* out)>;

  // threads: 0 = DefaultDecodeThreads(); capacity: samples kept decoded (>= 1).
  DecodePool(DecodeFn decode, int64_t sample_floats, int threads, int64_t capacity);
  // Stops the threads after the sample each is decoding; blocks until they have exited.
  ~DecodePool();
  DecodePool(const DecodePool&) = delete;
  DecodePool& operator=(const DecodePool&) = delete;

  // Queues the indices not already cached or queued, in order. Does not block on decoding.
  void Prefetch(const std::vector<int64_t>& indices);

  // Writes sample `index` to out[0 .. sample_floats): the cached result (a decode error included)
  // or an inline decode. Blocks while a pool thread finishes that sample.
  absl::Status Read(int64_t index, float* out);

  int threads() const { return threads_; }
  // Samples Read took from the cache, and decoded inline, since construction.
  int64_t hits() const;
  int64_t misses() const;

 private:
  enum class State { kQueued, kRunning, kDone };
  struct Entry {
    State state = State::kQueued;
    std::vector<float> pixels;
    absl::Status status;
  };

  void Run();
  void EvictLocked();

  const DecodeFn decode_;
  const int64_t sample_floats_;
  const int threads_;
  const int64_t capacity_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // queue_ gained an index, or stop_
  std::condition_variable done_cv_;  // an entry reached kDone
  std::unordered_map<int64_t, Entry> entries_;
  std::deque<int64_t> queue_;  // indices to decode, in Prefetch order
  std::deque<int64_t> order_;  // entries_ keys, oldest first (may hold stale keys)
  std::vector<std::thread> workers_;
  bool stop_ = false;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_DATA_DECODE_POOL_H_
