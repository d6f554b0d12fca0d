#include "runtime/train/data/decode_pool.h"

#include <algorithm>
#include <atomic>
#include <utility>

namespace hptrain::train {
namespace {

std::atomic<int> g_default_threads{0};

}  // namespace

int DefaultDecodeThreads() {
  const int set = g_default_threads.load();
  if (set > 0) return set;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::min(4, std::max(1, cores / 2));
}

void SetDefaultDecodeThreads(int n) { g_default_threads.store(std::max(0, n)); }

DecodePool::DecodePool(DecodeFn decode, int64_t sample_floats, int threads, int64_t capacity)
    : decode_(std::move(decode)),
      sample_floats_(sample_floats),
      threads_(threads > 0 ? threads : DefaultDecodeThreads()),
      capacity_(std::max<int64_t>(1, capacity)) {}

DecodePool::~DecodePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void DecodePool::Prefetch(const std::vector<int64_t>& indices) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (workers_.empty()) {
      for (int i = 0; i < threads_; ++i) workers_.emplace_back([this] { Run(); });
    }
    for (int64_t index : indices) {
      if (entries_.count(index) != 0) continue;
      entries_.emplace(index, Entry{});
      queue_.push_back(index);
      order_.push_back(index);
    }
    EvictLocked();
  }
  work_cv_.notify_all();
}

void DecodePool::EvictLocked() {
  // Oldest first; an entry a thread is decoding stays (it is still wanted by someone soon).
  std::deque<int64_t> kept;
  while (static_cast<int64_t>(entries_.size()) > capacity_ && !order_.empty()) {
    const int64_t index = order_.front();
    order_.pop_front();
    auto it = entries_.find(index);
    if (it == entries_.end()) continue;  // already read
    if (it->second.state == State::kRunning) {
      kept.push_back(index);
      continue;
    }
    entries_.erase(it);  // a queued index left in queue_ is skipped by Run
  }
  order_.insert(order_.begin(), kept.begin(), kept.end());
  // Drop keys of entries that are gone so order_ does not grow without bound.
  if (order_.size() > 2 * entries_.size() + 64) {
    std::deque<int64_t> live;
    for (int64_t index : order_) {
      if (entries_.count(index) != 0) live.push_back(index);
    }
    order_.swap(live);
  }
}

void DecodePool::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const int64_t index = queue_.front();
    queue_.pop_front();
    auto it = entries_.find(index);
    if (it == entries_.end() || it->second.state != State::kQueued) continue;
    it->second.state = State::kRunning;
    lock.unlock();
    std::vector<float> pixels(static_cast<size_t>(sample_floats_));
    absl::Status status = decode_(index, pixels.data());
    lock.lock();
    // Running entries are never erased by anyone but Read after kDone, so `it` may have been
    // invalidated by a rehash only; look it up again.
    auto done = entries_.find(index);
    if (done != entries_.end()) {
      done->second.pixels = std::move(pixels);
      done->second.status = std::move(status);
      done->second.state = State::kDone;
    }
    done_cv_.notify_all();
  }
}

absl::Status DecodePool::Read(int64_t index, float* out) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = entries_.find(index);
    if (it != entries_.end() && it->second.state == State::kRunning) {
      done_cv_.wait(lock, [&] {
        auto e = entries_.find(index);
        return e == entries_.end() || e->second.state == State::kDone;
      });
      it = entries_.find(index);
    }
    if (it != entries_.end() && it->second.state == State::kDone) {
      Entry entry = std::move(it->second);
      entries_.erase(it);
      ++hits_;
      lock.unlock();
      if (!entry.status.ok()) return entry.status;
      std::copy(entry.pixels.begin(), entry.pixels.end(), out);
      return absl::OkStatus();
    }
    // Queued but not started: take it over (Run skips an index without an entry).
    if (it != entries_.end()) entries_.erase(it);
    ++misses_;
  }
  return decode_(index, out);
}

int64_t DecodePool::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t DecodePool::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace hptrain::train
