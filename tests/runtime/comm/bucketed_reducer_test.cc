#include "runtime/comm/bucketed_reducer.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/collectives.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/loopback_transport.h"
#include "tests/runtime/comm/spawn.h"

namespace hptrain::comm {
namespace {

struct Call {
  int bucket;
  size_t offset;
  size_t count;
};

TEST(BucketedReducer, BucketsFormFromTheLastTensorAndReduceInIndexOrder) {
  std::vector<Call> calls;
  float* base = nullptr;
  // Cap 3 floats: tensors of 3, 3, 2, 1 elements give buckets {t3, t2} (3 floats reach the cap),
  // {t1}, {t0}.
  BucketedReducer reducer({3, 3, 2, 1}, 3 * sizeof(float), [&](int b, float* data, size_t n) {
    calls.push_back({b, static_cast<size_t>(data - base), n});
    for (size_t i = 0; i < n; ++i) data[i] *= 2;
    return absl::OkStatus();
  });
  base = reducer.data();
  ASSERT_EQ(reducer.num_buckets(), 3);
  for (int step = 0; step < 2; ++step) {
    calls.clear();
    reducer.BeginStep();
    for (int t = 0; t < 4; ++t) {
      for (size_t i = 0; i < (t < 2 ? 3u : t == 2 ? 2u : 1u); ++i) reducer.data_for(t)[i] = 1;
    }
    // Mark out of order: bucket 1 (t1) becomes complete before bucket 0 (t2, t3).
    reducer.MarkReady(1);
    reducer.MarkReady(3);
    reducer.MarkReady(0);
    reducer.MarkReady(2);
    ASSERT_TRUE(reducer.FinishStep().ok());
    ASSERT_EQ(calls.size(), 3u);
    EXPECT_EQ(calls[0].bucket, 0);
    EXPECT_EQ(calls[0].offset, 6u);
    EXPECT_EQ(calls[0].count, 3u);
    EXPECT_EQ(calls[1].bucket, 1);
    EXPECT_EQ(calls[1].offset, 3u);
    EXPECT_EQ(calls[2].bucket, 2);
    EXPECT_EQ(calls[2].offset, 0u);
    for (size_t i = 0; i < reducer.size(); ++i) EXPECT_EQ(reducer.data()[i], 2.0f);
  }
}

TEST(BucketedReducer, ABucketTakesTheTensorThatCrossesItsCap) {
  // Cap 4 floats: t3 + t2 = 3 floats, below the cap, so t1 joins them: {t3, t2, t1}, {t0}.
  BucketedReducer reducer({3, 3, 2, 1}, 4 * sizeof(float),
                          [](int, float*, size_t) { return absl::OkStatus(); });
  ASSERT_EQ(reducer.num_buckets(), 2);
  EXPECT_EQ(reducer.bucket_range(0), (std::pair<size_t, size_t>{3, 9}));
  EXPECT_EQ(reducer.bucket_range(1), (std::pair<size_t, size_t>{0, 3}));
}

TEST(BucketedReducer, TheFirstBucketIsSmallSoItsReductionOverlapsTheLayersBelow) {
  // An MLP's shape: a big input layer, a big hidden layer, a small output layer. With a 25 MiB
  // cap everything would fit one bucket, reduced only after the whole backward; bucket 0 closes
  // at kFirstBucketBytes instead, with the output layer and the hidden layer's weights.
  const size_t first = BucketedReducer::kFirstBucketBytes / sizeof(float);
  BucketedReducer reducer({2 * first, 64, first + 1, 32, 320, 10}, size_t{25} << 20,
                          [](int, float*, size_t) { return absl::OkStatus(); });
  ASSERT_EQ(reducer.num_buckets(), 2);
  EXPECT_EQ(reducer.bucket_range(0).first, 2 * first + 64);  // from the hidden weights on
  EXPECT_EQ(reducer.bucket_range(1), (std::pair<size_t, size_t>{0, 2 * first + 64}));
}

TEST(BucketedReducer, UnusedTensorsAreZeroFilledAtFinish) {
  BucketedReducer reducer({2, 2}, 1024, [](int, float*, size_t) { return absl::OkStatus(); });
  reducer.BeginStep();
  reducer.data_for(0)[0] = 5;
  reducer.data_for(1)[0] = 7;  // stale value: tensor 1 never gets marked ready
  reducer.MarkReady(0);
  ASSERT_TRUE(reducer.FinishStep().ok());
  EXPECT_EQ(reducer.data_for(0)[0], 5);
  EXPECT_EQ(reducer.data_for(1)[0], 0);
}

TEST(BucketedReducer, ReductionOverlapsWithLaterGradients) {
  // The first bucket is reduced while the test thread still "computes" the second one.
  std::atomic<bool> first_done{false};
  BucketedReducer reducer({1, 1}, sizeof(float), [&](int b, float*, size_t) {
    if (b == 0) first_done = true;
    return absl::OkStatus();
  });
  reducer.BeginStep();
  reducer.MarkReady(1);  // bucket 0 = the last tensor
  for (int i = 0; i < 200 && !first_done; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(first_done.load());
  reducer.MarkReady(0);
  ASSERT_TRUE(reducer.FinishStep().ok());
}

TEST(BucketedReducer, FirstErrorIsReportedWithBucketIndex) {
  BucketedReducer reducer({1, 1, 1}, sizeof(float), [](int b, float*, size_t) {
    return b == 1 ? absl::UnavailableError("peer gone") : absl::OkStatus();
  });
  reducer.BeginStep();
  for (int t = 0; t < 3; ++t) reducer.MarkReady(t);
  absl::Status status = reducer.FinishStep();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("gradient bucket 1 of 3: peer gone"), std::string::npos)
      << status;
}

// A slow network: every transfer waits until the gate opens (or, as a fallback that keeps a
// broken reducer from hanging the test, until 10 s have passed).
class Gate {
 public:
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

class SlowTransport : public LoopbackTransport {
 public:
  SlowTransport(std::shared_ptr<LoopbackHub> hub, int rank, Gate* gate)
      : LoopbackTransport(std::move(hub), rank), gate_(gate) {}

 protected:
  absl::Status DoSendRecv(int to, const void* send, size_t send_bytes, int from, void* recv,
                          size_t recv_bytes, uint64_t tag) override {
    gate_->Pass();
    return LoopbackTransport::DoSendRecv(to, send, send_bytes, from, recv, recv_bytes, tag);
  }

 private:
  Gate* gate_;
};

TEST(BucketedReducer, IssuesTheNextBucketWhileTheLastIsInFlight) {
  // Two ranks, three one-tensor buckets, all-reduced asynchronously over a network that moves
  // nothing until every rank has issued two buckets. A reducer that waited for bucket k before
  // issuing bucket k+1 would never get there (and see one collective in flight at most).
  constexpr int kRanks = 2;
  constexpr int kBuckets = 3;
  auto hub = std::make_shared<LoopbackHub>(kRanks);
  Gate gate;
  std::mutex mu;
  int issued_second = 0;  // ranks that have issued their second bucket
  std::vector<int> most_in_flight(kRanks, 0);
  std::vector<std::vector<float>> results(kRanks);
  std::vector<int64_t> work_bytes(kRanks, 0), counted_bytes(kRanks, 0);
  testing::Spawn(kRanks, [&](int r) {
    TransportCommunicator comm(std::make_unique<SlowTransport>(hub, r, &gate));
    std::vector<std::shared_ptr<Work>> works;
    BucketedReducer reducer(
        std::vector<size_t>(kBuckets, 5), 5 * sizeof(float),
        BucketedReducer::AsyncReduceFn([&](int bucket, float* data, size_t count) {
          std::shared_ptr<Work> work = comm.AllReduceSumAsync(BufferRef::Host(data, count));
          works.push_back(work);
          const int in_flight = static_cast<int>(std::count_if(
              works.begin(), works.end(), [](const auto& w) { return !w->IsCompleted(); }));
          most_in_flight[r] = std::max(most_in_flight[r], in_flight);
          if (bucket == 1) {
            std::lock_guard<std::mutex> lock(mu);
            if (++issued_second == kRanks) gate.Open();
          }
          return work;
        }));
    ASSERT_EQ(reducer.num_buckets(), kBuckets);
    reducer.BeginStep();
    for (size_t i = 0; i < reducer.size(); ++i) reducer.data()[i] = static_cast<float>(r + 1 + i);
    for (int t = 0; t < kBuckets; ++t) reducer.MarkReady(t);
    ASSERT_TRUE(reducer.FinishStep().ok());
    results[r].assign(reducer.data(), reducer.data() + reducer.size());
    for (const auto& work : works) {
      EXPECT_TRUE(work->IsCompleted());
      work_bytes[r] += work->bytes_sent();
    }
    counted_bytes[r] = comm.bytes_sent();
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_GE(most_in_flight[r], 2) << "rank " << r;
    ASSERT_EQ(results[r].size(), static_cast<size_t>(5 * kBuckets));
    for (size_t i = 0; i < results[r].size(); ++i) {
      EXPECT_EQ(results[r][i], static_cast<float>(3 + 2 * i)) << "rank " << r << " element " << i;
    }
    // 2(N-1)/N of every bucket's bytes, as the transport counted them.
    EXPECT_EQ(work_bytes[r], counted_bytes[r]);
    int64_t sent = 0, received = 0;
    RingAllReduceBytes(5, kRanks, r, &sent, &received);
    EXPECT_EQ(work_bytes[r], kBuckets * sent);
  }
}

}  // namespace
}  // namespace hptrain::comm
