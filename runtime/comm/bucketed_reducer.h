// BucketedReducer: overlaps gradient communication with backward (DDP's reducer, on flat buffers).
//
// The gradients of all parameters live in one flat float buffer, tensor t at offset(t), in
// registration (forward) order. Buckets are runs of consecutive tensors formed from the LAST
// tensor backwards, because backward produces the last layer's gradients first: bucket 0 holds the
// output layer. As in DDP, a bucket takes tensors until it holds at least its cap (so the tensor
// that crosses the cap is in it), and bucket 0's cap is only kFirstBucketBytes: the first
// reduction starts early and runs while backward computes the layers below. (With "at most the
// cap" instead, an MLP's small output layer would wait in one bucket with the big layer before it
// and nothing would overlap.)
//
// One step:
//   1. BeginStep() clears the ready marks.
//   2. During backward, autograd hooks copy each gradient into data_for(t) and call MarkReady(t).
//   3. When every tensor of bucket k is ready and buckets 0..k-1 have been handed off, the
//      communication thread calls reduce(k, bucket data, count): buckets are issued strictly in
//      index order, so every rank issues the same collectives in the same order. An
//      asynchronous reduce returns the bucket's Work (work.h) as soon as its collective is
//      issued, and the thread goes on to bucket k+1 while bucket k's collective is in flight;
//      a blocking reduce returns a Status when done (it is treated as a completed Work).
//   4. FinishStep() zero-fills tensors that got no gradient (unused parameters), lets their
//      buckets go, waits for every bucket's Work in index order (Work::Wait: on the device route
//      that orders the consumer's stream, the host does not wait) and returns the first error,
//      by bucket index. A bucket whose Work had already failed when the next was due stops the
//      step: later buckets are not issued.
//
// Thread-safety: MarkReady may be called from any thread; the other methods from one thread.
#ifndef HPTRAIN_RUNTIME_COMM_BUCKETED_REDUCER_H_
#define HPTRAIN_RUNTIME_COMM_BUCKETED_REDUCER_H_

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "runtime/comm/work.h"

namespace hptrain::comm {

class BucketedReducer {
 public:
  // A blocking reduction of one bucket, in place.
  using ReduceFn = std::function<absl::Status(int bucket, float* data, size_t count)>;
  // An asynchronous one: issues the bucket's reduction and returns its Work (never null).
  using AsyncReduceFn =
      std::function<std::shared_ptr<Work>(int bucket, float* data, size_t count)>;

  // Bucket 0's cap, unless bucket_bytes is smaller (DDP's _DEFAULT_FIRST_BUCKET_BYTES).
  static constexpr size_t kFirstBucketBytes = size_t{1} << 20;

  BucketedReducer(std::vector<size_t> tensor_sizes, size_t bucket_bytes, ReduceFn reduce);
  BucketedReducer(std::vector<size_t> tensor_sizes, size_t bucket_bytes, AsyncReduceFn reduce);
  // Joins the communication thread and waits for the Works of a step left unfinished.
  ~BucketedReducer();
  BucketedReducer(const BucketedReducer&) = delete;
  BucketedReducer& operator=(const BucketedReducer&) = delete;

  float* data() { return flat_.data(); }
  size_t size() const { return flat_.size(); }
  float* data_for(int tensor) { return flat_.data() + offsets_[tensor]; }
  size_t offset(int tensor) const { return offsets_[tensor]; }
  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // Element range [begin, end) of bucket k in the flat buffer.
  std::pair<size_t, size_t> bucket_range(int k) const {
    return {buckets_[k].begin, buckets_[k].end};
  }
  size_t tensor_size(int tensor) const { return sizes_[tensor]; }
  int num_tensors() const { return static_cast<int>(sizes_.size()); }

  void BeginStep();
  void MarkReady(int tensor);
  absl::Status FinishStep();

  // Seconds the communication thread spent inside reduce() during the last step plus the
  // seconds its Works report having run (Work::seconds: the host communicator's thread), and
  // seconds FinishStep() waited for them (the communication backward did not hide). A
  // collective on a GPU stream reports no seconds: only the host's time issuing it counts.
  double last_comm_seconds() const { return last_comm_seconds_; }
  double last_exposed_seconds() const { return last_exposed_seconds_; }

 private:
  struct Bucket {
    size_t begin = 0;  // element range in flat_
    size_t end = 0;
    int pending = 0;   // tensors not yet ready this step
  };

  void CommLoop();

  std::vector<float> flat_;
  std::vector<size_t> offsets_;
  std::vector<size_t> sizes_;
  std::vector<int> bucket_of_;
  std::vector<Bucket> buckets_;
  AsyncReduceFn reduce_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> ready_;
  int next_bucket_ = 0;      // next bucket the comm thread reduces
  int step_ = 0;             // incremented by BeginStep; the comm thread works on this step
  bool step_active_ = false;
  bool stop_ = false;
  bool step_failed_ = false;  // a bucket's Work had failed when the next was due: skip the rest
  std::vector<std::shared_ptr<Work>> works_;  // this step's, per bucket (null: not issued)
  double comm_seconds_acc_ = 0;
  double last_comm_seconds_ = 0;
  double last_exposed_seconds_ = 0;
  std::thread thread_;
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_BUCKETED_REDUCER_H_
