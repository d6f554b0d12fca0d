#include "runtime/comm/bucketed_reducer.h"

#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace hptrain::comm
